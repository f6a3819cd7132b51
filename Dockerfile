# syntax=docker/dockerfile:1
# Build a wheel in a throwaway stage, install it into a slim runtime without compilers or caches.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY webhook ./webhook
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="gpu-admission" \
      org.opencontainers.image.description="Kubernetes admission webhook keeping multi-GPU AI workloads on homogeneous, fitting GPU hardware" \
      org.opencontainers.image.source="https://github.com/gpu-admission/gpu-admission" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gpu-admission"]
CMD ["check", "--help"]

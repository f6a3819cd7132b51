# syntax=docker/dockerfile:1
# gpu-admission: the admission webhook server.
#   docker build -t gpu-admission:0.1.0 .
# Stage 1 builds the project's wheel and the wheels of its dependencies (with the server extra:
# `pip install gpu-admission` alone is the light CI install of `check`); stage 2 installs them,
# offline, into a slim Python without compilers, pip caches or the wheels themselves.
# The base image is pinned by tag; pin it by digest (python:3.11-slim-bookworm@sha256:...) in your
# registry's build, where the digest can be checked.

FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY webhook ./webhook
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[server]"

FROM python:3.11-slim-bookworm
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="gpu-admission" \
      org.opencontainers.image.description="Kubernetes admission webhook keeping multi-GPU AI workloads on homogeneous, fitting GPU hardware" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/gpu-admission/gpu-admission" \
      org.opencontainers.image.url="https://github.com/gpu-admission/gpu-admission" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim-bookworm"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Install from the build stage's wheels only (--no-index: nothing is fetched here), then remove the
# installers: the running image needs neither pip nor setuptools. The wheels are bind-mounted, so
# they never land in a layer.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "gpu-admission[server]==${VERSION}" \
    && pip uninstall --yes pip setuptools wheel \
    && groupadd --system --gid 65532 gpu-admission \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
               --shell /usr/sbin/nologin gpu-admission
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8443
# checkov:skip=CKV_DOCKER_2: Kubernetes ignores HEALTHCHECK; the Deployment's liveness (/healthz) and readiness (/readyz) probes over HTTPS do that job
# The same command as the Deployment (manifests/base/deployment.yaml; a test keeps them equal).
ENTRYPOINT ["gpu-admission"]
CMD ["serve", "--config", "/etc/gpu-admission/policy.yaml", "--cert", "/etc/gpu-admission/tls/tls.crt", "--key", "/etc/gpu-admission/tls/tls.key", "--bind", "0.0.0.0:8443", "--workers", "2", "--threads", "8"]

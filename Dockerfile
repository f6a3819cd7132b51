# syntax=docker/dockerfile:1
# gpu-admission: the admission webhook server.
#   docker build -t gpu-admission:0.1.0 .
# Stage 1 fetches the pinned dependencies and builds the project's wheel; stage 2 installs them,
# offline, into a slim Python without compilers, pip caches or the wheels themselves.
# Supply chain (docs/development.md#the-supply-chain): the base image is named by digest, and every
# Python package comes from requirements/image.lock (setup.cfg's install_requires + the server extra,
# `make lock`), each file checked against the lock's sha256 (--require-hashes) and installed with
# --no-deps, so nothing the lock does not name gets in. The project's wheel is built without build
# isolation, with the build requirements of requirements/build.lock (hashed too).
# The digest: the multi-platform index of python:3.11-slim-bookworm (Python 3.11.16). To move it:
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{json .Manifest.Digest}}'
# (or `skopeo inspect --format '{{.Digest}}' docker://docker.io/library/python:3.11-slim-bookworm`,
# or `crane digest python:3.11-slim-bookworm`), then replace it in both FROM lines.

FROM python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91 AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY requirements/image.lock requirements/build.lock ./requirements/
# The lock's files as they are on the index (wheels only: nothing is built from an sdist, which would
# run its own setup code and fetch unhashed build requirements), checked against the lock's hashes;
# then the build requirements, for the project's own wheel below.
RUN pip wheel --no-cache-dir --require-hashes --no-deps --only-binary=:all: --wheel-dir /wheels \
        -r requirements/image.lock \
    && cp requirements/image.lock /wheels/image.lock \
    && pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: -r requirements/build.lock
COPY pyproject.toml setup.cfg README.md LICENSE ./
COPY webhook ./webhook
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --no-index --wheel-dir /wheels/project .

FROM python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="gpu-admission" \
      org.opencontainers.image.description="Kubernetes admission webhook keeping multi-GPU AI workloads on homogeneous, fitting GPU hardware" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/gpu-admission/gpu-admission" \
      org.opencontainers.image.url="https://github.com/gpu-admission/gpu-admission" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim-bookworm" \
      org.opencontainers.image.base.digest="sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Install from the build stage's wheels only (--no-index: nothing is fetched here): the lock's, each
# checked against its hash again, then the project's own, both with --no-deps; `pip check` fails the
# build if the lock misses a dependency. Then remove the installers: the running image needs neither
# pip nor setuptools. The wheels are bind-mounted, so they never land in a layer.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels --require-hashes --no-deps -r /wheels/image.lock \
    && pip install --no-cache-dir --no-index --find-links=/wheels/project --no-deps "gpu-admission==${VERSION}" \
    && pip check \
    && pip uninstall --yes pip setuptools wheel \
    && groupadd --system --gid 65532 gpu-admission \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
               --shell /usr/sbin/nologin gpu-admission
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8443 8081
# checkov:skip=CKV_DOCKER_2: Kubernetes ignores HEALTHCHECK; the Deployment's liveness (/healthz) and readiness (/readyz) probes on the probe port (8081, HTTP) do that job
# The same command as the Deployment (manifests/base/deployment.yaml; a test keeps them equal).
ENTRYPOINT ["gpu-admission"]
CMD ["serve", "--config", "/etc/gpu-admission/policy.yaml", "--cert", "/etc/gpu-admission/tls/tls.crt", "--key", "/etc/gpu-admission/tls/tls.key", "--bind", "0.0.0.0:8443", "--probe-bind", "0.0.0.0:8081", "--workers", "2", "--threads", "8"]

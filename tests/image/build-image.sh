#!/usr/bin/env bash
# Build the project's container image here, where no container registry answers: buildah (Debian's
# package) builds the Dockerfile as it is, on a locally bootstrapped stand-in for its FROM
# (python:3.11-slim-bookworm): Debian bookworm minbase from the Debian mirror, Debian's python3
# (3.11) with a venv at /usr/local so `python` and `pip` are where the official image has them,
# tagged localhost/python:3.11-slim-bookworm so the Dockerfile's own FROM finds it. The release
# image is built on the registry's python:3.11-slim-bookworm; this stand-in is for tests.
#
# The Dockerfile names its base by digest (python:3.11-slim-bookworm@sha256:...), which only the
# registry can serve: the build here reads a copy of the Dockerfile whose FROM lines name the stand-in
# instead, and that is the only difference (every FROM line must be the digest-pinned base).
#
# Cached outside the checkout: the base by Debian release, the image by the hash of the Dockerfile,
# .dockerignore, the locks and the package's files. Then writes the image's SBOM (CycloneDX JSON,
# tests/image/sbom.py, from requirements/image.lock) to build/sbom.cdx.json, on every run.
# Prints the image name on stdout.
# Environment: GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission), IMAGE (default gpu-admission:test),
# SBOM (default build/sbom.cdx.json), SBOM_PYTHON (with cyclonedx-bom, a test extra; default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
IMAGE=${IMAGE:-gpu-admission:test}
SBOM=${SBOM:-build/sbom.cdx.json}
SBOM_PYTHON=${SBOM_PYTHON:-.venv/bin/python}
BASE=localhost/python:3.11-slim-bookworm
FROM_PINNED='^FROM python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}( |$)'
log() { echo "build-image: $*" >&2; }

need() {  # the tools, from Debian's packages
  command -v buildah >/dev/null && command -v podman >/dev/null && command -v debootstrap >/dev/null && return 0
  log "installing buildah, podman and debootstrap from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah podman debootstrap runc >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah podman debootstrap runc >&2; }
}
need

# ---------------------------------------------------------------- the stand-in base
if ! buildah images --quiet "$BASE" >/dev/null 2>&1 || [ -z "$(buildah images --quiet "$BASE" 2>/dev/null)" ]; then
  t0=$(date +%s)
  root=$CACHE/image-base/bookworm
  if [ ! -x "$root/usr/local/bin/pip" ]; then
    rm -rf "$root" && mkdir -p "$root"
    mirror=$(grep -hoE 'https?://[^ ]+/debian$' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1 || true)
    log "debootstrap bookworm minbase from ${mirror:-http://deb.debian.org/debian}"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" \
      "${mirror:-http://deb.debian.org/debian}" >&2
    chroot "$root" /usr/bin/python3 -m venv --upgrade-deps /usr/local >&2 || chroot "$root" /usr/bin/python3 -m venv /usr/local >&2
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  fi
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$root"/. "$mnt"/
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd '["python3"]' "$ctr"
  buildah commit --quiet "$ctr" "$BASE" >/dev/null
  buildah rm "$ctr" >/dev/null
  log "stand-in base $BASE in $(( $(date +%s) - t0 )) s"
fi

# ---------------------------------------------------------------- the image, by content hash
sbom() {
  "$SBOM_PYTHON" tests/image/sbom.py --image "$IMAGE" --built-on "$BASE (a debootstrapped stand-in for the Dockerfile's FROM)" \
    --output "$SBOM" >&2
  log "SBOM $SBOM"
}

hash=$( (cat Dockerfile .dockerignore requirements/image.lock requirements/build.lock pyproject.toml setup.cfg README.md; find webhook -type f -name '*.py' -o -type f -name '*.yaml' | sort | xargs cat) | sha256sum | cut -c1-16)
if [ "$(buildah inspect --format '{{index .ImageAnnotations "gpu-admission.hash"}}' "$IMAGE" 2>/dev/null || true)" = "$hash" ]; then
  sbom
  echo "$IMAGE"
  exit 0
fi
froms=$(grep -cE '^FROM ' Dockerfile || true)
pinned=$(grep -cE "$FROM_PINNED" Dockerfile || true)
if [ "$froms" -eq 0 ] || [ "$froms" != "$pinned" ]; then
  log "every FROM line of the Dockerfile must be python:3.11-slim-bookworm@sha256:<digest> ($pinned of $froms are)"
  exit 1
fi
containerfile=$(mktemp --suffix=.Containerfile)
trap 'rm -f "$containerfile"' EXIT
sed -E "s#^FROM python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}#FROM $BASE#" Dockerfile > "$containerfile"
t0=$(date +%s)
pipconf=()
[ -f /etc/pip.conf ] && pipconf+=(-v /etc/pip.conf:/etc/pip.conf:ro)
buildah build --isolation chroot --pull=never --layers=false --quiet \
  "${pipconf[@]}" -v /etc/ssl/certs:/etc/ssl/certs:ro \
  --annotation "gpu-admission.hash=$hash" -f "$containerfile" --ignorefile .dockerignore -t "$IMAGE" . >&2
log "built $IMAGE in $(( $(date +%s) - t0 )) s"
sbom
echo "$IMAGE"

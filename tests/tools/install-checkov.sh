#!/usr/bin/env bash
# Install checkov (the IaC security scanner the suite runs over manifests/ and the Dockerfile) into
# its own virtualenv, once per version, cached outside the checkout. Prints the bin directory.
#
# Why not in the test extras: checkov pins packaging<24 (pytest needs >=24) and, through boto3 and
# botocore, python-dateutil<3 (the kubernetes client needs >=3), so it cannot share .venv.
# The version is pinned so that a new checkov release with new checks cannot turn the suite red by
# itself; raise it on purpose and fix or explain what the new checks find.
#
# Environment: CHECKOV_VERSION (default 3.3.30), GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission),
#              PYTHON (default python3).
set -euo pipefail

CHECKOV_VERSION=${CHECKOV_VERSION:-3.3.30}
CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
OUT=$CACHE/checkov-$CHECKOV_VERSION
PYTHON=${PYTHON:-python3}

if [ -f "$OUT/.complete" ] && [ -x "$OUT/bin/checkov" ]; then
  echo "$OUT/bin"
  exit 0
fi

echo "install-checkov: installing checkov $CHECKOV_VERSION into $OUT" >&2
# a half-finished install (no .complete) is thrown away and redone
rm -rf "$OUT"
"$PYTHON" -m venv "$OUT"
"$OUT/bin/pip" install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION" >&2
touch "$OUT/.complete"
echo "$OUT/bin"

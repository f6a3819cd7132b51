#!/usr/bin/env bash
# Obtain promtool (Prometheus's rule checker and rule unit-test runner) for
# tests/cli/test_monitoring.py, once, cached outside the checkout. Prints the directory holding it.
#
# In order:
#   1. PROMTOOL=/path/to/promtool, if set and executable (nothing is installed);
#   2. Debian's package: `apt-get download prometheus` and promtool extracted from the .deb into the
#      cache (dpkg-deb -x). Nothing is installed system-wide: no prometheus service is set up or
#      started, no root needed beyond reading the apt lists (run `apt-get update` once on a machine
#      whose lists are empty);
#   3. its Go module, github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_GO_VERSION, built in a
#      wrapper module into the cache (needs Go and the module proxy; minutes on 2 cores, see below).
# PROMTOOL_SOURCE=go skips 1 and 2 (to try the fallback).
# When all fail it exits 3 with the reason on stderr; the test then skips with that reason.
#
# Environment: GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission), PROMTOOL,
#              PROMTOOL_GO_VERSION (default v0.55.1, Prometheus 2.55.1; Go module versions are v0.x).
set -euo pipefail

CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
GO_VERSION=${PROMTOOL_GO_VERSION:-v0.55.1}

SOURCE=${PROMTOOL_SOURCE:-any}

if [ -n "${PROMTOOL:-}" ] && [ -x "$PROMTOOL" ]; then
  dirname "$PROMTOOL"
  exit 0
fi

dirs=("$CACHE/promtool-go-$GO_VERSION")
[ "$SOURCE" = go ] || dirs=("$CACHE"/promtool-deb-*/usr/bin "${dirs[@]}")
for dir in "${dirs[@]}"; do
  if [ -f "$dir/.complete" ] && [ -x "$dir/promtool" ]; then
    echo "$dir"
    exit 0
  fi
done

reasons=()

# 2. Debian's package, extracted
if [ "$SOURCE" = go ]; then
  reasons+=("PROMTOOL_SOURCE=go")
elif command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if (cd "$tmp" && apt-get download prometheus >&2 2>"$tmp/apt.err"); then
    deb=$(ls "$tmp"/prometheus_*.deb)
    version=$(dpkg-deb -f "$deb" Version | tr -c 'A-Za-z0-9.+_\n-' '_')
    out=$CACHE/promtool-deb-$version
    rm -rf "$out"
    mkdir -p "$out"
    dpkg-deb -x "$deb" "$tmp/x"
    mkdir -p "$out/usr/bin"
    cp "$tmp/x/usr/bin/promtool" "$out/usr/bin/promtool"
    if "$out/usr/bin/promtool" --version >&2; then
      touch "$out/usr/bin/.complete"
      echo "install-promtool: promtool from Debian's prometheus $version in $out/usr/bin" >&2
      echo "$out/usr/bin"
      exit 0
    fi
    reasons+=("the promtool of Debian's prometheus $version does not run")
  else
    reasons+=("apt-get download prometheus failed: $(tail -1 "$tmp/apt.err")")
  fi
else
  reasons+=("no apt-get/dpkg-deb (not Debian)")
fi

# 3. the Go module. Not `go install ...@version`: prometheus's go.mod has replace directives (klog ->
# klog-gokit), which Go refuses in a module installed that way. A throwaway wrapper module with the
# same replaces builds it, as tests/e2e/build-control-plane.sh does for Kubernetes.
if command -v go >/dev/null; then
  out=$CACHE/promtool-go-$GO_VERSION
  rm -rf "$out"
  mkdir -p "$out/src"
  echo "install-promtool: building github.com/prometheus/prometheus/cmd/promtool@$GO_VERSION" >&2
  if (cd "$out/src" \
      && go mod init promtool-build >&2 2>&1 \
      && go mod edit -replace k8s.io/klog=github.com/simonpasquier/klog-gokit@v0.3.0 \
                     -replace k8s.io/klog/v2=github.com/simonpasquier/klog-gokit/v3@v3.5.0 \
      && go get "github.com/prometheus/prometheus/cmd/promtool@$GO_VERSION" >&2 \
      && go build -trimpath -o "$out/promtool" github.com/prometheus/prometheus/cmd/promtool >&2) \
     && "$out/promtool" --version >&2; then
    touch "$out/.complete"
    echo "$out"
    exit 0
  fi
  reasons+=("building github.com/prometheus/prometheus/cmd/promtool@$GO_VERSION from its Go module failed")
else
  reasons+=("no Go toolchain to build github.com/prometheus/prometheus/cmd/promtool")
fi

joined=$(printf '%s; ' "${reasons[@]}")
echo "promtool unavailable: ${joined%; }" >&2
exit 3

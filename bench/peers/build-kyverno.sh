#!/usr/bin/env bash
# Builds Kyverno's admission controller (github.com/kyverno/kyverno/cmd/kyverno) from its Go module,
# for the end-to-end latency benchmark (bench/e2e_latency.py, configuration "kyverno"). Only the
# `make bench` path calls this: it is not part of `make test` or .ci/run.
#
# Cached outside the checkout, keyed by version: $CACHE/kyverno-<version>/bin/kyverno, beside
# module.json (version, module directory in the Go module cache: the CRDs under config/crds/ are read
# from there, never copied into the repository) and build-stats.txt. Prints the bin directory on
# stdout; progress on stderr.
#
# Why a wrapper module: kyverno's go.mod carries a replace directive
# (k8s.io/pod-security-admission => github.com/kyverno/pod-security-admission), which Go ignores in a
# dependency, so `go install github.com/kyverno/kyverno/cmd/kyverno@vX` resolves the wrong module.
# A throwaway module repeats every replace of kyverno's go.mod (read with `go mod edit -json`), as
# tests/e2e/build-control-plane.sh does for kubernetes.
#
# Measured (v1.19.1, Go 1.26, 2 cores shared with a control-plane build and a test run): 640 s wall
# (go build alone 599 s), peak RSS 2.4 GB, binary 135 MB (-s -w); cached runs print the path at once.
#
# Environment: KYVERNO_VERSION (default v1.19.1 when the module proxy serves it, else the newest it
#              serves), GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

MODULE=github.com/kyverno/kyverno
CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
log() { echo "build-kyverno: $*" >&2; }

command -v go >/dev/null || { log "go is required (Go 1.26 is on these machines)"; exit 1; }

if [ -n "${KYVERNO_VERSION:-}" ]; then
  VERSION=$KYVERNO_VERSION
elif [ -f "$CACHE/kyverno-v1.19.1/.complete" ]; then
  VERSION=v1.19.1
else
  VERSION=v1.19.1
  if ! (cd "${TMPDIR:-/tmp}" && go mod download -json "$MODULE@$VERSION" >/dev/null 2>&1); then
    VERSION=$(cd "${TMPDIR:-/tmp}" && go list -m -versions "$MODULE" | tr ' ' '\n' | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -1)
    [ -n "$VERSION" ] || { log "the Go module proxy serves no release of $MODULE"; exit 1; }
    log "v1.19.1 is not served: using the newest release served, $VERSION"
  fi
fi

OUT=$CACHE/kyverno-$VERSION
BIN=$OUT/bin
if [ -f "$OUT/.complete" ] && [ -x "$BIN/kyverno" ] && [ -f "$OUT/module.json" ] &&
   [ -d "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Dir"])' "$OUT/module.json")/config/crds" ]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN" "$OUT/mod"
start=$(date +%s)
cd "$OUT/mod"
[ -f go.mod ] || go mod init gpu-admission.io/kyverno-peer >/dev/null 2>&1
info=$(go mod download -json "$MODULE@$VERSION")
gomod=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"Version": d["Version"], "Dir": d["Dir"], "GoMod": d["GoMod"]}))' \
  <<<"$info" > "$OUT/module.json.tmp"

# every replace directive of kyverno's go.mod, repeated here (module-path replacements only: a local
# directory replacement could not be resolved outside kyverno's own repository)
mapfile -t replaces < <(python3 "$HERE/go_replaces.py" "$gomod")
log "kyverno $VERSION: ${#replaces[@]} replace directive(s) repeated: ${replaces[*]:-none}"
[ ${#replaces[@]} -eq 0 ] || go mod edit "${replaces[@]}"
go get "$MODULE/cmd/kyverno@$VERSION" >&2
t0=$(date +%s)
log "building $MODULE/cmd/kyverno $VERSION (several minutes on 2 cores) ..."
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $MODULE/pkg/version.BuildVersion=$VERSION" \
  -o "$BIN/kyverno" "$MODULE/cmd/kyverno"
build_s=$(( $(date +%s) - t0 ))
log "built kyverno in $build_s s"
mv "$OUT/module.json.tmp" "$OUT/module.json"

elapsed=$(( $(date +%s) - start ))
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kyverno: $VERSION  go: $(go version | awk '{print $3}')"
  echo "build seconds: $elapsed (go build alone: $build_s)"
  echo "binary: $(du -h "$BIN/kyverno" | cut -f1)"
  echo "go module cache: $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)"
  echo "go build cache: $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)"
} > "$OUT/build-stats.txt"
touch "$OUT/.complete"
log "done in $elapsed s: $(tr '\n' ';' < "$OUT/build-stats.txt")"
echo "$BIN"

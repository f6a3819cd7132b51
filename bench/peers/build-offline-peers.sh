#!/usr/bin/env bash
# Builds the two offline peers of `gpu-admission check` for `make bench` (bench/check_bench.py):
#
#   kyverno  the Kyverno CLI (`kyverno apply`), github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno
#   gator    Gatekeeper's CLI (`gator test`), github.com/open-policy-agent/gatekeeper/v3/cmd/gator
#
# each from its Go module, once per version, cached outside the checkout:
#   $CACHE/kyverno-cli-<version>/bin/kyverno   (kyverno-<version>/ is the admission controller of
#                                               bench/peers/build-kyverno.sh: a different binary)
#   $CACHE/gator-<version>/bin/gator
# and links both into $CACHE/offline-peers/kyverno-cli-<v>-gator-<v>/bin/, which it prints on stdout
# (progress on stderr). Beside the links: <tool>.version, <tool>.build-stats (build seconds, size) and,
# for a peer that could not be built, <tool>.error (why, one line) instead of the link: the benchmark
# records {"error": ...} for that peer and the rest still runs. Exit 0 when the directory was made,
# even when a peer failed; 1 only without go.
#
# Only `make bench` uses this: not `make test`, not .ci/run.
#
# Why a wrapper module: kyverno's go.mod carries a replace directive (k8s.io/pod-security-admission
# => github.com/kyverno/pod-security-admission) that Go ignores in a dependency, so
# `go install .../kubectl-kyverno@vX` resolves the wrong module. A throwaway module repeats every
# replace of the tool's go.mod (read with `go mod edit -json`), as tests/e2e/build-control-plane.sh
# does for kubernetes. Gatekeeper v3.23.1's go.mod has none; the same code handles it.
#
# Environment: KYVERNO_VERSION (default v1.19.1), GATOR_VERSION (default: the newest release of
#              github.com/open-policy-agent/gatekeeper/v3 that `go list -m -versions` shows),
#              GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
KYVERNO_MODULE=github.com/kyverno/kyverno
GATOR_MODULE=github.com/open-policy-agent/gatekeeper/v3
log() { echo "build-offline-peers: $*" >&2; }

command -v go >/dev/null || { log "go is required (Go 1.26 is on these machines)"; exit 1; }

newest() {  # newest MODULE: the newest plain release the module proxy lists
  (cd "${TMPDIR:-/tmp}" && go list -m -versions "$1" 2>/dev/null) | tr ' ' '\n' |
    grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -1
}

KYVERNO_VERSION=${KYVERNO_VERSION:-v1.19.1}
if [ -z "${GATOR_VERSION:-}" ]; then
  # the newest cached build is good enough when the proxy cannot be asked (offline re-runs)
  GATOR_VERSION=$(newest "$GATOR_MODULE")
  if [ -z "$GATOR_VERSION" ]; then
    GATOR_VERSION=$(ls -d "$CACHE"/gator-v* 2>/dev/null | sed 's|.*/gator-||' | sort -V | tail -1)
  fi
  GATOR_VERSION=${GATOR_VERSION:-unknown}
fi

LINKS=$CACHE/offline-peers/kyverno-cli-$KYVERNO_VERSION-gator-$GATOR_VERSION/bin
mkdir -p "$LINKS"

# build_tool NAME MODULE VERSION PACKAGE DIR LDFLAGS: builds DIR/bin/NAME (unless DIR/.complete),
# writes DIR/build-stats.txt; on failure returns 1 with the reason in DIR/error.txt
build_tool() {
  local name=$1 module=$2 version=$3 package=$4 dir=$5 ldflags=$6
  local bin=$dir/bin start info gomod t0 build_s elapsed why
  if [ -f "$dir/.complete" ] && [ -x "$bin/$name" ]; then
    return 0
  fi
  rm -f "$dir/error.txt"
  mkdir -p "$bin" "$dir/mod"
  start=$(date +%s)
  cd "$dir/mod" || return 1
  [ -f go.mod ] || go mod init "gpu-admission.io/$name-offline-peer" >/dev/null 2>&1
  if ! info=$(go mod download -json "$module@$version" 2>"$dir/download.log"); then
    # -json reports the error in its output ("Error"), not on stderr
    why=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("Error", ""))' <<<"$info" 2>/dev/null)
    echo "go mod download $module@$version failed: ${why:-$(tail -c 400 "$dir/download.log" | tr '\n' ' ')}" > "$dir/error.txt"
    return 1
  fi
  gomod=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
  # every replace directive of the tool's go.mod, repeated (module-path replacements only: a local
  # directory replacement cannot be resolved outside the tool's own repository)
  local replaces=()
  if ! python3 "$HERE/go_replaces.py" "$gomod" > "$dir/replaces.txt" 2>"$dir/replace.log"; then
    echo "reading the replace directives of $module@$version: $(tr '\n' ' ' < "$dir/replace.log")" > "$dir/error.txt"
    return 1
  fi
  mapfile -t replaces < "$dir/replaces.txt"
  log "$name $version: ${#replaces[@]} replace directive(s) repeated: ${replaces[*]:-none}"
  [ ${#replaces[@]} -eq 0 ] || go mod edit "${replaces[@]}"
  if ! go get "$package@$version" >&2 2>"$dir/get.log"; then
    cat "$dir/get.log" >&2
    echo "go get $package@$version failed: $(tail -c 400 "$dir/get.log" | tr '\n' ' ')" > "$dir/error.txt"
    return 1
  fi
  t0=$(date +%s)
  log "building $package $version (minutes on 2 cores) ..."
  if ! CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/$name.tmp" "$package" 2>"$dir/build.log"; then
    cat "$dir/build.log" >&2
    echo "go build $package@$version failed: $(tail -c 400 "$dir/build.log" | tr '\n' ' ')" > "$dir/error.txt"
    return 1
  fi
  mv "$bin/$name.tmp" "$bin/$name"
  build_s=$(( $(date +%s) - t0 ))
  elapsed=$(( $(date +%s) - start ))
  {
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "$name: $module $version ($package)  go: $(go version | awk '{print $3}')"
    echo "build seconds: $elapsed (go build alone: $build_s)"
    echo "binary: $(du -h "$bin/$name" | cut -f1) ($(stat -c %s "$bin/$name") bytes)"
    echo "go module cache: $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)"
    echo "go build cache: $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)"
  } > "$dir/build-stats.txt"
  touch "$dir/.complete"
  log "built $name $version in $elapsed s: $(tr '\n' ';' < "$dir/build-stats.txt")"
}

link_tool() {  # link_tool NAME VERSION DIR
  local name=$1 version=$2 dir=$3
  rm -f "$LINKS/$name" "$LINKS/$name.error" "$LINKS/$name.version" "$LINKS/$name.build-stats"
  echo "$version" > "$LINKS/$name.version"
  if [ -f "$dir/.complete" ] && [ -x "$dir/bin/$name" ]; then
    ln -s "$dir/bin/$name" "$LINKS/$name"
    cp "$dir/build-stats.txt" "$LINKS/$name.build-stats"
  else
    cat "$dir/error.txt" 2>/dev/null > "$LINKS/$name.error" || true
    [ -s "$LINKS/$name.error" ] || echo "$name $version was not built (no reason recorded)" > "$LINKS/$name.error"
    log "$name: $(cat "$LINKS/$name.error")"
  fi
}

# gator first: it shares fewer packages with the Kyverno admission controller that
# bench/peers/build-kyverno.sh may be building at the same time (the Go build cache then serves the CLI)
GATOR_DIR=$CACHE/gator-$GATOR_VERSION
if [ "$GATOR_VERSION" = unknown ]; then
  mkdir -p "$GATOR_DIR"
  echo "the Go module proxy lists no release of $GATOR_MODULE (go list -m -versions)" > "$GATOR_DIR/error.txt"
else
  build_tool gator "$GATOR_MODULE" "$GATOR_VERSION" "$GATOR_MODULE/cmd/gator" "$GATOR_DIR" \
    "-X $GATOR_MODULE/pkg/version.Version=$GATOR_VERSION"
fi
link_tool gator "$GATOR_VERSION" "$GATOR_DIR"


KYVERNO_DIR=$CACHE/kyverno-cli-$KYVERNO_VERSION
build_tool kyverno "$KYVERNO_MODULE" "$KYVERNO_VERSION" "$KYVERNO_MODULE/cmd/cli/kubectl-kyverno" "$KYVERNO_DIR" \
  "-X $KYVERNO_MODULE/pkg/version.BuildVersion=$KYVERNO_VERSION"
link_tool kyverno "$KYVERNO_VERSION" "$KYVERNO_DIR"

echo "$LINKS"

#!/usr/bin/env bash
# Build helm v3 from its Go module (helm.sh/helm/v3/cmd/helm), once per version, cached outside the
# checkout at ${GPU_ADMISSION_CACHE:-~/.cache/gpu-admission}/helm-<version>/helm. Prints the binary's
# path on stdout; builds only when it is missing.
#
# Why a wrapper module: `go install helm.sh/helm/v3/cmd/helm@vX` refuses a module whose go.mod has
# replace directives (helm's has had some); a throwaway module that requires helm and copies any of
# its replace directives builds it either way, as tests/e2e/build-control-plane.sh does for kubernetes.
#
# Environment: HELM_VERSION (default v3.22.0), GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission).
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.22.0}
CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
OUT=$CACHE/helm-$HELM_VERSION
BIN=$OUT/helm
RECIPE=2  # bump when the build below changes: a binary built by an older recipe is rebuilt
log() { echo "build-helm: $*" >&2; }

if [ -x "$BIN" ] && [ "$(cat "$OUT/recipe" 2>/dev/null)" = "$RECIPE" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { log "go is required (Go 1.26 is on these machines)"; exit 1; }
start=$(date +%s)
mkdir -p "$OUT/module"
cd "$OUT/module"
[ -f go.mod ] || go mod init gpu-admission.io/helm >/dev/null 2>&1
info=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION")
gomod=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
commit=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", ""))' <<<"$info")
# copy helm's own replace directives (single-line and block form), if any
replaces=()
while read -r old new; do
  [ -n "$old" ] && replaces+=("-replace=$old=$new")
done < <(python3 - "$gomod" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
lines = []
for block in re.findall(r'^replace\s*\((.*?)^\)', text, re.S | re.M):
    lines += block.splitlines()
lines += re.findall(r'^replace\s+([^(].*)$', text, re.M)
for line in lines:
    line = line.split('//')[0].strip()
    if '=>' not in line:
        continue
    old, new = (part.strip().split() for part in line.split('=>'))
    print('@'.join(old), '@'.join(new))
PY
)
if [ ${#replaces[@]} -gt 0 ]; then
  log "helm $HELM_VERSION: ${#replaces[@]} replace directives copied"
  go mod edit "${replaces[@]}"
fi
go get "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
# helm's Makefile: the version, and the Kubernetes version `helm template` and `helm lint` assume
# without a cluster (Capabilities.KubeVersion) = the client-go it is built with, v0.X.Y -> 1.X;
# without these it assumes v1.20, and a chart's kubeVersion constraint fails
clientgo=$(go list -m -f '{{.Version}}' k8s.io/client-go)   # v0.37.0
k8s_minor=$(cut -d. -f2 <<<"$clientgo")
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitCommit=$commit -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
done
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN.tmp" helm.sh/helm/v3/cmd/helm
mv "$BIN.tmp" "$BIN"
echo "$RECIPE" > "$OUT/recipe"
elapsed=$(( $(date +%s) - start ))
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "helm: $HELM_VERSION ${commit:+($commit) }client-go: $clientgo  go: $(go version | awk '{print $3}')"
  echo "build seconds: $elapsed"
  echo "binary: $(du -h "$BIN" | cut -f1)"
} > "$OUT/build-stats.txt"
log "done in $elapsed s: $(tr '\n' ';' < "$OUT/build-stats.txt")"
echo "$BIN"

#!/usr/bin/env bash
# Build a real Kubernetes control plane (kube-apiserver, kube-scheduler, kubectl) and etcd from Go
# modules, once per version, cached outside the checkout. Prints the bin directory on stdout.
#
# Why a wrapper module: `go install k8s.io/kubernetes/cmd/...@vX` does not work, because the
# kubernetes go.mod requires every staging module at v0.0.0 and relies on replace directives that Go
# ignores in dependencies. A throwaway module with one replace per staging module fixes that.
#
# Environment: K8S_VERSION (default v1.36.3), ETCD_VERSION (default v3.6.16),
#              GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
OUT=$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION
BIN=$OUT/bin
BINARIES=(kube-apiserver kube-scheduler kubectl etcd)

complete() {
  [ -f "$OUT/.complete" ] || return 1
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}

if complete; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { echo "build-control-plane: go is required (Go 1.26 is on these machines)" >&2; exit 1; }
mkdir -p "$BIN" "$OUT/k8s" "$OUT/etcd"
log() { echo "build-control-plane: $*" >&2; }
start=$(date +%s)

# ---------------------------------------------------------------- kubernetes
minor_patch=${K8S_VERSION#v1.}            # 36.3
staging="v0.${minor_patch}"               # v0.36.3
minor=${minor_patch%%.*}
cd "$OUT/k8s"
if [ ! -f go.mod ]; then
  go mod init gpu-admission.io/control-plane >/dev/null 2>&1
fi
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
replaces=()
while read -r name; do
  replaces+=("-replace=$name=$name@$staging")
done < <(grep -E '^[[:space:]]*k8s\.io/[A-Za-z0-9._-]+ => \./staging/' "$gomod" | awk '{print $1}')
log "kubernetes $K8S_VERSION: ${#replaces[@]} staging modules pinned at $staging"
go mod edit "${replaces[@]}"
go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" \
       "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
for cmd in kube-apiserver kube-scheduler kubectl; do
  t0=$(date +%s)
  log "building $cmd ..."
  go build -trimpath -ldflags "$ldflags" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  log "built $cmd in $(( $(date +%s) - t0 )) s"
done

# ---------------------------------------------------------------- etcd (its own module: its
# dependency versions differ from the apiserver's)
cd "$OUT/etcd"
if [ ! -f go.mod ]; then
  go mod init gpu-admission.io/etcd >/dev/null 2>&1
fi
go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
t0=$(date +%s)
go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
log "built etcd in $(( $(date +%s) - t0 )) s"

elapsed=$(( $(date +%s) - start ))
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kubernetes: $K8S_VERSION  etcd: $ETCD_VERSION  go: $(go version | awk '{print $3}')"
  echo "build seconds: $elapsed"
  echo "binaries: $(du -sh "$BIN" | cut -f1)"
  echo "go module cache: $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)"
  echo "go build cache: $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)"
} > "$OUT/build-stats.txt"
touch "$OUT/.complete"
log "done in $elapsed s: $(tr '\n' ';' < "$OUT/build-stats.txt")"
echo "$BIN"

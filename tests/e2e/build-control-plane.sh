#!/usr/bin/env bash
# Build a real Kubernetes control plane (kube-apiserver, kube-scheduler, kube-controller-manager,
# kubectl), etcd and kwok (the fake kubelets of the e2e's GPU nodes), and two workload operators, the
# JobSet controller (sigs.k8s.io/jobset) and the LeaderWorkerSet controller (sigs.k8s.io/lws), from Go
# modules, once per version, cached outside the checkout. The operators' CRDs and webhook
# configurations come from the same module downloads (bin/jobset/, bin/lws/). Prints the bin directory on stdout. Each binary is built
# only when it is missing, so a cache made before a binary was added only builds that one.
#
# Why a wrapper module: `go install k8s.io/kubernetes/cmd/...@vX` does not work, because the
# kubernetes go.mod requires every staging module at v0.0.0 and relies on replace directives that Go
# ignores in dependencies. A throwaway module with one replace per staging module fixes that.
#
# Environment: K8S_VERSION (default v1.36.3), ETCD_VERSION (default v3.6.16),
#              KWOK_VERSION (default v0.8.0), JOBSET_VERSION (default v0.10.1),
#              LWS_VERSION (default v0.8.0), GPU_ADMISSION_CACHE (default ~/.cache/gpu-admission).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
# v0.10.1 is the newest JobSet release the module proxy here serves; LWS v0.8.0 (go 1.25.0 in its
# go.mod) builds with Go 1.26 as is, no replace directive needed
JOBSET_VERSION=${JOBSET_VERSION:-v0.10.1}
LWS_VERSION=${LWS_VERSION:-v0.8.0}
CACHE=${GPU_ADMISSION_CACHE:-$HOME/.cache/gpu-admission}
OUT=$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION
BIN=$OUT/bin
K8S_BINARIES=(kube-apiserver kube-scheduler kube-controller-manager kubectl)
OPERATORS=(jobset lws)
BINARIES=("${K8S_BINARIES[@]}" etcd kwok jobset-controller lws-controller)
KEEP_RUNNING=pod-complete.stage.kwok.x-k8s.io/delay  # see the kwok stages below

# kwok and the operators are keyed by their own versions inside the directory (a stamp beside the
# binaries: kwok.version, jobset.version, lws.version)
if [ -x "$OUT/bin/kwok" ] && [ "$(cat "$OUT/kwok.version" 2>/dev/null)" != "$KWOK_VERSION" ]; then
  rm -f "$OUT/bin/kwok" "$OUT/.complete"
fi
operator_version() { case $1 in jobset) echo "$JOBSET_VERSION" ;; lws) echo "$LWS_VERSION" ;; esac; }
for op in "${OPERATORS[@]}"; do
  if [ "$(cat "$OUT/$op.version" 2>/dev/null)" != "$(operator_version "$op")" ]; then
    rm -rf "$BIN/$op-controller" "$BIN/$op" "$OUT/.complete"
  fi
done

complete() {
  [ -f "$OUT/.complete" ] && [ -f "$BIN/kwok-stages.yaml" ] || return 1
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
  for op in "${OPERATORS[@]}"; do [ -f "$BIN/$op/crds.yaml" ] && [ -f "$BIN/$op/role.yaml" ] || return 1; done
  grep -q "$KEEP_RUNNING" "$BIN/kwok-stages.yaml" || return 1
}

missing() {  # missing NAME...: true when any of them is not built yet
  for b in "$@"; do [ -x "$BIN/$b" ] || return 0; done
  return 1
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
if missing "${K8S_BINARIES[@]}"; then
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
       "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
for cmd in "${K8S_BINARIES[@]}"; do
  missing "$cmd" || continue
  t0=$(date +%s)
  log "building $cmd ..."
  go build -trimpath -ldflags "$ldflags" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  log "built $cmd in $(( $(date +%s) - t0 )) s"
done
fi

# one binary from its own throwaway module: module_build NAME PACKAGE VERSION [LDFLAGS]
# (the module directory is named after NAME without a -controller suffix)
module_build() {
  local dir=${1%-controller}
  mkdir -p "$OUT/$dir"
  cd "$OUT/$dir"
  [ -f go.mod ] || go mod init "gpu-admission.io/$dir" >/dev/null 2>&1
  go get "$2@$3" >&2
  local t0
  t0=$(date +%s)
  go build -trimpath -ldflags "-s -w ${4:-}" -o "$BIN/$1" "$2"
  log "built $1 $3 in $(( $(date +%s) - t0 )) s"
}

# ---------------------------------------------------------------- etcd (its own module: its
# dependency versions differ from the apiserver's)
if missing etcd; then
  module_build etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
fi

# ---------------------------------------------------------------- kwok (its own module too: it pins
# its own client-go; no replace directives, so a plain module build works)
if missing kwok; then
  module_build kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
  echo "$KWOK_VERSION" > "$OUT/kwok.version"
fi
# kwok does nothing without stages: the upstream "fast" set (nodes Ready with lease heartbeats, pods
# Running and Ready at once, completed and deleted pods handled), from the same module's files.
# One addition: the fast pod-complete stage (a Job's Running pod succeeds at once) takes the delay
# of kwok's "general" stage set from the pod annotation pod-complete.stage.kwok.x-k8s.io/delay
# (default 0: unchanged for every pod without it). The operator tests' training pods carry "1h": a
# pod that has succeeded leaves kube-scheduler's cache, so a pod affinity to it no longer counts.
if [ ! -f "$BIN/kwok-stages.yaml" ] || [ "$(cat "$OUT/kwok.version" 2>/dev/null)" != "$KWOK_VERSION" ] ||
   ! grep -q "$KEEP_RUNNING" "$BIN/kwok-stages.yaml"; then
  dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    if [ "$f" = pod/fast/pod-complete.yaml ]; then
      grep -q '^  next:$' "$dir/kustomize/stage/$f" || { log "kwok $KWOK_VERSION: $f has no '  next:'"; exit 1; }
      awk -v key="$KEEP_RUNNING" '/^  next:$/ { print "  delay:"; print "    durationMilliseconds: 0";
             print "    durationFrom:"; print "      expressionFrom: '"'"'.metadata.annotations[\"" key "\"]'"'"'" } { print }' \
        "$dir/kustomize/stage/$f" | grep -v '^---$'
    else
      grep -v '^---$' "$dir/kustomize/stage/$f"
    fi
  done > "$BIN/kwok-stages.yaml.tmp"
  mv "$BIN/kwok-stages.yaml.tmp" "$BIN/kwok-stages.yaml"
fi

# ---------------------------------------------------------------- the JobSet and LeaderWorkerSet
# controllers, each from its own module (their client-go is not the apiserver's; no replace
# directives in either go.mod, so plain module builds work), with the version ldflags of their
# Makefiles (GitCommit = the tag's commit, from the module proxy's Origin). Beside each binary, in
# bin/<op>/: crds.yaml (the module's CRD bases, as the operator's install ships them), role.yaml (the
# controller's own ClusterRole, generated from its kubebuilder RBAC markers) and webhook/ (the
# module's kustomize directory of its webhook configurations), which operators_plane.py renders with
# kubectl and points at the controller's webhook server on loopback.
operator_build() {  # operator_build NAME MODULE VERSION MAIN_PACKAGE CRD_DIR WEBHOOK_DIR ROLE_FILE
  local info dir commit
  cd "$OUT"
  info=$(go mod download -json "$2@$3")
  dir=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <<<"$info")
  commit=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", ""))' <<<"$info")
  if missing "$1-controller"; then
    module_build "$1-controller" "$4" "$3" \
      "-X $2/pkg/version.GitVersion=$3 -X $2/pkg/version.GitCommit=$commit"
  fi
  rm -rf "$BIN/$1"
  mkdir -p "$BIN/$1"
  for f in "$dir/$5"/*.yaml; do echo "---"; grep -v '^---$' "$f"; done > "$BIN/$1/crds.yaml.tmp"
  cp -r "$dir/$6" "$BIN/$1/webhook"
  cp "$dir/$7" "$BIN/$1/role.yaml"
  chmod -R u+w "$BIN/$1"  # files from the module cache are read-only
  mv "$BIN/$1/crds.yaml.tmp" "$BIN/$1/crds.yaml"
  echo "$3" > "$OUT/$1.version"
}
if missing jobset-controller || [ ! -f "$BIN/jobset/role.yaml" ]; then
  operator_build jobset sigs.k8s.io/jobset "$JOBSET_VERSION" sigs.k8s.io/jobset \
    config/components/crd/bases config/components/webhook config/components/rbac/role.yaml
fi
if missing lws-controller || [ ! -f "$BIN/lws/role.yaml" ]; then
  operator_build lws sigs.k8s.io/lws "$LWS_VERSION" sigs.k8s.io/lws/cmd config/crd/bases config/webhook \
    config/rbac/role.yaml
fi

elapsed=$(( $(date +%s) - start ))
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kubernetes: $K8S_VERSION  etcd: $ETCD_VERSION  kwok: $KWOK_VERSION  jobset: $JOBSET_VERSION  lws: $LWS_VERSION  go: $(go version | awk '{print $3}')"
  echo "build seconds: $elapsed"
  echo "binaries: $(du -sh "$BIN" | cut -f1)"
  echo "go module cache: $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)"
  echo "go build cache: $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)"
} > "$OUT/build-stats.txt"
touch "$OUT/.complete"
log "done in $elapsed s: $(tr '\n' ';' < "$OUT/build-stats.txt")"
echo "$BIN"

#!/usr/bin/env bash
# `make test`'s first step: build or fetch every tool the suite needs, with progress on stderr, before
# pytest starts. On a fresh machine this is most of the first run (the control plane from Go modules:
# about 10 minutes on 2 cores); the suite's fixtures call the same scripts and find them cached. Run
# from pytest, each script's output is captured until it ends, which made those minutes silent.
#
# Each step prints when it starts, a line every HEARTBEAT seconds while it runs (what, how long so
# far) and how long it took; a cached tool takes well under a second. A step that fails is said so
# with its own message (the scripts say what is missing and how to get it), and the suite runs
# anyway: the tests that need the tool then fail or skip with that reason, exactly as without this
# step (the suite is the one judge of what a missing tool means).
#
# Environment: HEARTBEAT (default 60), PREPARE_STEPS (below), GPU_ADMISSION_CACHE (where the tools are cached, default
# ~/.cache/gpu-admission), and each script's own (versions, PROMTOOL, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."

HEARTBEAT=${HEARTBEAT:-60}
log() { printf 'make test: [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

step() {
  local what=$1 script=$2 t0=$SECONDS beat rc=0
  log "$what ..."
  ( while sleep "$HEARTBEAT"; do log "  still on $what ($((SECONDS - t0)) s so far)"; done ) &
  beat=$!
  bash "$script" >/dev/null || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    log "$what: FAILED ($script exited $rc after $((SECONDS - t0)) s; its message is above): the tests that need it will say so"
    return 0
  fi
  log "$what: ready ($((SECONDS - t0)) s)"
}

DEFAULT_STEPS="control plane: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok, JobSet, LWS (Go modules)|tests/e2e/build-control-plane.sh
helm (Go module)|tests/tools/build-helm.sh
promtool (Debian's prometheus package, or its Go module)|tests/tools/install-promtool.sh
checkov (its own virtualenv, PyPI)|tests/tools/install-checkov.sh"

# PREPARE_STEPS: other steps, one "what|script" a line (tests/test_prepare.py)
while IFS='|' read -r what script; do
  [ -n "$what" ] && step "$what" "$script"
done <<<"${PREPARE_STEPS:-$DEFAULT_STEPS}"
log "tools ready; the test suite follows (about 12 minutes on 2 cores)"

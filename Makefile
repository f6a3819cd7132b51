# gpu-admission: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

BIND   ?= 127.0.0.1:8443

.PHONY: run test test-core check certs manifests cluster clean help

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)  ## create .venv and install the package with test extras

certs/tls.crt: | $(STAMP)
	$(BIN)/gpu-admission certs --service gpu-admission --namespace gpu-admission --ip 127.0.0.1 --out certs > certs/ca-bundle.b64

certs: certs/tls.crt  ## development CA + serving certificate in certs/ (if absent)

manifests: $(STAMP) certs/tls.crt  ## TLS files for manifests/overlays/generated-certs (then: kubectl apply -k manifests/overlays/generated-certs)
	$(BIN)/python -m webhook.cli.install --certs certs --overlay manifests/overlays/generated-certs

run: $(STAMP) certs/tls.crt  ## start the admission server on https://127.0.0.1:8443 with the embedded default policy
	$(BIN)/gpu-admission serve --cert certs/tls.crt --key certs/tls.key --bind $(BIND)

check: $(STAMP)  ## judge the bundled examples offline, as CI would
	$(BIN)/gpu-admission check examples/

.PHONY: doc-samples
doc-samples: $(STAMP)  ## regenerate the docs' sample Warning: lines (blocks marked <!-- sample: NAME -->) from the code
	$(BIN)/python tests/tools/doc_samples.py

.PHONY: webhook-rules
webhook-rules: $(STAMP)  ## write the operators' webhook rules into manifests/ and the chart from webhook/core/operators
	$(BIN)/python tests/tools/webhook_rules.py

.PHONY: bench
BENCH_ARGS ?= --baseline bench/results/before-issue17.json
bench: $(STAMP)  ## performance suite against floors (~20 min; BENCH_QUICK=1 for a smoke run): bench/results/, BENCHMARKS.md
	command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)
	command -v hyperfine >/dev/null || (apt-get update && apt-get install -y hyperfine) || true
	$(BIN)/pip install --quiet -r bench/requirements.txt
	$(BIN)/python -m bench.run $(BENCH_ARGS)

.PHONY: chart
chart: $(STAMP)  ## lint the Helm chart, compare it with manifests/, install and upgrade it (builds helm once, ~2-4 min)
	$(BIN)/python -m pytest -q -p no:randomly tests/cli/test_chart.py

.PHONY: image
image: $(STAMP)  ## build the container image with buildah (gpu-admission:test; a debootstrapped stand-in for its FROM here) and its SBOM, build/sbom.cdx.json
	SBOM_PYTHON=$(BIN)/python tests/image/build-image.sh

# ---- supply chain (issue 25, point 8): the image installs only these pins, each file checked by sha256
# requirements/image.lock: setup.cfg's install_requires + the server extra, resolved for the image's
# Python (3.11, Linux); requirements/build.lock: pyproject.toml's build requirements (the project's
# own wheel is built offline with them). `make lock` keeps the current pins where setup.cfg still
# allows them; `make lock LOCK_UPGRADE=--upgrade` moves every pin to the newest allowed release.
# docs/development.md#the-supply-chain says how to bump the pins and the base image's digest.
LOCK_UPGRADE ?=
LOCK_FLAGS   := --quiet --generate-hashes --python-version 3.11 --python-platform linux --custom-compile-command 'make lock' $(LOCK_UPGRADE)
.PHONY: lock
lock: $(STAMP)  ## regenerate requirements/image.lock and build.lock with --hash lines (LOCK_UPGRADE=--upgrade: newest allowed)
	$(BIN)/pip install --quiet -r requirements/lock-tools.txt
	$(BIN)/uv pip compile setup.cfg --extra server $(LOCK_FLAGS) --output-file requirements/image.lock
	$(BIN)/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' \
	  | $(BIN)/uv pip compile - $(LOCK_FLAGS) --output-file requirements/build.lock

cluster: $(STAMP)  ## local kube-apiserver + kube-scheduler + the webhook + fake GPU nodes, in the foreground (Ctrl-C stops)
	$(BIN)/python tests/e2e/cluster.py

test: $(STAMP)  ## run the whole test suite: builds its tools first with progress (tests/tools/prepare.sh; ~10 min the first time), installs wrk from Debian's packages when missing
	command -v wrk >/dev/null || apt-get install -y -q wrk || (apt-get update -q && apt-get install -y -q wrk) \
	  || echo 'wrk could not be installed (apt-get install wrk): its bench smoke test will fail' >&2
	bash tests/tools/prepare.sh
	$(BIN)/python -m pytest

test-core: $(STAMP)  ## the core's tests and the layout's, no Go tools, 20 examples per property (~25 s): the edit loop
	HYPOTHESIS_PROFILE=quick $(BIN)/python -m pytest -q -m "not e2e and not install" tests/core tests/test_architecture.py tests/test_webhook_rules.py

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info

# ---- reliability (issue 8): figures in RELIABILITY.md ----------------------------------------------
FUZZ_REVIEWS  ?= 300000
FUZZ_EXAMPLES ?= 3000
SOAK_MINUTES  ?= 10

.PHONY: fuzz reliability overload-compare slowloris-compare soak reliability-report

fuzz: $(STAMP)  ## long fuzz run (FUZZ_REVIEWS=300000, a fresh seed), figures into RELIABILITY.md
	mkdir -p bench/reliability/results
	FUZZ_REVIEWS=$(FUZZ_REVIEWS) FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_SEED=$${FUZZ_SEED:-$$(date +%s)} \
	  FUZZ_REPORT=bench/reliability/results/fuzz.json $(BIN)/python -m pytest -q -p no:cacheprovider tests/server/test_fuzz.py
	$(BIN)/python -m bench.reliability.stamp bench/reliability/results/fuzz.json
	$(BIN)/python -m bench.reliability.report

reliability: $(STAMP)  ## overload, worker kill, certificate rotation, broken policy, slowloris (60 s phases), e2e restart (~14 min; waits for other benchmarks)
	$(BIN)/python -m bench.reliability.overload
	$(BIN)/python -m bench.reliability.worker_kill
	$(BIN)/python -m bench.reliability.rotation_load
	$(BIN)/python -m bench.reliability.config_garbage
	$(BIN)/python -m bench.reliability.slowloris --seconds 60
	RELIABILITY_OUT=bench/reliability/results/e2e_restart.json \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/e2e/test_reliability_e2e.py
	$(BIN)/python -m bench.reliability.stamp bench/reliability/results/e2e_restart.json
	$(BIN)/python -m bench.reliability.report

SLOWLORIS_BEFORE_REV ?= 003b03b
slowloris-compare: $(STAMP)  ## the slowloris run against the tree before issue 25 (003b03b: threads read requests) (~2 min)
	rm -rf /tmp/gpu-admission-slowloris-before && mkdir -p /tmp/gpu-admission-slowloris-before && git archive $(SLOWLORIS_BEFORE_REV) webhook | tar -x -C /tmp/gpu-admission-slowloris-before
	$(BIN)/python -m bench.reliability.slowloris --label slowloris_before --source /tmp/gpu-admission-slowloris-before
	rm -rf /tmp/gpu-admission-slowloris-before
	$(BIN)/python -m bench.reliability.report

BEFORE_REV ?= 2b4717c
overload-compare: $(STAMP)  ## overload runs of the server before issue 8 (2b4717c), without shedding, at 2.5 s (~8 min)
	rm -rf /tmp/gpu-admission-before && mkdir -p /tmp/gpu-admission-before && git archive $(BEFORE_REV) webhook | tar -x -C /tmp/gpu-admission-before
	$(BIN)/python -m bench.reliability.overload --label overload_before --source /tmp/gpu-admission-before
	rm -rf /tmp/gpu-admission-before
	$(BIN)/python -m bench.reliability.overload --label overload_no_shedding -- --max-queue-age 0
	$(BIN)/python -m bench.reliability.overload --label overload_2_5 -- --max-queue-age 2.5
	$(BIN)/python -m bench.reliability.report

soak: $(STAMP)  ## SOAK_MINUTES (10) at 50% of the measured maximum throughput; memory and p99 per minute
	$(BIN)/python -m bench.reliability.soak --minutes $(SOAK_MINUTES)
	$(BIN)/python -m bench.reliability.report

reliability-report: $(STAMP)  ## re-render RELIABILITY.md's figures from bench/reliability/results/
	$(BIN)/python -m bench.reliability.report

# gpu-admission: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

BIND   ?= 127.0.0.1:8443

.PHONY: run test check certs manifests cluster clean help

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
	$(BIN)/python -m webhook.install --certs certs --overlay manifests/overlays/generated-certs

run: $(STAMP) certs/tls.crt  ## start the admission server on https://127.0.0.1:8443 with the embedded default policy
	$(BIN)/gpu-admission serve --cert certs/tls.crt --key certs/tls.key --bind $(BIND)

check: $(STAMP)  ## judge the bundled examples offline, as CI would
	$(BIN)/gpu-admission check examples/

.PHONY: bench
bench: $(STAMP)  ## performance suite against floors (~20 min; BENCH_QUICK=1 for a smoke run): bench/results/, BENCHMARKS.md
	command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)
	command -v hyperfine >/dev/null || (apt-get update && apt-get install -y hyperfine) || true
	$(BIN)/pip install --quiet -r bench/requirements.txt
	$(BIN)/python -m bench.run

cluster: $(STAMP)  ## local kube-apiserver + kube-scheduler + the webhook + fake GPU nodes, in the foreground (Ctrl-C stops)
	$(BIN)/python tests/e2e/cluster.py

test: $(STAMP)  ## run the whole test suite
	$(BIN)/python -m pytest

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info

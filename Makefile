# gpu-admission: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test check lint clean help

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)  ## create .venv and install the package with test extras

run: $(STAMP)  ## judge the bundled examples with the embedded default policy
	$(BIN)/gpu-admission check examples/

test: $(STAMP)  ## run the whole test suite
	$(BIN)/python -m pytest

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info

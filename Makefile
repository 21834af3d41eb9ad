# Veracity — the two commands a newcomer needs are `make run` and `make test`.
# Each does its own set-up (virtualenv + install) on a fresh machine with python3 >= 3.11.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test bench demo venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/veracity serve $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

# real answers from $VERACITY_CASES (default ../shared/cases) through gateway + replaying upstream;
# without that folder, the examples shipped in proxy/demo/examples.jsonl
demo: $(STAMP)
	$(PY) bench/demo.py $(ARGS)

# quality and cost benchmarks on the real case files (results in bench/results/*.md, merged into
# bench/RESULTS.md); the gateway load benchmark needs wrk + a LiteLLM venv: bench/gateway_bench.py
bench: $(STAMP)
	$(PY) bench/arithmetic_bench.py
	$(PY) bench/citations_bench.py
	$(PY) bench/pipeline_bench.py

clean:
	rm -rf $(VENV) .pytest_cache

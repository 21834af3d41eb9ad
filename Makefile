# Veracity — the two commands a newcomer needs are `make run` and `make test`.
# Each does its own set-up (virtualenv + install) on a fresh machine with python3 >= 3.11.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# `make run` needs only the gateway's own dependencies (a first run is quicker without the test
# and benchmark extras, litellm among them); `make test` installs the dev extras too.
RUN_STAMP := $(VENV)/.installed-run-stamp

.PHONY: run test test-fast bench demo venv clean

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP) $(RUN_STAMP)

venv: $(STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/veracity serve $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

# the loop while you edit (about a minute on 2 shared cores, bench/RESULTS.md): the in-process tests of tests/verifiers and
# tests/proxy without the ones marked slow (sandboxes, servers, case sweeps) and the real components
test-fast: $(STAMP)
	$(PY) -m pytest -q -n auto -m "not slow and not docker and not bwrap and not redis and not prometheus and not haproxy and not llama and not node" \
		tests/verifiers tests/proxy tests/test_layering.py $(PYTEST_ARGS)

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
	$(PY) bench/planner_bench.py
	$(PY) bench/facts_bench.py
	$(PY) bench/relevance_bench.py

clean:
	rm -rf $(VENV) .pytest_cache

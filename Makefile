# isorag: `make demo` sets everything up and runs the demo; `make test` runs the tests; `make lint` runs ruff and
# mypy; `make bench-smoke` runs every benchmark's smoke mode.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test test-unit typecheck lint servers stop bench-load bench-metaqa bench-verify bench-scale \
        bench-scale-full bench-serve bench-smoke clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip "setuptools>69,<70" wheel
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

servers: install
	$(VENV)/bin/isorag neo4j start
	$(VENV)/bin/isorag milvus start

demo: servers
	$(VENV)/bin/isorag demo

# TEST_WORKERS processes (pytest-xdist), each test file on one of them (its module fixtures load once); the files
# marked `long` first, in the order tests/conftest.py sorts them, so that the workers end together
TEST_WORKERS ?= 2

test: servers
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# mypy over engine/ and loaders/, with the settings of [tool.mypy] in pyproject.toml (no server needed)
typecheck: install
	$(PY) -m mypy

# ruff over the repository ([tool.ruff] in pyproject.toml), then mypy
lint: install
	$(VENV)/bin/ruff check .
	$(PY) -m mypy

# tests/unit only: no server is started (tests/unit/conftest.py refuses to start one)
test-unit: install
	$(PY) -m pytest -q -p no:cacheprovider -m "not integration" tests/unit $(PYTEST_ARGS)

stop:
	-$(VENV)/bin/isorag neo4j stop
	-$(VENV)/bin/isorag milvus stop

# the datasets: $ISORAG_DATA (default: shared/data beside the repository; see docs/benchmarks.md)
bench-load: servers
	$(PY) benchmarks/load.py

bench-metaqa: servers
	$(PY) benchmarks/metaqa.py --split dev --hops 1,2,3 --pattern gold

bench-verify: servers
	$(PY) benchmarks/verify.py --limit 400

# isorag serve under 1, 8, 32 and 64 clients, in-process baseline, RSS over 10,000 requests, the explorer's draw
bench-serve: servers
	$(PY) benchmarks/serve.py --compare-draw --metaqa ../shared/data/metaqa

bench-scale: servers
	$(PY) benchmarks/scale.py --edges 100000

# the whole curve (the 10M size needs about 2 GB of TSV, tens of GB of stores and hours on 2 cores)
bench-scale-full: servers
	$(PY) benchmarks/scale.py --edges 100000,1000000,10000000

# every benchmark with --smoke: tiny sizes, the bundled demo data, under a minute each; each must end with its JSON line
bench-smoke: servers
	PY=$(PY) .ci/bench-smoke

clean:
	rm -rf $(VENV) build *.egg-info

# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint twins unasync typecheck unit contrib bench chaos failover clean

# the three distributions, editable, with every extra of the engine, and the dev group of the
# workspace's pyproject (pip 25.1+: --group)
PACKAGES := -e 'packages/rowstate[postgres,nats,otel,prometheus,sqlalchemy,django]' \
	-e packages/dataset-lifecycle -e 'packages/pubsched[demo]'

$(STAMP): pyproject.toml packages/rowstate/pyproject.toml \
		packages/dataset-lifecycle/pyproject.toml packages/pubsched/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade 'pip>=25.1'
	$(BIN)/python -m pip install -q $(PACKAGES) --group dev
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pubsched demo

lint: $(STAMP)
	$(BIN)/ruff check packages tests bench scripts

# the sync twins are generated from their asyncio sources (scripts/unasync.py): fail when
# one is stale; `make unasync` writes them
twins: $(STAMP)
	$(BIN)/python scripts/unasync.py --check

unasync: $(STAMP)
	$(BIN)/python scripts/unasync.py

typecheck: $(STAMP)
	$(BIN)/mypy packages/rowstate/src/rowstate packages/dataset-lifecycle/src/dataset_lifecycle \
		packages/pubsched/src/pubsched scripts/unasync.py

# the suite on every core: most tests wait on a database, a browser or a child process, so
# two workers on two cores take ~7 minutes where one takes ~12 (PYTEST_WORKERS=0: serial)
PYTEST_WORKERS ?= auto
unit: $(STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS)

test: lint twins typecheck unit

# the engine's whole suite on the contrib stores (SQLAlchemy, Django): `make test` runs only
# their conformance tests (tests/rowstate/conftest.py); CI runs this too (.ci/run)
contrib: $(STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) -m contrib tests/rowstate

bench: $(STAMP)
	$(BIN)/python -m pip install -q --group bench
	$(BIN)/python -m bench $(if $(QUICK),--quick,)

chaos: $(STAMP)
	ROWSTATE_CHAOS_HISTORIES=$${ROWSTATE_CHAOS_HISTORIES:-200} $(BIN)/pytest -q -m slow tests/rowstate/test_chaos.py tests/rowstate/test_condition_differential.py -p no:randomly
	$(MAKE) failover

# the tests marked `failover` (left out of `make test`): they start etcd and a two-node
# Patroni cluster (deploy/patroni/patroni.yml; Debian's patroni and etcd-server) and kill its
# leader mid-stream; serial, the cluster is one per session; a few minutes
failover: $(STAMP)
	$(BIN)/pytest -q -m failover -p no:randomly

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

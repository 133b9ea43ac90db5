# rlop developer commands. The two a newcomer needs: `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export RLOP_CACHE ?= $(HOME)/.cache/rlop
export RLOP_BIN_DIR ?= $(RLOP_CACHE)/bin
PYTEST_ARGS ?=

.PHONY: help venv binaries keda crd lint test unit integration e2e chaos demo cluster cluster-down kind kind-down clean

help:
	@grep -E '^[a-z-]+:.*## ' Makefile | sed 's/:.*## /\t/'

$(VENV)/.stamp: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.stamp ## Python virtualenv with rlop and the dev tools

binaries: ## build etcd, kube-*, kubectl, kwok from Go modules into $(RLOP_BIN_DIR) (cached)
	bash hack/build-binaries.sh

keda: ## build KEDA's operator and metrics adapter from Go modules (bench/peers.py only; cached)
	bash hack/build-binaries.sh keda

crd: venv ## regenerate the CRD from the pydantic models
	$(PY) -m rlop crd > crds/rljobs.rlop.dev.yaml
	cp crds/rljobs.rlop.dev.yaml charts/rlop/crds/

lint: venv ## ruff + mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# pytest's exit code 5 (no test ran) fails the target
PYTEST = rc=0; $(PY) -m pytest $(1) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests in $(1): failing" >&2; exit 1; fi; exit $$rc

# The kind tier's images build (niced) while the local-control-plane suite runs: that suite mostly waits.
test: venv binaries lint ## everything: lint, unit + integration tests (local control plane; then one serving kube-scheduler's gangs), then the kind tier
	@bash hack/kind/cluster.sh docker
	@mkdir -p .rlop; log=.rlop/kind-images.log; nice -n 19 bash hack/kind/images.sh >$$log 2>&1 & images=$$!; \
	rc=0; ( $(call PYTEST,tests --ignore=tests/e2e --ignore=tests/native) ) || rc=$$?; \
	( $(call PYTEST,tests/native) ) || rc=$$?; \
	if ! wait $$images; then tail -n 30 $$log >&2; echo "building the kind images failed: $$log" >&2; exit 1; fi; \
	exit $$rc
	$(MAKE) e2e

e2e: venv ## the kind tier: the chart, the example RLJob and the workload in real pods (needs Docker)
	@$(call PYTEST,tests/e2e)

unit: venv ## unit and contract tests (no cluster)
	$(PY) -m pytest tests/unit tests/contract $(PYTEST_ARGS)

chaos: venv binaries ## kill -9 the operator mid-flight, 20 seeded runs of 20 RLJobs; prints the table
	$(PY) -m tests.chaos --runs 20 --jobs 20

demo: venv binaries ## kind (or, without Docker, the local control plane), the operator and the example RLJob, live
	$(PY) -m rlop demo

cluster: venv binaries ## a local control plane with simulated nodes in .rlop/cluster
	$(PY) -m rlop dev cluster up

cluster-down: venv
	$(PY) -m rlop dev cluster down

kind: ## the kind cluster of the e2e tier and the demo, images built offline (hack/kind/)
	bash hack/kind/cluster.sh up

kind-down:
	bash hack/kind/cluster.sh down

clean:
	rm -rf $(VENV) .rlop .pytest_cache .mypy_cache .ruff_cache

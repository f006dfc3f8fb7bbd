# ampkit — the two commands: `make lab` (open the notebooks) and `make test` (run every test).
# Both create .venv if missing and install what is missing; a second run skips what is installed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ampkit-installed
# torch goes in first and pinned to the tested release (written once, in ampkit/_version.py): a bare `torch` (or
# an open range with none installed) can pull a multi-GB CUDA build. `make lab TORCH=` keeps a learner's own build.
TORCH  ?= torch==$(shell sed -n 's/^TORCH_TESTED = "\(.*\)"/\1/p' ampkit/_version.py)
LAB_ARGS ?=
# the folder JupyterLab opens: notebooks/ (with outputs, for self-learners) or workshop/ (`make workshop`'s learner copies)
LAB_ROOT ?= notebooks
# Jupyter refuses to run as root (containers, CI) unless told it is on purpose.
ALLOW_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_ARGS ?=

.PHONY: lab test test-loaded install doctor notebooks bench clean check-python

check-python:
	@$(PYTHON) -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1 || { \
	  if command -v $(PYTHON) >/dev/null 2>&1; then found="$$($(PYTHON) --version 2>&1 | head -n 1)"; else found="not found"; fi; \
	  echo "ampkit needs Python >= 3.10 with venv; '$(PYTHON)' is: $$found. Install Python 3.10+, or point make at one: make PYTHON=python3.11 lab"; exit 1; }

# PIP_INSTALL (make/offline.mk) is `pip install`, or with WHEELS=wheelhouse an install from that folder, no network.
$(STAMP): pyproject.toml ampkit/_version.py | check-python
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ -n "$(TORCH)" ]; then $(PIP_INSTALL) -q "$(TORCH)"; fi
	$(PIP_INSTALL) -q -e ".[test]"
	@# compile notebook 04's graph-sink step once now, not in front of the class (measured ~14-16 s cold, ~4 s warm on a 2-core CPU)
	$(BIN)/python -m ampkit warmup || echo "warmup skipped: notebook 04 will compile on first use"
	@touch $@

install: $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=$(LAB_ROOT) $(ALLOW_ROOT) $(LAB_ARGS)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Nothing a learner sees may depend on timing: the browser suite three times in a row with both cores kept busy
# by two busy-loop processes (started and stopped by tests/browser/busyload.py). Green every time, or it's a bug.
test-loaded: $(STAMP)
	@for i in 1 2 3; do echo "== browser suite under load (2 busy processes), run $$i of 3"; \
	  AMPKIT_BUSY_LOAD=2 $(BIN)/python -m pytest tests/browser $(PYTEST_ARGS) || exit 1; done

doctor: $(STAMP)
	$(BIN)/python -m ampkit doctor

# Re-execute every notebook top to bottom in a fresh kernel and save it with outputs, widget state stripped.
notebooks: $(STAMP)
	$(BIN)/python -m ampkit._nbtools execute notebooks/[0-9][0-9]_*.ipynb

bench: $(STAMP)
	@# bench_hub.py starts a JupyterHub for minutes and needs the hub extra: `make bench-hub` runs it on its own
	@for b in $(filter-out benchmarks/bench_hub.py,$(wildcard benchmarks/bench_*.py)); do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Workshop and classroom targets, one file each: present/workshop, wheelhouse (offline room), hub (one server).
include make/workshop.mk make/offline.mk make/hub.mk

clean:
	rm -rf $(VENV) .cache artifacts .pytest_cache build *.egg-info

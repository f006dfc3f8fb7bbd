# ampkit — the two commands: `make lab` (open the notebooks) and `make test` (run every test).
# Both create .venv if missing and install what is missing; a second run skips what is installed.
PYTHON ?= python3
# LATEST=1: the newest versions the index serves, in a venv of their own and without constraints.txt (an upgrade:
# `make test LATEST=1`, then `make lock LATEST=1`, then commit constraints.txt; README, "For developers").
LATEST ?=
VENV   ?= $(if $(LATEST),.venv-latest,.venv)
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ampkit-installed
TEST_STAMP := $(VENV)/.ampkit-test-installed
# what `make test` adds to the runtime (`make lab` installs none of it); offline, the wheelhouse holds `test` only
TEST_EXTRAS ?= test,browser,lint,site
# torch goes in first and pinned to the tested release (written once, in ampkit/_version.py): a bare `torch` (or
# an open range with none installed) can pull a multi-GB CUDA build. `make lab TORCH=` keeps a learner's own build.
TORCH  ?= torch==$(shell sed -n 's/^TORCH_TESTED = "\(.*\)"/\1/p' ampkit/_version.py)
# constraints.txt: every package at the version `make test` last passed with (`make lock` writes it). Every pip
# install below passes it; with TORCH= its torch line is left out (a copy in the venv), so pip keeps that build.
CONSTRAINTS ?= constraints.txt
PIN_FILE = $(if $(TORCH),$(CONSTRAINTS),$(VENV)/constraints-own-torch.txt)
PINS = $(if $(LATEST),--upgrade --upgrade-strategy eager,-c $(PIN_FILE))
LAB_ARGS ?=
# The edition: `make lab LANG=zh_CN` (also present, workshop) opens the Chinese notebooks (notebooks/zh_CN/), runs
# their kernels with AMPKIT_LANG=zh_CN and shows JupyterLab's own menus in Chinese (the official language pack, in a
# settings folder of its own: .cache/lab-zh_CN/). Only a LANG given on make's command line counts: the shell's own
# $$LANG (the machine's locale) never switches the kit's language.
KIT_LANG := $(if $(filter command line,$(origin LANG)),$(LANG),en)
ifeq ($(filter en zh_CN,$(KIT_LANG)),)
$(error LANG=$(KIT_LANG): the kit's editions are LANG=en and LANG=zh_CN)
endif
ZH := $(filter zh_CN,$(KIT_LANG))
LAB_SETTINGS := .cache/lab-$(KIT_LANG)/settings
LAB_ENV := $(if $(ZH),AMPKIT_LANG=$(KIT_LANG) JUPYTERLAB_SETTINGS_DIR=$(abspath $(LAB_SETTINGS)))
# the folder JupyterLab opens: notebooks/ (with outputs, for self-learners) or workshop/ (`make workshop`'s learner copies)
LAB_ROOT ?= notebooks$(if $(ZH),/$(KIT_LANG))
# Jupyter refuses to run as root (containers, CI) unless told it is on purpose.
ALLOW_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_ARGS ?=
# `make test` runs pytest on TEST_WORKERS processes (pytest-xdist; 2: one a core of a 2-core machine), each test file
# whole on one worker (--dist loadfile: a notebook's cells in order in one kernel, a module's JupyterLab shared),
# the files handed out slowest first as tests/slowest_first.txt lists them (conftest.py; --no-loadscope-reorder keeps
# that order instead of xdist's most-tests-first), so both workers finish together; TEST_WORKERS=1: one process
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

.DEFAULT_GOAL := help

.PHONY: help lab lab-language translations test test-gpu test-loaded install install-test lock doctor notebooks bench clean check-python

# `make` alone: every target with its `## ` comment, one line each (read from the Makefile and make/*.mk).
help: ## this list
	@echo "ampkit: make TARGET [VAR=value ...] (README.md; workshop: docs/instructor-guide.md)"
	@awk -F ':[^#]*## ' '/^[a-z][a-z-]*:[^=]*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

check-python: ## stop with one line unless PYTHON is Python >= 3.10 with venv
	@$(PYTHON) -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1 || { \
	  if command -v $(PYTHON) >/dev/null 2>&1; then found="$$($(PYTHON) --version 2>&1 | head -n 1)"; else found="not found"; fi; \
	  echo "ampkit needs Python >= 3.10 with venv; '$(PYTHON)' is: $$found. Install Python 3.10+, or point make at one: make PYTHON=python3.11 lab"; exit 1; }

# PIP_INSTALL (make/offline.mk) is `pip install`, or with WHEELS=wheelhouse an install from that folder, no network.
$(STAMP): pyproject.toml ampkit/_version.py $(if $(LATEST),,$(CONSTRAINTS)) | check-python
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(if $(or $(LATEST),$(TORCH)),,grep -v '^torch==' $(CONSTRAINTS) > $(PIN_FILE))
	@if [ -n "$(TORCH)" ]; then $(PIP_INSTALL) -q $(PINS) "$(TORCH)"; fi
	$(PIP_INSTALL) -q $(PINS) -e .
	@# compile notebook 04's graph-sink step once now, not in front of the class (measured ~14-16 s cold, ~4 s warm on a 2-core CPU)
	$(BIN)/python -m ampkit warmup || echo "warmup skipped: notebook 04 will compile on first use"
	@touch $@

# the extras `make test` needs (pyproject.toml: test, browser, lint, site), on top of the runtime
$(TEST_STAMP): $(STAMP)
	$(PIP_INSTALL) -q $(PINS) -e ".[$(TEST_EXTRAS)]"
	@touch $@

install: $(STAMP) ## create .venv and install the kit and its runtime (what `make lab` needs)

install-test: $(TEST_STAMP) ## install also the test, browser, lint and site extras (what `make test` needs)

lab: $(STAMP) $(if $(ZH),lab-language) ## open JupyterLab on notebooks/ (LAB_ROOT=workshop: the learner copies; LANG=zh_CN: 中文)
	$(LAB_ENV) $(BIN)/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=$(LAB_ROOT) $(ALLOW_ROOT) $(LAB_ARGS)

# JupyterLab in Chinese: the language pack (the zh extra) once, and the locale chosen in the edition's own settings
lab-language: $(STAMP) ## JupyterLab in Chinese: install the language pack, select it (make lab LANG=zh_CN runs it)
	@$(BIN)/python -c "import jupyterlab_language_pack_zh_CN" 2>/dev/null || $(PIP_INSTALL) -q $(PINS) -e ".[zh]"
	@mkdir -p $(LAB_SETTINGS)/@jupyterlab/translation-extension
	@printf '{"locale": "%s"}\n' $(KIT_LANG) > $(LAB_SETTINGS)/@jupyterlab/translation-extension/plugin.jupyterlab-settings

# The Chinese edition: catalogs in step with the English (changed cells marked stale), then notebooks/zh_CN/
# generated and executed where their source changed, and ampkit.mo compiled (ampkit/_i18ntools; README.zh-CN.md).
translations: $(TEST_STAMP) ## update translations/zh_CN/*.po and ampkit.po, build notebooks/zh_CN/ (executed)
	$(BIN)/python -m ampkit._i18ntools update
	$(BIN)/python -m ampkit._i18ntools build

test: $(TEST_STAMP) js-check ## the views' JS type-checked, ruff, mypy, every test (LATEST=1: newest versions, .venv-latest)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# On a CUDA GPU: tests/gpu (autocast's CUDA lists, tensor-core decisions, fp16/bf16 speed printed, torch._scaled_mm
# fp8, the GradScaler drop-in) and every notebook. With no GPU (or a CPU build of torch) it prints one line saying so
# and exits 2 before running anything; the CPU wheel has no CUDA: `make test-gpu VENV=.venv-cuda` (README).
test-gpu: $(TEST_STAMP) ## tests/gpu and every notebook on a CUDA GPU (needs a CUDA build of torch)
	@$(BIN)/python tests/gpu/needs_cuda.py
	$(BIN)/python -m pytest tests/gpu notebooks $(PYTEST_ARGS)

# Nothing a learner sees may depend on timing: the browser suite three times in a row with both cores kept busy
# by two busy-loop processes (started and stopped by tests/browser/busyload.py). Green every time, or it's a bug.
test-loaded: $(TEST_STAMP) ## the browser suite 3 times with both cores kept busy
	@for i in 1 2 3; do echo "== browser suite under load (2 busy processes), run $$i of 3"; \
	  AMPKIT_BUSY_LOAD=2 $(BIN)/python -m pytest tests/browser $(PYTEST_ARGS) || exit 1; done

doctor: $(STAMP) ## is this machine ready? (Python, torch, widgets, device)
	$(BIN)/python -m ampkit doctor

# Re-execute every notebook top to bottom in a fresh kernel and save it with outputs, widget state stripped.
notebooks: $(TEST_STAMP) ## re-execute and save every notebook
	$(BIN)/python -m ampkit._nbtools execute notebooks/[0-9][0-9]_*.ipynb

bench: $(TEST_STAMP) ## every benchmark but the hub's (speed targets as ratios)
	@# bench_hub.py starts a JupyterHub for minutes and needs the hub extra: `make bench-hub` runs it on its own
	@for b in $(filter-out benchmarks/bench_hub.py,$(wildcard benchmarks/bench_*.py)); do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Workshop and classroom targets, one file each: present/workshop, wheelhouse (offline room), hub (one server);
# the book (site); the real MindSpore and PaddlePaddle in an env of their own (frameworks).
include make/workshop.mk make/offline.mk make/hub.mk make/site.mk make/frameworks.mk make/jscheck.mk

# constraints.txt from this venv (LATEST=1: from .venv-latest, after `make test LATEST=1` passed there)
lock: ## write constraints.txt: the exact version of every package in .venv (LATEST=1: .venv-latest)
	@test -x $(BIN)/python || { echo "make lock: no $(VENV) yet; make test$(if $(LATEST), LATEST=1) first"; exit 1; }
	$(BIN)/python -m ampkit.classroom.lock -o $(CONSTRAINTS)

# A room (make hub: HUB_STATE, .cache/hub by default) holds every learner's work: clean refuses while one is inside
# what it removes, and says how to back it up (make hub-backup) or delete it on purpose (make hub-reset CONFIRM=...).
CLEAN_PATHS = .venv .venv-latest $(VENV) .cache artifacts .pytest_cache build *.egg-info
clean: ## remove the venvs, caches and build outputs (refuses while a room is in .cache/hub)
	@$(CLASSROOM_PYTHON) -m ampkit.classroom.backup guard --state $(HUB_STATE) $(CLEAN_PATHS)
	rm -rf $(CLEAN_PATHS)

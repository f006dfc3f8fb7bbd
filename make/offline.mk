# make wheelhouse and make lab WHEELS=wheelhouse (an offline room; docs/instructor-guide.md, "Offline room")
#
#   make wheelhouse                 every wheel the kit needs (runtime + test extra + the build backend, at constraints.txt's versions, torch pinned
#                                   to TORCH_TESTED) for THIS Python and platform, into $(WHEELHOUSE)/ (git-ignored),
#                                   with requirements.txt and manifest.json; a second run downloads nothing new
#   make wheelhouse PLATFORM=win_amd64 PYVER=3.11   the same for another kind of learner machine (a mixed room),
#                                   into wheelhouse-win_amd64-py3.11/ (ampkit.classroom.platforms; PLATFORM: win_amd64,
#                                   win_arm64, macosx_arm64, manylinux_x86_64, manylinux_aarch64 or a pip platform tag)
#   make lab WHEELS=wheelhouse      install from that folder with no network (pip --no-index --find-links)
#   python benchmarks/offline_install.py   the proof: wheelhouse, fresh venv with the index disabled, notebook tests
#
# Logic (requirements, manifest, pip's error -> one-line hint) lives in ampkit.classroom.offline, run with -m from the
# checkout: it needs neither torch nor the kit installed (`import ampkit` loads no subpackage until one is used).
WHEELHOUSE ?= wheelhouse
# another platform and Python (both, or neither): `make wheelhouse PLATFORM=win_amd64 PYVER=3.11`
PLATFORM ?=
PYVER ?=
FOREIGN_WHEELHOUSE = $(if $(filter file,$(origin WHEELHOUSE)),wheelhouse-$(PLATFORM)-py$(PYVER),$(WHEELHOUSE))
WHEELS ?=
# extras besides the test extra, e.g. `make wheelhouse WHEELHOUSE_EXTRAS=hub` for a hub in a room with no network
WHEELHOUSE_EXTRAS ?=
# PyPI's torch for Linux is the CUDA build (torch 2.13.0: ~0.5 GB plus ~2 GB of nvidia-*/cuda-* wheels it requires);
# the CPU wheels are on PyTorch's own index. Elsewhere PyPI's wheel is used. `make wheelhouse TORCH_INDEX=` = PyPI's.
TORCH_INDEX ?= $(if $(filter Linux,$(shell uname -s)),https://download.pytorch.org/whl/cpu)
OFFLINE := -m ampkit.classroom.offline
# The Makefile's $(STAMP) recipe installs with $(PIP_INSTALL): plain `pip install`, or, with WHEELS set, pip with
# --no-index --find-links $(WHEELS) run through offline.py, which adds the kit's one-line hint when a wheel is missing.
PIP_INSTALL = $(BIN)/python $(if $(WHEELS),$(OFFLINE) pip $(WHEELS) install --no-index --find-links $(WHEELS),-m pip install)

.PHONY: wheelhouse

# With WHEELHOUSE_EXTRAS=hub: the hub's proxy (configurable-http-proxy, an npm package, pure JavaScript: one copy
# serves every OS) and its Node packages, into the wheelhouse's npm-cache/; `make hub-install WHEELS=...` installs
# from it with `npm install --offline --cache`.
WHEELHOUSE_DIR = $(if $(PLATFORM)$(PYVER),$(FOREIGN_WHEELHOUSE),$(WHEELHOUSE))
NPM_CACHE_FILL = npm install --no-fund --no-audit --cache $(abspath $(WHEELHOUSE_DIR))/npm-cache \
  --prefix $(abspath $(WHEELHOUSE_DIR))/.npm-prefix configurable-http-proxy@5 && rm -rf $(WHEELHOUSE_DIR)/.npm-prefix

# torch first, from TORCH_INDEX (the CPU build); the `pip wheel -r` after it finds that wheel in the folder (a local
# version such as 2.13.0+cpu ranks above 2.13.0) and keeps it, so no CUDA wheels come in.
wheelhouse: | check-python ## every wheel for an offline room, into wheelhouse/ (PLATFORM=win_amd64 PYVER=3.11: for those)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifneq ($(PLATFORM)$(PYVER),)
	$(BIN)/python -m ampkit.classroom.platforms build --platform "$(PLATFORM)" --python "$(PYVER)" \
	  -o $(FOREIGN_WHEELHOUSE) --torch "$(TORCH)" --constraints $(CONSTRAINTS) \
	  $(foreach e,$(WHEELHOUSE_EXTRAS),--extra $(e)) $(if $(filter command line,$(origin TORCH_INDEX)),--torch-index "$(TORCH_INDEX)")
else
	@$(if $(or $(LATEST),$(TORCH)),,grep -v '^torch==' $(CONSTRAINTS) > $(PIN_FILE))
	$(BIN)/python $(OFFLINE) requirements --torch "$(TORCH)" $(foreach e,$(WHEELHOUSE_EXTRAS),--extra $(e)) \
	  -o $(WHEELHOUSE)/requirements.txt
	$(if $(TORCH),$(BIN)/python -m pip wheel -q --no-deps $(PINS) -w $(WHEELHOUSE) \
	  $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX) )"$(TORCH)")
	$(BIN)/python -m pip wheel -q $(PINS) -w $(WHEELHOUSE) --find-links $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt
	$(BIN)/python $(OFFLINE) manifest $(WHEELHOUSE)
endif
	$(if $(filter hub,$(WHEELHOUSE_EXTRAS)),$(NPM_CACHE_FILL))

# The real MindSpore and PaddlePaddle beside torch, in an environment of their own (issue #33; README, "make frameworks").
#
#   make frameworks        .venv-frameworks/ (FW_VENV): torch (TORCH_TESTED, first, the CPU build), mindspore,
#                          paddlepaddle, numpy<2 and the kit with its test extra, every version from
#                          constraints-frameworks.txt; and a Jupyter kernel "ampkit + MindSpore + PaddlePaddle" in the
#                          MAIN venv's kernel folder ($(VENV)/share/jupyter/kernels/ampkit-frameworks) so `make lab`
#                          offers it. The main .venv gets no framework. A second run does nothing (a stamp). Where
#                          no wheel exists (macOS on Intel, Linux on ARM, Python 3.13+) it prints one line, exits 0.
#   make test-frameworks   tests_frameworks/ (the kit's presets, lists and O-levels against the real frameworks) and
#                          notebook 09 in both editions under nbval, in that env: MindSpore's and Paddle's tests in
#                          separate pytest runs (Paddle imported before MindSpore in one process breaks MindSpore)
#   make frameworks-lock   write constraints-frameworks.txt from .venv-frameworks (after test-frameworks passed)
#
# numpy<2: mindspore 2.10 is compiled against numpy 1.x, and Paddle 3.3.1's GradScaler crashes on numpy 2.4 at its
# first inf (issue #33's measurements). MindSpore's auto_mixed_precision O1 writes rewritten_network/ into the working
# folder (no setting moves it): the tests run it in a temporary one, and test-frameworks fails if any appears here.
FW_VENV ?= .venv-frameworks
FW_BIN := $(FW_VENV)/bin
FW_PYTHON ?= $(PYTHON)
FW_STAMP := $(FW_VENV)/.ampkit-frameworks-installed
FW_CONSTRAINTS ?= constraints-frameworks.txt
# the pins (tests/test_frameworks_make.py checks they agree with constraints-frameworks.txt)
FW_MINDSPORE ?= 2.10.0
FW_PADDLE ?= 3.3.1
FW_NUMPY ?= numpy<2
# torch first, in this order: (1) with FW_TORCH_INDEX (on Linux PyTorch's CPU index, make/offline.mk's TORCH_INDEX)
# as an extra index beside pip's own (PyPI, or what pip.conf / PIP_INDEX_URL name), if it answers for torch within
# 10 s (tests_frameworks/fwtools.py reachable: one try, no retries); (2) else from pip's own index(es) alone, with one
# line saying so, not pip's retry warnings. FW_TORCH_INDEX=URL: another index; FW_TORCH_INDEX= : pip's own only.
# A local label (2.13.0+cpu) satisfies the pin torch==2.13.0.
FW_TORCH_INDEX ?= $(TORCH_INDEX)
FW_TORCH ?= $(TORCH)
FW_KERNEL := ampkit-frameworks
FW_KERNEL_NAME := ampkit + MindSpore + PaddlePaddle
FW_KERNEL_JSON := $(VENV)/share/jupyter/kernels/$(FW_KERNEL)/kernel.json
FW_PIP = $(FW_BIN)/python -m pip install -q -c $(FW_CONSTRAINTS)
# one line where this Python/platform has no wheel (tests_frameworks/fwtools.py), nothing where it has
FW_CHECK = $(FW_PYTHON) tests_frameworks/fwtools.py check $(FW_MINDSPORE) $(FW_PADDLE)
FW_NOTEBOOKS = $(wildcard notebooks/09_*.ipynb notebooks/zh_CN/09_*.ipynb)
# what MindSpore would leave behind if something ran it in the repository's folders
FW_LITTER = rewritten_network rank_0 notebooks/rewritten_network notebooks/rank_0 notebooks/zh_CN/rewritten_network \
  notebooks/zh_CN/rank_0 tests_frameworks/rewritten_network tests_frameworks/rank_0

.PHONY: frameworks test-frameworks frameworks-lock

frameworks: ## MindSpore + PaddlePaddle + torch in .venv-frameworks, and its Jupyter kernel
	@msg="$$($(FW_CHECK))"; if [ -n "$$msg" ]; then echo "$$msg"; \
	  else $(MAKE) --no-print-directory frameworks-install; fi

# (internal, not .PHONY so that `make` alone does not list it) what `make frameworks` builds where there are wheels
frameworks-install: $(FW_STAMP) $(FW_KERNEL_JSON)
	@:

$(FW_STAMP): pyproject.toml ampkit/_version.py $(FW_CONSTRAINTS) | check-python
	@test -x $(FW_BIN)/python || $(FW_PYTHON) -m venv $(FW_VENV)
	$(if $(FW_TORCH),@idx=; $(if $(FW_TORCH_INDEX),if $(FW_BIN)/python tests_frameworks/fwtools.py reachable \
	  "$(FW_TORCH_INDEX)"; then idx="--extra-index-url $(FW_TORCH_INDEX)"; else echo "make frameworks: \
	  $(FW_TORCH_INDEX) did not answer; torch from pip's own index (FW_TORCH_INDEX=URL for another)"; fi;) \
	  echo "pip install -c $(FW_CONSTRAINTS) $$idx \"$(FW_TORCH)\""; $(FW_PIP) $$idx "$(FW_TORCH)")
	$(FW_PIP) "mindspore==$(FW_MINDSPORE)" "paddlepaddle==$(FW_PADDLE)" "$(FW_NUMPY)"
	$(FW_PIP) -e ".[test]" "$(FW_NUMPY)"
	@touch $@

$(FW_KERNEL_JSON): $(FW_STAMP)
	$(FW_BIN)/python -m ipykernel install --prefix $(abspath $(VENV)) --name $(FW_KERNEL) \
	  --display-name "$(FW_KERNEL_NAME)" >/dev/null 2>$(FW_VENV)/kernel-install.log || { cat $(FW_VENV)/kernel-install.log; exit 1; }
	@echo "kernel '$(FW_KERNEL_NAME)' installed for make lab: $(dir $@)"

test-frameworks: ## the kit's tables against the real MindSpore and Paddle, and notebook 09 (nbval)
	@msg="$$($(FW_CHECK))"; if [ -n "$$msg" ]; then echo "$$msg"; exit 0; fi; \
	  test -f $(FW_STAMP) || { echo "make test-frameworks: no $(FW_VENV) yet; run make frameworks first"; exit 1; }; \
	  echo "== MindSpore" && $(FW_BIN)/python -m pytest tests_frameworks/test_mindspore_*.py tests_frameworks/streams.py \
	    tests_frameworks/fwtools.py $(PYTEST_ARGS) && \
	  echo "== PaddlePaddle" && $(FW_BIN)/python -m pytest tests_frameworks/test_paddle_*.py $(PYTEST_ARGS) && \
	  if [ -n "$(FW_NOTEBOOKS)" ]; then echo "== notebook 09 (nbval)" && \
	    $(FW_BIN)/python -m pytest $(FW_NOTEBOOKS) $(PYTEST_ARGS); else echo "== no notebooks/09_*.ipynb yet"; fi && \
	  for d in $(FW_LITTER); do if [ -e "$$d" ]; then \
	    echo "make test-frameworks: MindSpore wrote $$d into the repository"; exit 1; fi; done

frameworks-lock: ## write constraints-frameworks.txt from .venv-frameworks
	@test -x $(FW_BIN)/python || { echo "make frameworks-lock: no $(FW_VENV) yet; make frameworks first"; exit 1; }
	$(FW_BIN)/python tests_frameworks/fwtools.py lock -o $(FW_CONSTRAINTS)

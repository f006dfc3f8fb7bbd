# make hub: JupyterHub for a room on one machine (hub/README.md). Its extras: make hub-install.
#   make hub                      http://127.0.0.1:8000 — this machine only
#   make hub HUB_IP=0.0.0.0       the room can reach it: plain HTTP unless HUB_SSL_CERT/HUB_SSL_KEY are given;
#                                 read hub/README.md "Opening it to the room" first (password, firewall, TLS)
HUB_IP             ?= 127.0.0.1
HUB_PORT           ?= 8000
HUB_IDLE_TIMEOUT   ?= 3600
HUB_ADMINS         ?= instructor
HUB_STATE          ?= .cache/hub
HUB_SSL_CERT       ?=
HUB_SSL_KEY        ?=
HUB_KERNEL_THREADS ?=
HUB_MAX_SERVERS    ?=
HUB_ALLOW_ROOT     ?=
HUB_ARGS           ?=
HUB_NODE           := $(VENV)/hub-node
HUB_ENV := AMPKIT_HUB_IP=$(HUB_IP) AMPKIT_HUB_PORT=$(HUB_PORT) AMPKIT_HUB_IDLE_TIMEOUT=$(HUB_IDLE_TIMEOUT) \
  AMPKIT_HUB_ADMINS=$(HUB_ADMINS) AMPKIT_HUB_STATE=$(HUB_STATE) AMPKIT_HUB_VENV=$(VENV) \
  AMPKIT_HUB_SSL_CERT=$(HUB_SSL_CERT) AMPKIT_HUB_SSL_KEY=$(HUB_SSL_KEY) AMPKIT_HUB_KERNEL_THREADS=$(HUB_KERNEL_THREADS) \
  AMPKIT_HUB_MAX_SERVERS=$(HUB_MAX_SERVERS) AMPKIT_HUB_ALLOW_ROOT=$(HUB_ALLOW_ROOT)
HUB_CHECK := $(BIN)/python -m ampkit.classroom.hub check --venv $(VENV) --node-prefix $(HUB_NODE)

.PHONY: hub hub-install hub-check bench-hub

hub-check: $(STAMP) ## check the hub's extras and HUB_* settings without starting it
	@$(HUB_ENV) $(HUB_CHECK)

# Learners' first copies come from workshop/ (outputs cleared, solutions hidden): made once here if missing;
# `make workshop` refreshes it (each learner's own copy is never overwritten).
hub: $(STAMP) ## a JupyterHub for the room on this machine (hub/README.md)
	@$(HUB_ENV) $(HUB_CHECK)
	@ls workshop/*.ipynb >/dev/null 2>&1 || $(MAKE) --no-print-directory workshop
	$(HUB_ENV) $(BIN)/jupyterhub -f hub/jupyterhub_config.py $(HUB_ARGS)

hub-install: $(STAMP) ## install the hub extra and its proxy (Node.js >= 18)
	$(BIN)/python -m pip install -q $(PINS) -e ".[hub]"
	npm install --no-fund --no-audit --prefix $(HUB_NODE) configurable-http-proxy@5

# The room's load test (not in make test: minutes, and it fills memory): K learners at once on this machine.
bench-hub: $(STAMP) ## the room's load test: K learners at once (minutes)
	@$(HUB_CHECK)
	$(BIN)/python benchmarks/bench_hub.py $(BENCH_HUB_ARGS)

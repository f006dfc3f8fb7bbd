# make hub: JupyterHub for a room on one machine (hub/README.md). Its extras: make hub-install.
#   make hub                      http://127.0.0.1:8000 — this machine only
#   make hub HUB_IP=0.0.0.0       the room can reach it: plain HTTP unless HUB_SSL_CERT/HUB_SSL_KEY are given;
#                                 read hub/README.md "Opening it to the room" first (password, firewall, TLS)
#   make hub-cert; make hub HUB_IP=0.0.0.0 HUB_HTTPS=1     HTTPS with a self-signed certificate (fingerprint printed)
#   sudo make hub HUB_ISOLATE=1   every learner a system user ampkit-NAME, private home, memory limit (hub/README.md)
#   make hub LANG=zh_CN           the Chinese room: learners open notebooks/zh_CN (workshop/zh_CN), kernels with
#                                 AMPKIT_LANG=zh_CN, JupyterLab in Chinese (only a LANG on make's command line counts)
HUB_IP             ?= 127.0.0.1
HUB_PORT           ?= 8000
HUB_IDLE_TIMEOUT   ?= 3600
HUB_ADMINS         ?= instructor
HUB_STATE          ?= .cache/hub
HUB_SSL_CERT       ?=
HUB_SSL_KEY        ?=
HUB_KERNEL_THREADS ?=
HUB_MAX_SERVERS    ?=
HUB_SPAWN_LIMIT    ?=
HUB_ALLOW_ROOT     ?=
HUB_ARGS           ?=
HUB_ISOLATE        ?=
HUB_MEM_LIMIT      ?=
HUB_TERMINALS      ?=
HUB_KERNEL_IDLE    ?=
HUB_HTTPS          ?=
HUB_ROOM_VIEW      ?=
HUB_CERT_NAMES     ?=
NAMES              ?=
comma              := ,
HUB_NODE           := $(VENV)/hub-node
# make hub-backup / hub-reset write their archives here: outside every clean-up target (git-ignored)
HUB_BACKUPS        ?= hub-backups
# the room's tools that need only the standard library (backup, clean's guard): the venv's Python, else PYTHON
CLASSROOM_PYTHON    = $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
HUB_ENV := AMPKIT_HUB_IP=$(HUB_IP) AMPKIT_HUB_PORT=$(HUB_PORT) AMPKIT_HUB_IDLE_TIMEOUT=$(HUB_IDLE_TIMEOUT) \
  AMPKIT_HUB_ADMINS=$(HUB_ADMINS) AMPKIT_HUB_STATE=$(HUB_STATE) AMPKIT_HUB_VENV=$(VENV) \
  AMPKIT_HUB_SSL_CERT=$(HUB_SSL_CERT) AMPKIT_HUB_SSL_KEY=$(HUB_SSL_KEY) AMPKIT_HUB_KERNEL_THREADS=$(HUB_KERNEL_THREADS) \
  AMPKIT_HUB_MAX_SERVERS=$(HUB_MAX_SERVERS) AMPKIT_HUB_SPAWN_LIMIT=$(HUB_SPAWN_LIMIT) AMPKIT_HUB_ALLOW_ROOT=$(HUB_ALLOW_ROOT)
HUB_ENV += AMPKIT_HUB_ISOLATE=$(HUB_ISOLATE) AMPKIT_HUB_MEM_LIMIT=$(HUB_MEM_LIMIT) \
  AMPKIT_HUB_TERMINALS=$(HUB_TERMINALS) AMPKIT_HUB_KERNEL_IDLE=$(HUB_KERNEL_IDLE) AMPKIT_HUB_HTTPS=$(HUB_HTTPS)
HUB_ENV += AMPKIT_HUB_ROOM_VIEW=$(HUB_ROOM_VIEW) AMPKIT_HUB_LANG=$(KIT_LANG)
HUB_CHECK := $(BIN)/python -m ampkit.classroom.hub check --venv $(VENV) --node-prefix $(HUB_NODE)

.PHONY: hub hub-install hub-check bench-hub bench-storm hub-backup hub-reset hub-cert hub-users hub-users-remove test-hub

hub-check: $(STAMP) ## check the hub's extras and HUB_* settings without starting it
	@$(HUB_ENV) $(HUB_CHECK)

# Learners' first copies come from workshop/ (outputs cleared, solutions hidden): made once here if missing;
# `make workshop` refreshes it (each learner's own copy is never overwritten). LANG=zh_CN: workshop/zh_CN/, and
# JupyterLab's Chinese language pack installed first (lab-language, as for make lab LANG=zh_CN).
HUB_WORKSHOP := workshop$(if $(ZH),/$(KIT_LANG))
hub: $(STAMP) $(if $(ZH),lab-language) ## a JupyterHub for the room on this machine (LANG=zh_CN: 中文; hub/README.md)
	@$(HUB_ENV) $(HUB_CHECK)
	@ls $(HUB_WORKSHOP)/*.ipynb >/dev/null 2>&1 || $(MAKE) --no-print-directory workshop$(if $(ZH), LANG=$(KIT_LANG))
	$(HUB_ENV) $(BIN)/jupyterhub -f hub/jupyterhub_config.py $(HUB_ARGS)

# WHEELS=wheelhouse: with no network, from a wheelhouse made by `make wheelhouse WHEELHOUSE_EXTRAS=hub` (its
# npm-cache/ holds the proxy and its Node packages). configurable-http-proxy 5 needs Node.js >= 20: checked first.
hub-install: $(STAMP) ## install the hub extra and its proxy (Node.js >= 20; WHEELS=wheelhouse: no network)
	@$(BIN)/python -m ampkit.classroom.hub node
	$(PIP_INSTALL) -q $(PINS) -e ".[hub]"
	npm install --no-fund --no-audit --prefix $(HUB_NODE) $(if $(WHEELS),--offline --cache $(abspath $(WHEELS))/npm-cache )configurable-http-proxy@5

# HTTPS for the room's network: a self-signed certificate for this machine's names and addresses (and HUB_CERT_NAMES)
# in $(HUB_STATE)/tls; an existing one is kept unless FORCE=1. `make hub HUB_HTTPS=1` serves it.
hub-cert: $(STAMP) ## a self-signed HTTPS certificate for the hub; prints its fingerprint
	@AMPKIT_HUB_STATE=$(HUB_STATE) $(BIN)/python -m ampkit.classroom.tls cert --names "$(HUB_CERT_NAMES)" $(if $(FORCE),--force)

# The isolated hub's system users (ampkit-NAME; as root): made before the day, or on each learner's first login.
hub-users: $(STAMP) ## create the isolated hub's learner accounts: NAMES=ana-k,bo-l (as root)
	@$(HUB_ENV) $(BIN)/python -m ampkit.classroom.hub.users add $(subst $(comma), ,$(NAMES))

hub-users-remove: $(STAMP) ## remove the learner accounts (NAMES=..., or all ampkit-*); homes stay
	@$(HUB_ENV) $(BIN)/python -m ampkit.classroom.hub.users remove $(subst $(comma), ,$(NAMES))

# Real hubs on 127.0.0.1 (tests/hub): isolation (system users, as root), HTTPS. Not in `make test` (CI has no hub
# extra); without the extras or root it prints one line saying so and exits 2 before anything runs.
test-hub: $(TEST_STAMP) ## tests/hub: real hubs on 127.0.0.1 (isolation as root, HTTPS)
	@$(HUB_CHECK) >/dev/null 2>&1 || $(MAKE) --no-print-directory hub-install >/dev/null || { \
	  echo "make test-hub needs the hub extra and could not install it: run make hub-install (network, Node.js >= 20)"; exit 2; }
	@$(BIN)/python tests/hub/needs_hub.py --venv $(VENV) --node-prefix $(HUB_NODE)
	$(BIN)/python -m pytest tests/hub $(PYTEST_ARGS)

# Every learner's folder in one archive (not the passwords or the hub's database): hub/README.md, "Keeping the room's
# work". Before make hub-reset, at the end of each day, before upgrading the kit.
hub-backup: ## one archive of every learner's folder, into hub-backups/ (hub/README.md)
	@$(CLASSROOM_PYTHON) -m ampkit.classroom.backup create --state $(HUB_STATE) --to $(HUB_BACKUPS)

hub-reset: ## delete the room on purpose (backs up first): make hub-reset CONFIRM=delete-the-room
	@$(CLASSROOM_PYTHON) -m ampkit.classroom.backup reset --state $(HUB_STATE) --to $(HUB_BACKUPS) --confirm "$(CONFIRM)"

# The room's load test (not in make test: minutes, and it fills memory): K learners at once on this machine.
bench-hub: $(STAMP) ## the room's load test: K learners at once (minutes)
	@$(HUB_CHECK)
	$(BIN)/python benchmarks/bench_hub.py $(BENCH_HUB_ARGS)

# The login storm (not in make test: minutes): K learners log in through the login form within one minute.
bench-storm: $(STAMP) ## the login storm: K learners log in within a minute (minutes)
	@$(HUB_CHECK)
	$(BIN)/python benchmarks/bench_storm.py $(BENCH_STORM_ARGS)
	$(BIN)/python benchmarks/render_storm.py

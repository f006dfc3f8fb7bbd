# The views' JavaScript type-checked (issue #39 item 19): every ampkit/widgets/js/*.js starts with `// @ts-check`, and
# TypeScript's tsc checks each view's module as the browser loads it (kit.js + <view>.js; tests/js/typecheck.py).
#
#   make js-check      install the pinned tsc (tests/js/package-lock.json, `npm ci` into $(JS_CACHE)) once, then check
#
# `make test` runs it first. It needs Node.js >= 18 with npm (Debian: `sudo apt-get install nodejs npm`; or
# https://nodejs.org); without them it stops with that line: a check that skipped itself would let an error through.
# Offline, a $(JS_CACHE) installed earlier is used as it is (the stamp names the lock file it was installed from).
JS_CACHE ?= .cache/js
JS_LOCK  := tests/js/package-lock.json
JS_STAMP := $(JS_CACHE)/.installed-$(shell cat $(JS_LOCK) 2>/dev/null | cksum | cut -d" " -f1)

.PHONY: js-check

$(JS_STAMP): $(wildcard $(JS_LOCK) tests/js/package.json)
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && \
	  node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 18 ? 1 : 0)' || { \
	  echo "make js-check: Node.js (>= 18) and npm are needed to type-check the views' JavaScript;"; \
	  echo "  install them: sudo apt-get install nodejs npm (Debian/Ubuntu), brew install node (macOS), or https://nodejs.org"; \
	  exit 1; }
	@rm -rf $(JS_CACHE) && mkdir -p $(JS_CACHE)
	@cp tests/js/package.json $(JS_LOCK) $(JS_CACHE)/
	cd $(JS_CACHE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

js-check: $(JS_STAMP) ## type-check the views' JavaScript (tsc, pinned; needs node and npm)
	$(PYTHON) tests/js/typecheck.py $(JS_CACHE)

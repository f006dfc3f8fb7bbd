# The book: the whole series as a static site, both editions (issue #31; README, "The book (the site)").
#
#   make site          site/en/, site/zh_CN/ and site/index.html from the committed, executed notebooks (none is
#                      re-executed), the README, the instructor guide, the glossary and the reference: Sphinx with
#                      MyST-NB and furo (the site extra), nothing fetched from the web (python -m ampkit._book)
#   make site-serve    serve site/ on http://127.0.0.1:$(SITE_PORT)/ for a look (Ctrl-C stops it)
#   SITE_REPO=owner/name   the GitHub repository for the Binder and source links (default: GITHUB_REPOSITORY, else
#                      the git remote 'origin'; without one, no Binder link)
SITE_DIR  ?= site
SITE_PORT ?= 8000
SITE_REPO ?=
SITE_STAMP := $(VENV)/.ampkit-site-installed

.PHONY: site site-serve

$(SITE_STAMP): $(STAMP)
	$(PIP_INSTALL) -q $(PINS) -e ".[site]"
	@touch $@

site: $(SITE_STAMP) ## build the book (site/: both editions, offline) from the executed notebooks
	$(BIN)/python -m ampkit._book build -o $(SITE_DIR) $(if $(SITE_REPO),--repo $(SITE_REPO))

site-serve: ## serve site/ on 127.0.0.1 (SITE_PORT, default 8000); make site first
	@test -f $(SITE_DIR)/index.html || { echo "make site-serve: no $(SITE_DIR)/index.html yet; run make site first"; exit 1; }
	@echo "the book: http://127.0.0.1:$(SITE_PORT)/ (Ctrl-C stops it)"
	$(BIN)/python -m http.server $(SITE_PORT) --bind 127.0.0.1 --directory $(SITE_DIR)

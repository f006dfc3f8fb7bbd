# make present [NB=...] (Voila dashboards) and make workshop (learner copies). Included from the Makefile.
#   make present                         Voila's tree of notebooks/ on http://127.0.0.1:8866/ (this machine only)
#   make present NB=03_loss_scaling      one notebook (NB=03 works too); a bad name lists the notebooks
#   make present NB=03 PRESENT_ARGS="--port=8870 --no-browser"   other options; unknown --options go to Voila
#   make present PRESENT_ARGS=--ip=0.0.0.0   expose it to the network on purpose (a token is then required)
#   make workshop [FORCE=1]              workshop/: every notebook, outputs cleared, solutions hidden
#   make present LANG=zh_CN, make workshop LANG=zh_CN   the Chinese edition (notebooks/zh_CN/ -> workshop/zh_CN/)
NB ?=
PRESENT_ARGS ?=
FORCE ?=

.PHONY: present workshop

present: $(TEST_STAMP) ## Voila dashboards of the notebooks (NB=03: one notebook)
	$(BIN)/python -m ampkit.classroom.present $(NB)$(if $(ZH), --lang=$(KIT_LANG)) $(PRESENT_ARGS)

workshop: $(STAMP) ## workshop/: learner copies, outputs cleared, solutions hidden
	$(BIN)/python -m ampkit.classroom.copies $(if $(ZH),--lang=$(KIT_LANG) )$(if $(FORCE),--force)

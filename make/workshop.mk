# make present [NB=...] (Voila dashboards) and make workshop (learner copies)

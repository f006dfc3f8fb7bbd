"""Developer tools for the Chinese edition (not part of the teaching API; needs ``polib``, a test extra).

    python -m ampkit._i18ntools update [NN... ampkit]  catalogs in step with the English (new entries empty,
                                                   changed ones fuzzy); NN / ampkit: only those catalogs
    python -m ampkit._i18ntools check [PO...]     every problem of the catalogs (all of them by default)
    python -m ampkit._i18ntools build [--force] [NN...]  compile ampkit.mo, generate notebooks/zh_CN/ and execute the
                                                   ones whose source changed (NN: only those notebooks)
    make translations                              update, then build

The catalogs: ``translations/zh_CN/NN_name.po`` (one per notebook) and ``ampkit/locale/zh_CN/LC_MESSAGES/ampkit.po``
(the package). ``tests/test_translations.py`` fails on anything ``check`` reports and on generated notebooks or a
compiled catalog that differ from what ``build`` writes.
"""

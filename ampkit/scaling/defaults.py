"""Dynamic loss-scaler defaults across frameworks: the columns of the table that notebook 03 shows.

Taught in notebook ``03_loss_scaling.ipynb`` (section 12, "Scaler defaults across frameworks"). The table itself is
:func:`ampkit.scaling.presets.defaults_table`: one row per preset of :mod:`ampkit.scaling.presets` — the framework's
rule with its defaults, cited in ``docs/reference.md`` — and every number in it is measured by running that rule
(:func:`ampkit.scaling.presets.describe`), not typed. It is a function, not a constant: building it runs every
preset (about 0.2 s), which importing the kit does not pay.

>>> from ampkit.scaling import defaults_table
>>> table = defaults_table()
>>> [row["initial scale"] for row in table if row["preset"] == "torch"]
['2^16']
>>> next(r["hysteresis"] for r in table if r["preset"] == "deepspeed")
'2, refilled only on growth'
>>> set(TABLE_COLUMNS) <= set(table[0])
True
"""
from __future__ import annotations

from ampkit.i18n import Word

__all__ = ["TABLE_COLUMNS"]

#: The columns of :func:`~ampkit.scaling.presets.defaults_table`'s rows, in display order (each row also names its
#: ``"preset"``).
#: They are :class:`~ampkit.i18n.Word` s: equal to their English, shown (formatted) in the kit's language.
TABLE_COLUMNS: tuple[str, ...] = (Word("system"), Word("initial scale"), Word("growth"), Word("backoff"),
                                  Word("floor / ceiling"), Word("hysteresis"), Word("overflow step"), Word("notes"))

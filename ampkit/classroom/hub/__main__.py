"""``python -m ampkit.classroom.hub``: see :mod:`ampkit.classroom.hub.cli`."""
import sys

from ampkit.classroom.hub.cli import main

sys.exit(main())

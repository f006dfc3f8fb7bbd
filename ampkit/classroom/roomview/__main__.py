"""``python -m ampkit.classroom.roomview --port N``: the room view service (started by the hub, not by hand)."""
import sys

from ampkit.classroom.roomview.service import main

sys.exit(main())

"""The one network chore the engine and the room's tools share: a free TCP port on 127.0.0.1.

Private to the kit (not taught by a notebook). Standard library only, so that the room's tools
(:mod:`ampkit.classroom`, which never load torch) and the engine's process groups
(:func:`ampkit.diagnose.run_data_parallel`, notebook 08's FSDP2 runs) use the same one; tests/test_layers.py checks
that it stays standard-library only.

>>> 1024 <= free_port() <= 65535
True
"""
from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago: the operating system picks one (bind to port 0) and the
    socket is closed again, for a server or a process group's rendezvous (``MASTER_PORT``) started right after.

    >>> port = free_port()
    >>> with socket.socket() as s:      # still free: it can be bound
    ...     s.bind(("127.0.0.1", port))
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

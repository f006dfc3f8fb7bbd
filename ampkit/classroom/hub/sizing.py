"""A room's default limits on one machine, derived from the login storm (``benchmarks/bench_storm.py`` ->
``benchmarks/results/hub_storm.json``; ``tests/test_classroom_storm.py`` checks them against it): how many learner
servers the memory holds, and how many may start at once. Used by :mod:`ampkit.classroom.hub`. Standard library only.
"""
from __future__ import annotations

import os

#: A room's defaults, from the login storm (benchmarks/bench_storm.py -> benchmarks/results/hub_storm.json; a test
#: checks them against it): the memory of one learner with notebook 03 open (server + kernel, rounded up to
#: 64 MiB), the CPU-seconds one learner's server takes to start, and what the machine keeps for itself.
LEARNER_MIB, SPAWN_CPU_S, RESERVED_MIB = 576, 3.0, 2048


def machine_mib() -> int:
    """This machine's memory in MiB (0 when the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (AttributeError, ValueError, OSError):
        return 0


def default_max_servers(mem_mib: int) -> int:
    """``HUB_MAX_SERVERS`` when unset: the learners this machine's memory holds with notebook 03 open, after
    ``RESERVED_MIB`` for the system and the hub; 0 (no limit) when the memory is unknown.

    >>> default_max_servers(24064), default_max_servers(0)
    (38, 0)
    """
    return max(1, (mem_mib - RESERVED_MIB) // LEARNER_MIB) if mem_mib > 0 else 0


def default_spawn_limit(cores: int, http_timeout: float = 90.0) -> int:
    """``HUB_SPAWN_LIMIT`` when unset: as many servers starting at once as the cores start within half the hub's
    ``http_timeout`` (each takes ``SPAWN_CPU_S`` CPU-seconds), at least 4, at most JupyterHub's default 100.

    >>> default_spawn_limit(2), default_spawn_limit(64)
    (30, 100)
    """
    return min(100, max(4, int(max(1, cores) * http_timeout / 2 / SPAWN_CPU_S)))

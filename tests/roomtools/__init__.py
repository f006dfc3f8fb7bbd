"""What the tests and the room's benchmarks use to drive a real JupyterHub, kept out of the package learners install:
``hub_client`` (a hub process from ``hub/jupyterhub_config.py`` and its REST API), ``kernel_ws`` (a kernel over its
websocket, as the browser drives it), ``loadtest`` (the load test's statistics and clean-up).

The tests import it as ``roomtools`` (pytest puts ``tests/`` on ``sys.path``); the benchmarks
(``benchmarks/bench_hub.py``, ``bench_storm.py``, ``render_storm.py``) put ``tests/`` on ``sys.path`` first. Standard
library only at import time, and nothing from ``ampkit``.
"""

"""The notebooks' exercise sets (private: a learner reads them through :func:`ampkit.exercises.exercises`, one
click at a time): one module per notebook.

Each module names its notebook in its docstring and defines, per exercise N, ``expected_N`` (the engine's value,
from the notebook's state passed in), ``solution_N`` (the kit's worked solution, another way to the same value,
explaining itself through ``tr()`` prints) and ``HINT_N`` (a ``mark()``-ed hint); see :mod:`ampkit.exercises`.
Nothing here is imported by ``ampkit.lessons``: a notebook asks for its own set, so 09's can need the frameworks'
environment.
"""

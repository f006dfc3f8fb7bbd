"""Running the kit for a room: presenter dashboards, learner copies, an offline install and a JupyterHub for the
room. No notebook of its own: it serves every notebook in ``notebooks/``; the instructor's side is
``docs/instructor-guide.md`` and the plan past one machine ``docs/classroom.md``.

Nothing here imports Jupyter, Voilà or JupyterHub at import time: they are imported (or run as processes) only by
the commands that need them.
"""

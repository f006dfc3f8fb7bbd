# make hub (JupyterHub for a room on one machine)

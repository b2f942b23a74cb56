"""XEngine Studio's headless core: graphs, schedules, the simulator and the MIQP solver.

Nothing in this package imports Qt; the GUI in ``app/`` is a thin layer over it.
"""

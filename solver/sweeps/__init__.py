"""Sweeps: the same graph solved over a grid of budgets and methods.

:mod:`solver.sweeps.sweep` defines the points and runs them (reusing the result store),
:mod:`solver.sweeps.cli` is the ``sweep`` command, and :mod:`solver.sweeps.cluster` hands the points
to an optional Dask scheduler.
"""

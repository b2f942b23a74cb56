"""Sweeps: the same graph solved over a grid of budgets and methods.

:mod:`solver.sweeps.sweep` defines the points and runs them (reusing the result store), and
:mod:`solver.sweeps.cluster` hands the points to an optional Dask scheduler. The ``sweep``
command is :mod:`solver.cli.sweep`.
"""

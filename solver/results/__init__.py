"""The result store: finished solves kept in SQLite and looked up before solving again.

:mod:`solver.results.key` defines what a result was solved for, :mod:`solver.results.store`
keeps rows, and :mod:`solver.results.cached` puts the store in front of a solve.
``main.py results`` is :mod:`solver.cli.results`.
"""

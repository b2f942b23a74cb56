"""The result store: finished solves kept in SQLite and looked up before solving again.

:mod:`solver.results.key` defines what a result was solved for, :mod:`solver.results.store`
keeps rows, :mod:`solver.results.cached` puts the store in front of a solve, and
:mod:`solver.results.cli` is ``main.py results``.
"""

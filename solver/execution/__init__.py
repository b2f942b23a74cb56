"""Replaying a schedule: what happens when it runs.

The serial simulator (:mod:`solver.execution.simulate`) is the single judge of validity, memory
and makespan; :mod:`solver.execution.concurrent` lays a valid schedule out with devices and links
running side by side, and :mod:`solver.execution.explain` says in words why each step is there.
Modules here read the document model and never search for schedules.
"""

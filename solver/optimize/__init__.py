"""Finding schedules: the models, the solvers that run them and the methods that pick one.

The XEngine MIQP (:mod:`solver.optimize.miqp`, decoded by :mod:`solver.optimize.miqp_schedule`),
its solve loop with warm starts, incumbents and neighbourhood search (:mod:`solver.optimize.solve`,
:mod:`solver.optimize.incumbents`, :mod:`solver.optimize.lns`), the LP/MIP backends
(:mod:`solver.optimize.backends`), the baselines and heuristics (greedy, checkpointing, overlap
search), lower bounds (and the teaching graphs sized by them, :mod:`solver.optimize.teaching`),
and the method registry (:mod:`solver.optimize.methods`) that the CLI, the
GUI and sweeps call. Every schedule produced here is checked by :mod:`solver.execution.simulate`.
"""

"""Executors: run a schedule's training step for real, on torch, and measure it.

Not to be confused with :mod:`solver.execution`, the simulator, which replays a schedule on
paper (no torch) and is the judge of validity, memory and time. An executor takes a schedule
the simulator has accepted and runs it on torch devices: it needs the optional torch extra, and
every module here is importable without it (torch is asked for at call time).

* :mod:`~solver.executors.harness`: the one driver (check, replay, map devices, reference step,
  run, compare) and the bookkeeping both runtimes share;
* :mod:`~solver.executors.aten_runtime`: nodes that are groups of ATen ops (``import-torch``);
* :mod:`~solver.executors.fx_runtime`: nodes that are torch.fx layers (the bundled zoo), with
  autograd's saved tensors sorted by :mod:`~solver.executors.saved_tensors`;
* :mod:`~solver.executors.host_rng`: the two rules by which a step draws the reference's random
  numbers; :mod:`~solver.executors.gpu_step`: float32 and copy clocks on a GPU;
* :mod:`~solver.executors.sac_policy`: a one-device schedule as PyTorch's selective
  checkpointing policy; :mod:`~solver.executors.execute_graph`: run the model a graph names
  (the window's Execute). ``main.py execute`` is :mod:`solver.cli.execute`.

The walk through a schedule's operations and copies is the simulator's order of events and
lives beside it, in :mod:`solver.execution.schedule_walk`.
"""

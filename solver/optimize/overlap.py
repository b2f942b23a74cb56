"""Optimizing for overlap: a local search on the concurrent makespan (issue 12, part 2).

XEngine's MIQP minimises the serial cost (docs/model.md §2 rule 6); when devices and links work in
parallel (:mod:`solver.execution.concurrent`) another placement may finish sooner. This module
improves a given valid schedule by first-improvement hill climbing on the pair ``(concurrent
makespan, serial cost)``, restarted from random kicks (iterated local search), with moves that keep
the schedule's structure:

* **relocate**: run one operation (a first computation or a recomputation) on another device.
  Its output *instance* moves with it: every operation that read that instance now reads it
  from the new device (locally, or through a copy), and every stage that kept it keeps it on
  the new device instead. The moved operation reads each input locally where the tensor is
  resident on its new device, otherwise from where it read it before.
* **relocate a group**: the same for all the operations of one stage on one device, or for all
  its recomputations (a recomputed segment moves as a whole, without copies back and forth).
* **reuse**: drop a recomputation and let its readers use the previous instance of the same
  tensor, kept (on its device) from its last use until the dropped recomputation's last reader.
* **offloading copies** (docs/spec-notes.md, "Offloading"): a copy is an instance of its own,
  on its target, read and kept like any other. *Retarget* a copy to another device, or *drop*
  it (the source keeps the tensor instead and its readers read it there); *offload* a kept
  instance: at the first stage that keeps it, copy it to another device, which keeps it from
  then on, and later readers read it there. Moving an operation moves the copies it is the
  source of (a copy to the operation's new device becomes a plain keep there).

Every candidate is replayed by :func:`solver.execution.simulate.simulate`; only valid schedules
(every rule of docs/model.md §2, memory included) are ever accepted, so the result is a schedule
like any other. This is a heuristic: it finds a local optimum, not a proven one.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.execution.concurrent import ConcurrentLayout, concurrent_layout
from solver.execution.simulate import simulate
from solver.optimize.solve import SolveOptions, SolveResult
from solver.status import SolveStatus

__all__ = ["OverlapResult", "optimize_overlap", "solve_overlap"]

_EPS = 1e-9


@dataclass(frozen=True)
class OverlapResult:
    """The best schedule found, its layout, and how the search went."""

    schedule: Schedule
    layout: ConcurrentLayout
    start_makespan_ms: float
    moves: int
    """Improving moves accepted by all descents, including those after kicks whose result was
    then discarded (not the number of moves between the start and the result)."""
    evaluations: int
    """Candidate schedules replayed by the simulator."""
    seconds: float
    converged: bool
    """The last descent reached a local optimum (no single move improves it); ``False`` when
    the time ran out or the search was cancelled during a descent."""

    @property
    def makespan_ms(self) -> float:
        return self.layout.makespan_ms


def optimize_overlap(
    graph: Graph,
    schedule: Schedule,
    *,
    time_limit_s: float = 30.0,
    seed: int = 0,
    patience: int = 20,
    cancel: threading.Event | None = None,
) -> OverlapResult:
    """Improve ``schedule``'s concurrent makespan by local search (see the module docstring).

    Parameters
    ----------
    graph
        The graph with the budgets every candidate must respect.
    schedule
        A valid schedule to start from (the MIQP's, a baseline's).
    time_limit_s
        Wall-clock limit; the best schedule so far is returned when it runs out.
    seed
        Order in which moves are tried and kicks drawn (reproducible for a given seed and
        enough time).
    patience
        After the first local optimum, random kicks (two random valid moves) followed by
        descent are tried until this many in a row bring no improvement.
    cancel
        Set it to stop early with the best schedule so far.

    Returns
    -------
    OverlapResult
        Never worse than ``schedule``: its makespan is at most the start's.

    Raises
    ------
    ScheduleViolation
        ``schedule`` itself is not valid.

    Examples
    --------
    A chain ``a -> c`` and an independent ``b``, all on the CPU (3 ms each; 1 ms on the GPU
    for ``b`` only): moving ``b`` to the GPU lets it run beside ``a``.

    >>> from solver.document.graph import Device, Edge, Node, make_graph
    >>> from solver.optimize.baselines import checkpoint_all
    >>> g = make_graph("abc", [Device("cpu", memory_limit=9), Device("gpu", memory_limit=9)],
    ...     [Node("a", 1, {"cpu": 3.0}), Node("b", 1, {"cpu": 3.0, "gpu": 1.0}),
    ...      Node("c", 1, {"cpu": 3.0})], [Edge("a", "c")])
    >>> found = optimize_overlap(g, checkpoint_all(g, "cpu"))
    >>> found.start_makespan_ms, found.makespan_ms
    (9.0, 6.0)
    """
    started = time.perf_counter()
    search = _Search(graph, random.Random(seed), started + time_limit_s, cancel)
    best, layout = schedule, concurrent_layout(graph, schedule)
    start = layout.makespan_ms
    best, layout, converged = search.climb(best, layout)
    idle = 0
    while converged and idle < patience and not search.stopped():
        kicked = search.kick(best)
        if kicked is None:
            break
        found, found_layout, converged = search.climb(*kicked)
        if _better(found_layout, layout):
            best, layout, idle = found, found_layout, 0
        else:
            idle += 1
    seconds = time.perf_counter() - started
    return OverlapResult(
        best, layout, start, search.accepted, search.evaluations, seconds, converged
    )


@dataclass
class _Search:
    """Hill climbing with random kicks (iterated local search), against a deadline."""

    graph: Graph
    rng: random.Random
    deadline: float
    cancel: threading.Event | None
    accepted: int = 0
    evaluations: int = 0

    def stopped(self) -> bool:
        cancelled = self.cancel is not None and self.cancel.is_set()
        return cancelled or time.perf_counter() > self.deadline

    def evaluate(self, candidate: Schedule | None) -> ConcurrentLayout | None:
        if candidate is None:
            return None
        self.evaluations += 1
        serial = simulate(self.graph, candidate)
        return concurrent_layout(self.graph, candidate, serial) if serial.valid else None

    def climb(self, schedule: Schedule, layout: ConcurrentLayout):
        """First-improvement descent; ``converged`` is False when stopped early."""
        improved = True
        while improved:
            improved = False
            candidates = _moves(self.graph, schedule)
            self.rng.shuffle(candidates)
            for move in candidates:
                if self.stopped():
                    return schedule, layout, False
                candidate = move()
                trial = self.evaluate(candidate)
                if trial is not None and _better(trial, layout):
                    schedule, layout, improved = candidate, trial, True
                    self.accepted += 1
                    break
        return schedule, layout, True

    def kick(self, schedule: Schedule):
        """Two random valid moves, better or not: a new starting point for :meth:`climb`."""
        current, layout = schedule, None
        for _ in range(2):
            candidates = _moves(self.graph, current)
            self.rng.shuffle(candidates)
            for move in candidates[:50]:
                if self.stopped():
                    return None
                candidate = move()
                trial = self.evaluate(candidate)
                if trial is not None:
                    current, layout = candidate, trial
                    break
        return (current, layout) if layout is not None else None


def solve_overlap(
    graph: Graph,
    starts: Sequence[SolveResult],
    options: SolveOptions = SolveOptions(),
    cancel: threading.Event | None = None,
) -> SolveResult:
    """The ``overlap`` method: :func:`optimize_overlap` from each valid start, the best kept.

    ``starts`` are results of other methods (``solver.optimize.methods`` passes XEngine's and
    greedy's); the search gets ``options.time_limit_s`` shared among the valid ones. The result is a
    heuristic (status ``feasible``): its ``objective`` and ``timeline`` are the serial replay,
    as for every method; ``message`` gives the concurrent makespan and where it started.
    """
    method = "overlap+offload" if options.offload else "overlap"
    valid = [r for r in starts if r.ok and r.schedule is not None]
    if not valid:
        why = "; ".join(f"{r.method}: {r.message or r.status.value}" for r in starts)
        status = starts[0].status if starts else SolveStatus.CANCELLED
        return SolveResult(method, status, message=f"no schedule to start from ({why})")
    started = time.perf_counter()
    share = options.time_limit_s / len(valid)
    schedules = [r.schedule for r in valid if r.schedule is not None]  # ok: every one has it
    runs = [optimize_overlap(graph, s, time_limit_s=share, cancel=cancel) for s in schedules]
    best = min(runs, key=lambda r: (r.makespan_ms, r.layout.serial_ms))
    origin = valid[runs.index(best)].method
    seconds = sum(r.seconds for r in valid) + time.perf_counter() - started
    serial = best.layout.serial
    info = SolverInfo(
        method=method,
        backend="heuristic",
        status=SolveStatus.FEASIBLE,
        objective=serial.total_ms,
        seconds=seconds,
    )
    return SolveResult(
        method,
        SolveStatus.FEASIBLE,
        replace(best.schedule, solver=info),
        serial,
        serial.total_ms,
        seconds=seconds,
        backend="heuristic",
        message=(
            f"concurrent makespan {best.makespan_ms:.6g} ms (from {best.start_makespan_ms:.6g} ms "
            f"of {origin}'s schedule); local search, not a proven optimum"
        ),
    )


def _better(trial: ConcurrentLayout, current: ConcurrentLayout) -> bool:
    if trial.makespan_ms < current.makespan_ms - _EPS:
        return True
    return (
        trial.makespan_ms <= current.makespan_ms + _EPS
        and trial.serial_ms < current.serial_ms - _EPS
    )


# ----- the schedule as editable lists, and who reads which instance -------------------------


@dataclass
class _Plan:
    """Mutable copy of a schedule: ``ops[t]`` = [node, device, inputs], ``keep[t][device]``."""

    ops: list[list[list]]
    keep: list[dict[str, set[str]]]
    copies: list[dict[str, dict[str, str]]]
    """``copies[t][target][tensor] = source``: the stage's offloading copies."""

    @classmethod
    def of(cls, schedule: Schedule) -> _Plan:
        ops = [[[op.node, op.device, dict(op.inputs)] for op in s.ops] for s in schedule.stages]
        keep = [{d: set(ids) for d, ids in s.keep.items()} for s in schedule.stages]
        copies = [{d: dict(c) for d, c in s.copies.items()} for s in schedule.stages]
        return cls(ops, keep, copies)

    def to_schedule(self, graph: Graph, like: Schedule) -> Schedule:
        stages = []
        for ops, keep, copies in zip(self.ops, self.keep, self.copies, strict=True):
            ordered = sorted(ops, key=lambda o: (graph.index[o[0]], graph.device_index[o[1]]))
            built = tuple(Operation(n, d, _clean(d, inputs)) for n, d, inputs in ordered)
            kept = {d: frozenset(ids) for d, ids in keep.items()}
            stages.append(Stage(built, kept, {d: dict(c) for d, c in copies.items() if c}))
        return Schedule(like.graph, like.memory_limits, tuple(stages), like.solver)


def _clean(device: str, inputs: dict[str, str]) -> dict[str, str]:
    return {i: s for i, s in inputs.items() if s != device}


@dataclass
class _Instance:
    """One output of one operation, or one offloading copy: where it lives, who reads it,
    which stages keep it, and where it is copied to."""

    stage: int
    position: int
    tensor: str
    device: str
    readers: list[tuple[int, int]]
    kept: list[int]
    live_at_start: dict[str, set[str]]
    """Tensors resident per device just before the producing operation (for input choices)."""
    sent: list[tuple[int, str]] = field(default_factory=list)
    """Offloading copies made from it: ``(stage, target)``."""
    copied_from: str = ""
    """For an offloading copy, its source device (the instance lives on its target)."""


def _instances(graph: Graph, schedule: Schedule) -> list[_Instance]:
    """Mirror the simulator's residency (as :mod:`solver.execution.concurrent` does) per
    instance."""
    g = graph
    found: list[_Instance] = []
    live: dict[str, dict[str, int]] = {d.name: {} for d in g.devices}
    for t, stage in enumerate(schedule.stages):
        last_use: dict[tuple[str, str], int] = {}
        for p, op in enumerate(stage.ops):
            for i in g.inputs[g.index[op.node]]:
                last_use[op.source_of(g.nodes[i].id), g.nodes[i].id] = p
        sent: dict[str, set[str]] = {d: set() for d in live}  # held until the copy
        for name, source, _ in stage.offload_copies():
            sent[source].add(name)
        for p, op in enumerate(stage.ops):
            inputs = [g.nodes[i].id for i in g.inputs[g.index[op.node]]]
            for name in inputs:
                found[live[op.source_of(name)][name]].readers.append((t, p))
            resident = {d: set(held) for d, held in live.items()}
            found.append(_Instance(t, p, op.node, op.device, [], [], resident))
            live[op.device][op.node] = len(found) - 1
            for name in inputs:
                source = op.source_of(name)
                holding = stage.kept_on(source) | sent[source]
                if last_use.get((source, name)) == p and name not in holding:
                    del live[source][name]
        copies = sorted(stage.offload_copies(), key=lambda c: (g.index[c[0]], c[2]))
        arrived = []
        for q, (name, source, target) in enumerate(copies):
            found[live[source][name]].sent.append((t, target))
            resident = {d: set(held) for d, held in live.items()}
            position = len(stage.ops) + q
            found.append(_Instance(t, position, name, target, [], [], resident, [], source))
            arrived.append((target, name, len(found) - 1))
        for target, name, j in arrived:
            live[target][name] = j
        for device, held in live.items():
            kept = stage.kept_on(device)
            live[device] = {x: j for x, j in held.items() if x in kept}
            for j in live[device].values():
                found[j].kept.append(t)
    return found


# ----- moves ----------------------------------------------------------------------------------


def _moves(graph: Graph, schedule: Schedule) -> list:
    """Every move from ``schedule``, as a thunk returning the candidate (or ``None``)."""
    instances = _instances(graph, schedule)
    moves = []
    groups: dict[tuple[int, str, bool], list[int]] = {}
    linked = {(lk.source, lk.target) for lk in graph.links}
    for j, inst in enumerate(instances):
        k = graph.index[inst.tensor]
        if inst.kept and not inst.copied_from:  # offload it at the first stage that keeps it
            for device in graph.devices:
                if device.name != inst.device and (inst.device, device.name) in linked:
                    moves.append(_bind(_offload, graph, schedule, instances, j, device.name))
        if inst.copied_from:  # retarget the copy, or drop it (its source keeps the tensor)
            for device in graph.devices:
                source = inst.copied_from
                if device.name != inst.device and (
                    device.name == source or (source, device.name) in linked
                ):
                    moves.append(_bind(_move_copy, graph, schedule, instances, j, device.name))
            continue
        for device in graph.devices:
            if device.name != inst.device and device.name in graph.nodes[k].cost:
                moves.append(_bind(_relocate, graph, schedule, instances, [j], device.name))
        if k < inst.stage:
            moves.append(_bind(_reuse, graph, schedule, instances, j, ""))
            for device in graph.devices:  # or offload the previous instance until then
                if graph.links:
                    moves.append(_bind(_reuse, graph, schedule, instances, j, device.name))
        groups.setdefault((inst.stage, inst.device, False), []).append(j)
        if k < inst.stage:
            groups.setdefault((inst.stage, inst.device, True), []).append(j)
    for (
        _,
        source,
        _,
    ), members in groups.items():  # a stage's ops (or recomputations) on one device
        if len(members) < 2:
            continue
        for device in graph.devices:
            if device.name != source:
                moves.append(_bind(_relocate, graph, schedule, instances, members, device.name))
    return moves


def _bind(move, graph, schedule, instances, which, device):
    return lambda: move(graph, schedule, instances, which, device)


def _relocate(
    graph: Graph, schedule: Schedule, instances: list[_Instance], which: list[int], device: str
) -> Schedule | None:
    """Run the operations producing ``which`` on ``device``, their outputs following them."""
    plan = _Plan.of(schedule)
    for j in which:
        inst = instances[j]
        k = graph.index[inst.tensor]
        if device not in graph.nodes[k].cost:
            return None
        op = plan.ops[inst.stage][inst.position]
        for i in graph.inputs[k]:
            name = graph.nodes[i].id
            source = op[2].get(name, op[1])
            op[2][name] = device if name in inst.live_at_start[device] else source
        op[1] = device
        _redirect(graph, plan, inst, device)
    return plan.to_schedule(graph, schedule)


def _redirect(graph: Graph, plan: _Plan, inst: _Instance, device: str, after: int = -1) -> None:
    """Readers of ``inst`` read it from ``device``; stages that kept it keep it there, and
    copies made from it are made from there (a copy to ``device`` itself becomes a keep).
    Only readers, keeps and copies in stages after ``after`` move."""
    for t, p in inst.readers:
        if t > after:
            plan.ops[t][p][2][inst.tensor] = device
    for t in inst.kept:
        if t > after:
            plan.keep[t][inst.device].discard(inst.tensor)
            plan.keep[t].setdefault(device, set()).add(inst.tensor)
    for t, target in inst.sent:
        if t <= after:
            continue
        copies = plan.copies[t].setdefault(target, {})
        if target == device:
            copies.pop(inst.tensor, None)
            plan.keep[t].setdefault(target, set()).add(inst.tensor)
        else:
            copies[inst.tensor] = device


def _move_copy(
    graph: Graph, schedule: Schedule, instances: list[_Instance], j: int, device: str
) -> Schedule | None:
    """Copy ``instances[j]`` (an offloading copy) to ``device`` instead; to its own source:
    no copy, the source keeps the tensor."""
    inst = instances[j]
    plan = _Plan.of(schedule)
    copies = plan.copies[inst.stage].get(inst.device, {})
    source = copies.pop(inst.tensor, None)
    if source is None:
        return None
    if device != source:
        plan.copies[inst.stage].setdefault(device, {})[inst.tensor] = source
    _redirect(graph, plan, inst, device)
    return plan.to_schedule(graph, schedule)


def _offload(
    graph: Graph, schedule: Schedule, instances: list[_Instance], j: int, device: str
) -> Schedule | None:
    """At the first stage that keeps ``instances[j]``, copy it to ``device`` instead, which
    keeps it from then on; later readers (and copies) use it there."""
    inst = instances[j]
    if not inst.kept or inst.device == device:
        return None
    first = inst.kept[0]
    plan = _Plan.of(schedule)
    plan.keep[first][inst.device].discard(inst.tensor)
    plan.copies[first].setdefault(device, {})[inst.tensor] = inst.device
    _redirect(graph, plan, inst, device, after=first)
    return plan.to_schedule(graph, schedule)


def _reuse(
    graph: Graph, schedule: Schedule, instances: list[_Instance], j: int, device: str
) -> Schedule | None:
    """Drop the recomputation ``instances[j]``; its readers use the previous instance, kept
    where it is (``device`` empty) or offloaded to ``device`` after its last use and kept
    there (one copy instead of the recomputation)."""
    inst = instances[j]
    earlier = [
        x
        for x in instances[:j]
        if x.tensor == inst.tensor and (x.stage, x.position) < (inst.stage, inst.position)
    ]
    if not earlier:
        return None
    previous = earlier[-1]
    held = device or previous.device
    if device == previous.device:
        return None
    plan = _Plan.of(schedule)
    first_stage = max([t for t, _ in previous.readers] + previous.kept + [previous.stage])
    if device and first_stage >= inst.stage:
        return None
    if device:
        plan.copies[first_stage].setdefault(device, {})[inst.tensor] = previous.device
    for t in range(first_stage, inst.stage):
        plan.keep[t].setdefault(held, set()).add(inst.tensor)
    del plan.ops[inst.stage][inst.position]
    shifted = _Instance(
        inst.stage, inst.position, inst.tensor, inst.device, [], inst.kept, inst.live_at_start
    )
    shifted.readers = [
        (t, p - 1 if t == inst.stage and p > inst.position else p) for t, p in inst.readers
    ]
    shifted.sent = inst.sent
    _redirect(graph, plan, shifted, held)
    return plan.to_schedule(graph, schedule)

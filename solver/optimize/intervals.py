"""XEngine's problem as retention intervals: a model that grows with n x C, not stages x nodes.

The paper's MIQP (:mod:`solver.optimize.miqp`) has a variable per (device, stage, node): n^2
of them, which no backend can take beyond a few hundred nodes. Moccasin (Bartan et al., ICML
2023) states Checkmate's problem with *retention intervals* instead: node ``v`` is computed at
most ``C`` times, each computation is an interval from the moment it runs to the moment its
output is released, and memory is one cumulative constraint over the intervals. This module
states XEngine's problem that way, on the same time axis as the paper's stages, and keeps
every rule of model.md §2 that a schedule must obey:

- **Time.** Operation "node ``v`` in stage ``t``" happens at time ``t * (n + 1) + v``: stage by
  stage, in ascending node order inside a stage (model.md §2's serial order). Instance ``c`` of
  node ``v`` on device ``d`` has a stage ``st[v,d,c]`` in ``[v, n-1]`` (the frontier rule: no
  computation of ``v`` before stage ``v``), a presence literal ``p[v,d,c]``, and an end: its
  output is resident on ``d`` during ``[start, end)``.
- **Frontier.** Exactly one device computes ``v`` at stage ``v`` (its first instance there).
- **Instances** of ``(v, d)`` are ordered and never overlap: a resident tensor is never
  recomputed on its device (the solved model's ``R + S <= 1``).
- **Inputs.** Every present instance ``j`` of ``v`` on ``d`` is *served*, for each input ``u``,
  by an instance of ``u`` that started before ``j`` and is still resident when ``j`` runs:
  on ``d`` (read locally) or on another device (a transfer, charged ``CC[(u,v)][d'->d]`` and
  occupying ``M_u`` on ``d`` while ``j`` runs).
- **Memory.** Per device one cumulative constraint: every instance holds ``M_v`` over its
  interval, a running instance also its workspace ``W_v``, a transfer its copy. Sizes and
  budgets are divided by each device's gcd: exact in bytes.
- **Cost.** The sum of the present instances' compute times and of the transfers, as the
  paper's objective; CP-SAT needs integers, so each coefficient is scaled and rounded *down*:
  the model never costs more than the schedule, and its bound is valid for the real costs.

The restriction is ``C``: an answer optimal here is optimal among schedules that compute each
node at most ``C`` times per device (:attr:`IntervalModel.restriction` says so); with ``C``
large enough it is the paper's optimum. A schedule encodes as a hint (``C`` grows per node to
hold it), so the solver starts from the heuristic. It needs OR-Tools CP-SAT (the ``cpsat``
extra); :func:`available` says whether it is installed.
"""

from __future__ import annotations

import importlib
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.errors import XEngineError
from solver.optimize.backends._common import Cancel
from solver.optimize.bounds import devices_for

if TYPE_CHECKING:
    from solver.execution.simulate import Timeline


def _load_cp_model() -> Any:
    """OR-Tools' CP-SAT module, or ``None``: an optional extra, the app runs without it."""
    try:
        return importlib.import_module("ortools.sat.python.cp_model")
    except ImportError:
        return None


cp_model: Any = _load_cp_model()

__all__ = [
    "DEFAULT_RUNS",
    "MAX_RUNS",
    "IntervalModel",
    "able_devices",
    "available",
    "build_interval_model",
    "schedule_from_solution",
]

DEFAULT_RUNS = 2
"""``C``: computations per node and device (the first one and one recomputation)."""
MAX_RUNS = 64
"""The largest ``C`` a user may ask for (``--runs``, the window's "Runs per node")."""
OBJECTIVE_SCALE = 2.0**40
"""Objective coefficients are ``floor(cost * scale)`` with ``scale`` chosen so that the
costliest possible schedule stays below this (CP-SAT's objective is an exact int64)."""


def available() -> bool:
    """Whether OR-Tools CP-SAT is installed (``pip install -e '.[cpsat]'``)."""
    return cp_model is not None


@dataclass
class Instance:
    """One possible computation of ``node`` on ``device`` (index ``copy`` among its runs)."""

    node: int
    device: int
    copy: int
    present: Any
    stage: Any
    end: Any
    start: Any
    length: Any


@dataclass
class IntervalModel:
    """A built CP-SAT model and where each of its variables lives."""

    graph: Graph
    model: Any
    runs: np.ndarray
    """Instances per (device, node): ``C``, raised where a hinted schedule needs more."""
    covers: float | None = None
    """Set when ``runs`` are :func:`~solver.optimize.covering.covering_runs` for this cost:
    every schedule costing at most this fits, so no restriction applies below it."""
    instances: dict[tuple[int, int, int], Instance] = field(default_factory=dict)
    serves: dict[tuple[tuple[int, int, int], tuple[int, int, int], int], Any] = field(
        default_factory=dict
    )
    """``(producer instance, consumer instance, edge) -> literal``: the producer's output is
    what the consumer reads (locally when both are on one device, else by a transfer)."""
    frontiers: dict[tuple[int, int], Any] = field(default_factory=dict)
    """``(node, device) -> literal``: that device computes the node in its own stage (only
    where more than one device can)."""
    copies: dict[tuple[int, int, int], tuple[Any, list[Any]]] = field(default_factory=dict)
    """``(edge, device, consumer copy) -> (literal, the remote serves that imply it)``: the
    input is held on the consumer's device while it runs, having been copied there."""
    scale: float = 1.0
    unit: np.ndarray = field(default_factory=lambda: np.ones(0))
    num_variables: int = 0
    num_constraints: int = 0
    capped: bool = False
    demands: list[list[tuple[Any, int]]] = field(default_factory=list)
    """Per device, the intervals of its cumulative constraint with their demands."""
    objective: list[tuple[Any, int]] = field(default_factory=list)
    """The objective's literals with their scaled coefficients."""
    hint: tuple[np.ndarray, np.ndarray] | None = None
    """The hint's variable indices and values, when hinted: CP-SAT's first solution is often
    the hint itself, a schedule already replayed (decoding and replaying it again took 6.8 s
    on a 5,107-operation tower, past the time limit)."""

    @property
    def horizon(self) -> int:
        return self.graph.n * (self.graph.n + 1)

    @property
    def restriction(self) -> str:
        """The restriction an optimum of this model is optimal under, in words."""
        if self.covers is not None:
            return f"none for schedules costing at most {self.covers:.6g} ms"
        free = np.delete(self.runs, list(self.graph.once), axis=1)  # computed once: C = 1
        runs = int(free[free > 0].min()) if np.any(free > 0) else 0
        return f"each node computed at most {runs} times per device"

    def time(self, stage: int, node: int) -> int:
        return stage * (self.graph.n + 1) + node


def build_interval_model(
    graph: Graph,
    runs: int | np.ndarray = DEFAULT_RUNS,
    hint: tuple[Schedule, Timeline] | None = None,
    deadline: float | None = None,
    cancel: Cancel | None = None,
    covers: float | None = None,
) -> IntervalModel:
    """Build the retention-interval model of ``graph`` under its budgets (module docstring).

    ``hint`` (a valid schedule and its replay) is given to CP-SAT as a solution hint; ``runs``
    grows per (device, node) to hold its computations. ``runs`` is ``C`` for every node, or
    an array of counts per (device, node); ``covers`` says the counts hold every schedule of
    at most that cost (:mod:`solver.optimize.covering`).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> model = build_interval_model(unit_chain(2, budget=3))
    >>> len(model.instances), model.restriction
    (10, 'each node computed at most 2 times per device')
    """
    if cp_model is None:
        raise XEngineError(
            "the interval formulation needs OR-Tools CP-SAT: pip install -e '.[cpsat]'"
        )
    g = graph
    n, num_d = g.n, g.num_devices
    hinted = _hint_instances(g, hint[0]) if hint is not None else {}
    able = able_devices(g)
    counts = np.zeros((num_d, n), dtype=np.int64)
    per_node = np.broadcast_to(np.asarray(runs, dtype=np.int64), (num_d, n))
    for d in range(num_d):
        for v in range(n):
            if able[d][v]:
                counts[d, v] = max(int(per_node[d, v]), len(hinted.get((v, d), ())))
    counts[:, list(g.once)] = np.minimum(counts[:, list(g.once)], 1)  # C = 1: computed once
    model = cp_model.CpModel()
    im = IntervalModel(g, model, counts, covers=covers)
    units, sizes, works, caps = _memory_units(g)
    im.unit = units

    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise BuildStopped("cancel")
        if deadline is not None and time.monotonic() > deadline:
            raise BuildStopped("deadline")

    check()
    im.scale = _objective_scale(g, counts)
    horizon = im.horizon
    step = n + 1
    objective: list[tuple[Any, int]] = []
    demands: list[list[tuple[Any, int]]] = [[] for _ in range(num_d)]
    checked = 0

    # Instances and their intervals.
    for v in range(n):
        firsts = []
        for d in range(num_d):
            previous: Instance | None = None
            for c in range(int(counts[d, v])):
                checked += 1
                if checked % 2048 == 0:
                    check()
                present = model.new_bool_var(f"p[{v},{d},{c}]")
                stage = model.new_int_var(v, n - 1, f"st[{v},{d},{c}]")
                start = stage * step + v
                end = model.new_int_var(v + 1, horizon, f"e[{v},{d},{c}]")
                length = model.new_int_var(1, horizon, f"l[{v},{d},{c}]")
                interval = model.new_optional_interval_var(
                    start, length, end, present, f"i[{v},{d},{c}]"
                )
                inst = Instance(v, d, c, present, stage, end, start, length)
                im.instances[v, d, c] = inst
                demands[d].append((interval, int(sizes[d][v])))
                if works[d][v] > 0:
                    busy = model.new_optional_fixed_size_interval_var(
                        start, 1, present, f"w[{v},{d},{c}]"
                    )
                    demands[d].append((busy, int(works[d][v])))
                cost = _scaled(float(g.cost[d, v]), im)
                if cost:
                    objective.append((present, cost))
                if previous is not None:
                    model.add_implication(present, previous.present)
                    model.add(previous.end <= start).only_enforce_if(present)
                else:
                    firsts.append(inst)
                previous = inst
        # The frontier: one device computes v in stage v, as its first instance there.
        if len(firsts) == 1:
            only = firsts[0]
            model.add(only.present == 1)
            model.add(only.stage == v)
        else:
            chosen = []
            for inst in firsts:
                here = model.new_bool_var(f"f[{v},{inst.device}]")
                im.frontiers[v, inst.device] = here
                model.add_implication(here, inst.present)
                model.add(inst.stage == v).only_enforce_if(here)
                model.add(inst.stage >= v + 1).only_enforce_if([~here, inst.present])
                chosen.append(here)
            model.add_exactly_one(chosen)

    _add_once_constraints(im)

    # Inputs: each present instance is served by a resident instance of every input.
    for e, (u, v) in enumerate(g.edge_pairs):
        for d in range(num_d):
            for c in range(int(counts[d, v])):
                consumer = im.instances[v, d, c]
                options = []
                remote = []
                for d2 in range(num_d):
                    if d2 != d and not math.isfinite(g.edge_transfer_ms(e, d2, d)):
                        continue  # no link: never read from there
                    for c2 in range(int(counts[d2, u])):
                        checked += 1
                        if checked % 2048 == 0:
                            check()
                        producer = im.instances[u, d2, c2]
                        y = model.new_bool_var(f"y[{u},{d2},{c2}->{v},{d},{c}]")
                        model.add_implication(y, producer.present)
                        model.add_implication(y, consumer.present)
                        model.add(producer.start + 1 <= consumer.start).only_enforce_if(y)
                        model.add(producer.end >= consumer.start + 1).only_enforce_if(y)
                        im.serves[(u, d2, c2), (v, d, c), e] = y
                        options.append(y)
                        if d2 != d:
                            remote.append(y)
                            scaled = _scaled(g.edge_transfer_ms(e, d2, d), im)
                            if scaled:
                                objective.append((y, scaled))
                if not options:
                    model.add(consumer.present == 0)
                    continue
                model.add_bool_or(options).only_enforce_if(consumer.present)
                if remote:
                    copy = model.new_bool_var(f"x[{u}->{v},{d},{c}]")
                    im.copies[e, d, c] = (copy, remote)
                    for y in remote:
                        model.add_implication(y, copy)
                    held = model.new_optional_fixed_size_interval_var(
                        consumer.start, 1, copy, f"cp[{u}->{v},{d},{c}]"
                    )
                    demands[d].append((held, int(sizes[d][u])))

    check()
    im.demands = demands
    for d in range(num_d):
        if caps[d] is None:
            continue  # a budget no schedule can exceed needs no constraint
        intervals = [i for i, _ in demands[d]]
        amounts = [a for _, a in demands[d]]
        model.add_cumulative(intervals, amounts, int(caps[d]))
    im.objective = objective
    check()
    model.minimize(
        cp_model.LinearExpr.weighted_sum([var for var, _ in objective], [c for _, c in objective])
    )
    proto = model.proto
    if hint is not None:
        check()
        _add_hint(im, hinted, hint[0])
        im.hint = (
            np.array(proto.solution_hint.vars, dtype=np.int64),
            np.array(proto.solution_hint.values, dtype=np.int64),
        )
    im.num_variables = len(proto.variables)
    im.num_constraints = len(proto.constraints)
    return im


def _add_once_constraints(im: IntervalModel) -> None:
    """A node computed once (``Node.recomputable`` False) has one instance per device
    (``C = 1``), and only the frontier's is present: it is never computed again, on any
    device (docs/spec-notes.md, "Nodes computed once")."""
    for v in im.graph.once:
        present = [
            im.instances[v, d, 0].present
            for d in range(im.graph.num_devices)
            if (v, d, 0) in im.instances
        ]
        im.model.add_exactly_one(present)


class BuildStopped(XEngineError):
    """Building stopped at the deadline or on cancel; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"model building stopped ({reason})")
        self.reason = reason


def able_devices(g: Graph) -> list[list[bool]]:
    """Whether device ``d`` can run node ``v`` at all: a cost, and room for the node with
    its inputs and workspace (model.md §4's necessary condition)."""
    able = [{d for _, d in devices_for(g, v)} for v in range(g.n)]
    return [[d in able[v] for v in range(g.n)] for d in range(g.num_devices)]


def _memory_units(g: Graph) -> tuple[np.ndarray, list[list[int]], list[list[int]], list]:
    """Per device: a unit that divides every size, workspace and is exact (the gcd), the
    sizes and workspaces in it, and the budget in it (``None`` when it can never bind)."""
    sizes = [int(m) for m in g.output_bytes]
    works = [int(w) for w in g.workspace]
    divisor = 0
    for value in (*sizes, *works):
        divisor = math.gcd(divisor, value)
    divisor = max(divisor, 1)
    never = sum(sizes) + max(
        (sum(sizes[i] for i in g.inputs[k]) + works[k] for k in range(g.n)), default=0
    )
    units, scaled, scaled_work, caps = [], [], [], []
    for budget in g.activation_budgets:
        units.append(float(divisor))
        scaled.append([m // divisor for m in sizes])
        scaled_work.append([w // divisor for w in works])
        caps.append(None if int(budget) >= never else int(budget) // divisor)
    return np.array(units), scaled, scaled_work, caps


def _objective_scale(g: Graph, counts: np.ndarray) -> float:
    """The factor that keeps the costliest schedule of the model below
    :data:`OBJECTIVE_SCALE` once scaled (every instance present, every transfer paid)."""
    worst = 0.0
    for d in range(g.num_devices):
        for v in range(g.n):
            if counts[d, v] and not math.isnan(g.cost[d, v]):
                worst += float(counts[d, v]) * min(float(g.cost[d, v]), 1e12)
    worst += _transfer_total(g) * float(counts.max(initial=1)) ** 2
    return OBJECTIVE_SCALE / max(worst, 1e-9)


def _transfer_total(g: Graph) -> float:
    """The sum of every finite copy time (each capped at 1e12 ms), or an upper bound of it
    that needs no transfer table (every link's and every override's time, per edge): a
    table of 40 edges between 1,000 devices takes longer to fill than a 1 s solve."""
    if "transfer" in g.__dict__ or len(g.edge_pairs) * g.num_devices**2 <= 1_000_000:
        finite = g.transfer[np.isfinite(g.transfer)]
        return float(np.minimum(finite, 1e12).sum())
    overrides = {(e.source, e.target): e.transfer_ms for e in g.edges}
    total = 0.0
    for i, k in g.edge_pairs:
        total += sum(min(lk.transfer_ms(int(g.output_bytes[i])), 1e12) for lk in g.links)
        extra = overrides.get((g.nodes[i].id, g.nodes[k].id), {})
        total += sum(min(float(ms), 1e12) for ms in extra.values())
    return total


def _scaled(cost: float, im: IntervalModel) -> int:
    """``floor(cost * scale)``: never above the real cost, so bounds stay valid."""
    if cost > 1e12:
        im.capped = True
    return int(math.floor(min(cost, 1e12) * im.scale))


def _hint_instances(g: Graph, schedule: Schedule) -> dict[tuple[int, int], list[int]]:
    """The stages at which each (node, device) is computed in ``schedule``."""
    found: dict[tuple[int, int], list[int]] = {}
    for t, stage in enumerate(schedule.stages):
        for op in stage.ops:
            found.setdefault((g.index[op.node], g.device_index[op.device]), []).append(t)
    return found


def _add_hint(im: IntervalModel, hinted: dict, schedule: Schedule) -> None:
    """Hint CP-SAT with ``schedule``: each computation an instance, its end the time after
    its last read while resident (or the start of the first stage it is not kept into).

    The hint gives every variable a value, absent instances and unused serves included: an
    incomplete hint leaves CP-SAT to complete it by search, which on op-level models of
    thousands of operations (115,000 variables, 20,000 of them hinted) took seconds after
    presolve before the incumbent was its first solution."""
    g, model = im.graph, im.model
    step = g.n + 1
    # which instance of (u, d) is live at each stage, and when each instance is last needed
    live: dict[tuple[int, int], int] = {}
    ends: dict[tuple[int, int, int], int] = {}
    used: set[int] = set()  # indices of the serve literals the schedule uses
    runs_so_far: dict[tuple[int, int], int] = {}  # computations of (node, device) met
    for t, stage in enumerate(schedule.stages):
        for op in stage.ops:
            v, d = g.index[op.node], g.device_index[op.device]
            now = im.time(t, v)
            for u in g.inputs[v]:
                source = g.device_index[op.source_of(g.nodes[u].id)]
                c2 = live.get((u, source))
                if c2 is None:
                    continue
                ends[u, source, c2] = max(ends.get((u, source, c2), 0), now + 1)
                e = g.edge_number[u, v]
                c = runs_so_far.get((v, d), 0)
                y = im.serves.get(((u, source, c2), (v, d, c), e))
                if y is not None:
                    used.add(y.index)
            c = runs_so_far.get((v, d), 0)
            runs_so_far[v, d] = c + 1
            live[v, d] = c
            ends[v, d, c] = now + 1
        boundary = (t + 1) * step
        for (u, d), c in list(live.items()):
            if g.nodes[u].id in stage.keep.get(g.devices[d].name, ()):
                ends[u, d, c] = max(ends[u, d, c], boundary + 1)
            else:
                del live[u, d]
    for (v, d, c), inst in im.instances.items():
        stages = hinted.get((v, d), ())
        present = c < len(stages)
        t = stages[c] if present else v  # an absent instance: its earliest, shortest place
        start = im.time(t, v)
        end = min(ends.get((v, d, c), start + 1), im.horizon) if present else start + 1
        model.add_hint(inst.present, present)
        model.add_hint(inst.stage, t)
        model.add_hint(inst.end, end)
        model.add_hint(inst.length, end - start)
    for (v, d), here in im.frontiers.items():
        stages = hinted.get((v, d), ())
        model.add_hint(here, bool(stages) and stages[0] == v)
    for y in im.serves.values():
        model.add_hint(y, y.index in used)
    for copy, remote in im.copies.values():
        model.add_hint(copy, any(y.index in used for y in remote))


def schedule_from_solution(im: IntervalModel, value, info: SolverInfo) -> Schedule:
    """The schedule a solution encodes; ``value(var)`` reads a variable of the solution.

    Operations are the present instances at their stages; a tensor is kept into stage
    ``t+1`` while an operation of that stage or a later one still reads it; an input is read locally
    when a serving instance is on the consumer's device, else from the cheapest serving
    device.
    """
    g = im.graph
    step = g.n + 1
    ops_at: list[list[tuple[int, int, int]]] = [[] for _ in range(g.n)]
    spans: dict[tuple[int, int, int], tuple[int, int]] = {}
    for key, inst in im.instances.items():
        if not value(inst.present):
            continue
        t = int(value(inst.stage))
        ops_at[t].append(key)
        spans[key] = (im.time(t, inst.node), int(value(inst.end)))
    chosen: dict[tuple[tuple[int, int, int], int], list[tuple[int, int]]] = {}
    needed_until: dict[tuple[int, int, int], int] = {}
    for (producer, consumer, e), y in im.serves.items():
        if consumer in spans and producer in spans and value(y):
            chosen.setdefault((consumer, e), []).append(producer[:2])
            read_at = spans[consumer][0]
            needed_until[producer] = max(needed_until.get(producer, -1), read_at)
    # Kept into stage t + 1 while still read: an interval may outlast its last read, and a
    # tensor kept into a stage that does not read it is held to the stage's end. Instance
    # (v, d, c) starting at time ``start`` and last read at ``read`` is so kept after the
    # stages ``start // step`` to ``read // step - 1``: a sweep over those ranges, not a look
    # at every instance in every stage (30 M looks, 6 s, on a 5,107-operation graph).
    begins: list[list[tuple[int, str]]] = [[] for _ in range(g.n + 1)]
    ends: list[list[tuple[int, str]]] = [[] for _ in range(g.n + 1)]
    for (v, d, c), (start, _) in spans.items():
        first, last = start // step, min(needed_until.get((v, d, c), -1) // step, g.n - 1) - 1
        if first <= last:
            begins[first].append((d, g.nodes[v].id))
            ends[last + 1].append((d, g.nodes[v].id))
    held: list[dict[str, int]] = [{} for _ in range(g.num_devices)]  # name -> instances kept
    stages = []
    for t in range(g.n):
        for d, name in ends[t]:
            held[d][name] -= 1
            if not held[d][name]:
                del held[d][name]
        for d, name in begins[t]:
            held[d][name] = held[d].get(name, 0) + 1
        ops = []
        for v, d, c in sorted(ops_at[t], key=lambda k: (k[0], k[1])):
            sources = {}
            for u in g.inputs[v]:
                e = g.edge_number[u, v]
                served = chosen.get(((v, d, c), e), [])
                if any(d2 == d for _, d2 in served):
                    continue
                if served:
                    best = min(served, key=lambda p: g.edge_transfer_ms(e, p[1], d))
                    sources[g.nodes[u].id] = g.devices[best[1]].name
            ops.append(Operation(g.nodes[v].id, g.devices[d].name, sources))
        keep = {g.devices[d].name: frozenset(names) for d, names in enumerate(held) if names}
        stages.append(Stage(tuple(ops), keep))
    return Schedule(g.name, g.memory_limits, tuple(stages), info)

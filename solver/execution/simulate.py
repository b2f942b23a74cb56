"""Replaying a schedule under the execution rules of docs/model.md section 2.

The simulator is the referee: every schedule any method returns is replayed here before anyone
sees it, and every view of the GUI draws what it computes (never solver variables). It checks
each rule and reports the first violation with the stage, node, device and numbers involved.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule, Stage
from solver.errors import ScheduleViolation
from solver.execution.schedule_walk import offload_order

__all__ = [
    "OpEvent",
    "TransferEvent",
    "MemoryCurve",
    "Timeline",
    "simulate",
    "check_schedule",
    "effective_graph",
    "offload_ms",
    "add_step",
]


@dataclass(frozen=True)
class OpEvent:
    """One operation as it ran: times in ms, ``memory`` = bytes in use on its device meanwhile
    (its ``workspace`` included: the node's transient bytes, released when it ends)."""

    stage: int
    node: str
    device: str
    start: float
    end: float
    recompute: bool
    kind: str
    memory: int
    freed: tuple[tuple[str, str], ...] = ()
    """``(device, tensor)`` pairs released right after this operation."""
    workspace: int = 0
    """Workspace bytes of the node (part of ``memory``), in use only while it runs."""
    step: int = -1
    """Index of the step of its device's :class:`MemoryCurve` that holds while it runs (the
    state ``memory`` counts), or -1 where unknown (the concurrent estimate). A zero-cost
    operation's step has no width: its time alone cannot find it."""

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class TransferEvent:
    """A copy of ``tensor`` from ``source`` to ``target`` for the operation on ``consumer``."""

    stage: int
    tensor: str
    consumer: str
    source: str
    target: str
    start: float
    end: float
    bytes: int
    offload: bool = False
    """An offloading copy at the end of the stage, kept on ``target`` (``consumer`` is "")."""


@dataclass(frozen=True)
class MemoryCurve:
    """Memory in use on one device as a step function: ``bytes[j]`` holds on
    ``[times[j], times[j+1])``; ``resident[j]`` names the tensors making it up, and
    ``workspace[j]`` (part of ``bytes[j]``) the workspace of the operation running then, which
    is no tensor: ``bytes[j]`` is the sum of the resident tensors' sizes plus ``workspace[j]``.

    A zero-width step (``times[j] == times[j+1]``) is a step: the memory in use while a
    zero-cost operation runs (a reshape, a view) lasts no time but is held, and counts in
    every peak. The curve keeps every operation's own state and any other state that is higher
    than the states around it at the same instant (:func:`add_step`)."""

    device: str
    times: np.ndarray
    bytes: np.ndarray
    resident: Sequence[tuple[str, ...]]
    """Per step, the names of the tensors in use, sorted by node (then an operation's output
    and copied inputs): a :class:`Residents` read back from the replay's change log when
    asked, or any sequence of tuples."""
    workspace: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if len(self.workspace) != len(self.bytes):  # built without workspaces: all zero
            object.__setattr__(self, "workspace", np.zeros(len(self.bytes), dtype=np.int64))

    def at(self, time: float) -> tuple[int, tuple[str, ...]]:
        """Bytes in use and resident tensors at ``time`` (the latest step starting there)."""
        j = int(np.searchsorted(self.times, time, side="right")) - 1
        j = min(max(j, 0), len(self.bytes) - 1)
        return int(self.bytes[j]), self.resident[j]

    def index_during(self, op: OpEvent) -> int:
        """The step that holds while ``op`` runs: its own step on its device, else the latest
        step starting at its start (several steps may start then: ``at`` reads the last)."""
        if op.device == self.device and 0 <= op.step < len(self.bytes):
            return op.step
        j = int(np.searchsorted(self.times, op.start, side="right")) - 1
        return min(max(j, 0), len(self.bytes) - 1)

    def during(self, op: OpEvent) -> tuple[int, tuple[str, ...]]:
        """Bytes in use and resident tensors while ``op`` runs (exact on its own device, also
        for a zero-cost operation, whose step :meth:`at` cannot tell from the next one's)."""
        j = self.index_during(op)
        return int(self.bytes[j]), self.resident[j]


@dataclass(frozen=True)
class Timeline:
    """Everything derived from a schedule: events, memory curves, peaks and totals (ms, bytes).

    ``violation`` is the first broken rule (events stop there) or ``None`` for a valid schedule.
    """

    graph: str
    devices: tuple[str, ...]
    activation_budgets: Mapping[str, int]
    ops: tuple[OpEvent, ...]
    transfers: tuple[TransferEvent, ...]
    memory: Mapping[str, MemoryCurve]
    violation: ScheduleViolation | None = None
    saved_bytes: Mapping[str, int] = field(default_factory=dict)
    """Per device, the bytes resident when the backward starts (the checkpoints at the start
    of the graph's :attr:`~solver.document.graph.Graph.boundary` stage); empty for a graph
    without backward nodes, or a replay that broke before the boundary."""
    saved_limits: Mapping[str, int] = field(default_factory=dict)
    """The devices' saved-bytes limits the replay checked (``Device.saved_limit``)."""

    @property
    def valid(self) -> bool:
        return self.violation is None

    @property
    def compute_ms(self) -> float:
        return float(sum(op.duration for op in self.ops))

    @property
    def transfer_ms(self) -> float:
        return float(sum(tr.end - tr.start for tr in self.transfers))

    @property
    def total_ms(self) -> float:
        """The schedule's cost: all operations plus all transfers (model.md §2 rule 6).

        Past the float range (costs near 1e308) the clock overflows and ``end - start``
        becomes NaN; the true total is then larger than any float, so it is ``inf``.
        """
        total = self.compute_ms + self.transfer_ms
        return math.inf if math.isnan(total) else total

    @property
    def offload_ms(self) -> float:
        """Time of the offloading copies (part of ``transfer_ms``)."""
        return float(sum(tr.end - tr.start for tr in self.transfers if tr.offload))

    @property
    def recomputations(self) -> int:
        return sum(op.recompute for op in self.ops)

    @property
    def recompute_ms(self) -> float:
        return float(sum(op.duration for op in self.ops if op.recompute))

    @property
    def peaks(self) -> dict[str, int]:
        """Peak bytes in use per device."""
        return {d: int(c.bytes.max(initial=0)) for d, c in self.memory.items()}

    def summary(self) -> dict[str, object]:
        """Derived numbers for reports and the schedule file's ``summary`` key."""
        return {
            "valid": self.valid,
            "violation": str(self.violation) if self.violation else None,
            "total_ms": round(self.total_ms, 6),
            "compute_ms": round(self.compute_ms, 6),
            "transfer_ms": round(self.transfer_ms, 6),
            "recompute_ms": round(self.recompute_ms, 6),
            "recomputations": self.recomputations,
            "transfers": len(self.transfers),
            "offload_copies": sum(tr.offload for tr in self.transfers),
            "offload_ms": round(self.offload_ms, 6),
            "peak_bytes": self.peaks,
            "budget_bytes": dict(self.activation_budgets),
            **(
                {
                    "saved_bytes": dict(self.saved_bytes),
                    "saved_limit_bytes": dict(self.saved_limits),
                }
                if self.saved_limits
                else {}
            ),
        }


def effective_graph(
    graph: Graph, schedule: Schedule, memory_limits: Mapping[str, int] | None = None
) -> Graph:
    """The graph with the schedule's memory limits, then ``memory_limits``, on its devices."""
    merged = {**schedule.memory_limits, **(memory_limits or {})}
    return graph.with_memory_limits(merged) if merged else graph


def simulate(graph: Graph, schedule: Schedule, *, strict: bool = False) -> Timeline:
    """Replay ``schedule`` on ``graph`` (within its devices' activation budgets) serially.

    With ``strict`` the first violation is raised as :class:`ScheduleViolation`; otherwise the
    timeline up to it is returned with ``violation`` set, so that a view can show where it broke.

    Examples
    --------
    >>> from solver.document.graph import Device, Node, Edge, make_graph
    >>> from solver.document.schedule import Schedule, Stage, Operation
    >>> g = make_graph("ab", [Device("cpu", memory_limit=2)],
    ...                [Node("a", 1, {"cpu": 1.0}), Node("b", 1, {"cpu": 2.0})], [Edge("a", "b")])
    >>> s = Schedule("ab", {}, (Stage((Operation("a", "cpu"),), {"cpu": frozenset({"a"})}),
    ...                         Stage((Operation("b", "cpu"),))))
    >>> t = simulate(g, s)
    >>> t.valid, t.total_ms, t.peaks
    (True, 3.0, {'cpu': 2})
    """
    replay = _Replay(graph)
    try:
        if len(schedule.stages) != graph.n:
            raise _violation(
                "stages",
                f"the schedule has {len(schedule.stages)} stages but the graph has {graph.n} "
                "nodes; a schedule has one stage per node",
            )
        for t, stage in enumerate(schedule.stages):
            replay.run_stage(t, stage)
    except ScheduleViolation as exc:
        if strict:
            raise
        return replay.timeline(exc)
    return replay.timeline(None)


def check_schedule(graph: Graph, schedule: Schedule) -> Timeline:
    """Replay strictly: return the timeline of a valid schedule or raise the first violation."""
    return simulate(graph, schedule, strict=True)


def _violation(rule: str, message: str, **where: object) -> ScheduleViolation:
    stage = where.get("stage")
    prefix = f"stage {stage}: " if stage is not None else ""
    return ScheduleViolation(prefix + message, rule=rule, **where)  # type: ignore[arg-type]


@dataclass
class _Replay:
    """Mutable replay state; lives only inside :func:`simulate`."""

    graph: Graph
    now: float = 0.0
    live: dict[str, _Held] = field(default_factory=dict)
    ops: list[OpEvent] = field(default_factory=list)
    transfers: list[TransferEvent] = field(default_factory=list)
    steps: dict[str, list[tuple[float, int, _Snapshot, int]]] = field(default_factory=dict)
    pinned: dict[str, int] = field(default_factory=dict)
    """Per device, the index of the latest operation's own step (:func:`add_step` keeps it)."""
    holding: set[str] = field(default_factory=set)
    """Devices that may hold a tensor now (a superset of those whose ``live`` is not empty)."""
    saved: dict[str, int] = field(default_factory=dict)
    """Per device, the bytes resident at the start of the boundary stage (once reached)."""

    def __post_init__(self) -> None:
        # devices are added as they are used (a graph may have 1,000 devices; a baseline
        # uses one): see __missing__ of _PerDevice
        sizes = [int(m) for m in self.graph.output_bytes]
        self.sizes = sizes
        self.live = _PerDevice(lambda: _Held(sizes))
        self.steps = _PerDevice(lambda: [(0.0, 0, _Snapshot(0, ()), 0)])

    def _replace(self, device: str, ids: set[int]) -> None:
        """``device`` holds exactly ``ids`` from now on (logged like single changes)."""
        held = self.live[device]
        for i in sorted(held - ids):
            held.discard(i)
        for i in sorted(ids - held):
            held.add(i)

    # ----- bookkeeping ---------------------------------------------------------------------
    def _record(
        self, device: str, extra: tuple[int, ...] = (), workspace: int = 0, *, pin: bool = False
    ) -> int:
        """Record the memory in use on ``device`` from now on: the resident tensors, the
        ``extra`` ones (an operation's output and copied inputs) and a running workspace.
        ``pin``: the state of an operation while it runs, kept even when it lasts no time."""
        held = self.live[device]
        used = held.bytes + sum(self.sizes[i] for i in extra) + workspace
        # which tensors: a place in the device's change log, read back only when asked
        names = _Snapshot(len(held.log), tuple(extra))
        history = self.steps[device]
        last_pinned = self.pinned.get(device) == len(history) - 1
        add_step(history, (self.now, used, names, workspace), last_pinned=last_pinned)
        if pin:
            self.pinned[device] = len(history) - 1
        return used

    def timeline(self, violation: ScheduleViolation | None) -> Timeline:
        built = {}
        ids = [node.id for node in self.graph.nodes]
        for name, history in self.steps.items():
            if len(history) > 1 or history[0][:2] != (0.0, 0):
                times = np.array([h[0] for h in history], dtype=float)
                used = np.array([h[1] for h in history], dtype=np.int64)
                workspace = np.array([h[3] for h in history], dtype=np.int64)
                log = self.live[name].log
                resident = Residents([h[2] for h in history], log, ids)
                built[name] = MemoryCurve(name, times, used, resident, workspace)
        return Timeline(
            graph=self.graph.name,
            devices=tuple(self.graph.device_index),
            activation_budgets=self.graph.activation_budget_map,
            ops=tuple(self.ops),
            transfers=tuple(self.transfers),
            memory=_Curves(built, self.graph.device_index),
            violation=violation,
            saved_bytes=dict(self.saved),
            saved_limits=self.graph.saved_limits,
        )

    def _check_saved(self, t: int) -> None:
        """At the boundary stage: record what each device holds for the backward, and check
        it against the device's saved-bytes limit (rule "saved")."""
        for device in self.graph.devices:
            held = self.live[device.name].bytes if device.name in self.holding else 0
            self.saved[device.name] = int(held)
        for device in self.graph.devices:
            limit, held = device.saved_limit, self.saved[device.name]
            if limit is not None and held > limit:
                raise _violation(
                    "saved",
                    f"{device.name} holds {held} B when the backward starts, more than its "
                    f"saved-bytes limit of {limit} B; keep fewer checkpoints across the boundary",
                    stage=t,
                    device=device.name,
                    numbers={"saved": held, "limit": limit},
                )

    # ----- one stage -----------------------------------------------------------------------
    def run_stage(self, t: int, stage: Stage) -> None:
        g = self.graph
        if t == g.boundary:
            self._check_saved(t)
        positions = self._check_stage_order(t, stage)
        last_use = self._last_uses(t, stage)
        # Only the devices a stage touches are visited (a graph may have 1,000 devices): keep
        # and hold name the devices that keep or send something, in the graph's device order.
        order = g.device_index
        index = g.index.__getitem__
        keep = {
            d: set(map(index, ids))
            for d, ids in sorted(stage.keep.items(), key=lambda item: order[item[0]])
        }
        copies = _offload_copies(g, t, stage)
        # A tensor to be offloaded stays on its source until the copy at the end of the stage.
        hold = {name: set(ids) for name, ids in keep.items()}
        for i, source, _ in copies:
            hold.setdefault(source, set()).add(i)
        start = {name: set(self.live[name]) for name in keep}
        computed: dict[str, set[int]] = {}
        for p, (k, op) in enumerate(zip(positions, stage.ops, strict=True)):
            self._run_op(t, p, k, op, last_use, hold)
            computed.setdefault(op.device, set()).add(k)
        arriving = {(i, target) for i, _, target in copies}
        for device, kept in keep.items():
            # only what arrives by a copy or was neither resident nor computed here needs a
            # look (a stage of a 5,107-operation graph keeps 900 tensors): in ascending order,
            # so that the first violation is the same as when every kept tensor is looked at
            absent = kept - start[device] - computed.get(device, set())
            copied = {i for i, target in arriving if target == device} & kept
            for i in sorted(absent | copied):
                here = i not in absent
                if (i, device) in arriving:
                    self._check_copy(t, i, device, here)
                elif not here:
                    raise _violation(
                        "keep",
                        f"keeps {g.nodes[i].id} on {device}, but it was neither resident there "
                        "at the start of the stage nor computed there during it; to offload "
                        f'it there, write {{"id": "{g.nodes[i].id}", "from": DEVICE}}',
                        stage=t,
                        node=g.nodes[i].id,
                        device=device,
                    )
        if copies:
            self._run_copies(t, copies, hold)
        for device in sorted(self.holding | set(keep), key=order.__getitem__):
            kept = keep.get(device, set())
            if self.live[device] != kept:
                self._replace(device, kept)
                self._record(device)
        self.holding = {device for device in keep if self.live[device]}

    # ----- offloading (docs/spec-notes.md, "Offloading") ----------------------------------
    def _check_copy(self, t: int, i: int, target: str, here: bool) -> None:
        if here:
            raise _violation(
                "offload",
                f"copies {self.graph.nodes[i].id} to {target}, where it is already resident or "
                "computed in this stage; keep it there without a copy",
                stage=t,
                node=self.graph.nodes[i].id,
                device=target,
            )

    def _run_copies(self, t: int, copies: list[tuple[int, str, str]], hold: dict) -> None:
        """The end-of-stage phase: release what is neither kept nor sent, then copy in order.

        During the phase a device holds what it keeps plus what it sends; each copy occupies
        its bytes on the target from the start of the copy.
        """
        g = self.graph
        for device in sorted(self.holding, key=g.device_index.__getitem__):
            held = self.live[device] & hold.get(device, set())
            if held != self.live[device]:
                self._replace(device, held)
                self._record(device)
        for i, source, target in copies:
            name = g.nodes[i].id
            where = {"stage": t, "node": name, "device": target}
            if i not in self.live[source]:
                raise _violation(
                    "offload",
                    f"copies {name} from {source} to {target}, but {name} is not resident on "
                    f"{source} at the end of the stage; copy it from where it is",
                    **where,
                )
            ms = offload_ms(g, i, source, target)
            if not np.isfinite(ms):
                raise _violation(
                    "offload",
                    f"copies {name} from {source} to {target}, but there is no link "
                    f"{source} -> {target}; add a link to the graph",
                    **where,
                )
            self.live[target].add(i)
            self.holding.add(target)
            used = self._record(target)
            budget = g.device(target).activation_budget
            if used > budget:
                raise _violation(
                    "memory",
                    f"the copy of {name} to {target} needs {used} bytes in memory there but "
                    f"the budget is {budget}",
                    numbers={"used": used, "budget": budget},
                    **where,
                )
            self.transfers.append(
                TransferEvent(
                    t,
                    name,
                    "",
                    source,
                    target,
                    self.now,
                    self.now + ms,
                    int(g.output_bytes[i]),
                    True,
                )
            )
            self.now += ms

    def _check_stage_order(self, t: int, stage: Stage) -> list[int]:
        g = self.graph
        positions = []
        frontier = 0
        previous: tuple[int, int] | None = None
        for op in stage.ops:
            k, d = g.index[op.node], g.device_index[op.device]
            if k > t:
                raise _violation(
                    "frontier",
                    f"computes {op.node} (node {k}), which is beyond the frontier; "
                    f"stage {t} may only compute nodes 0..{t}",
                    stage=t,
                    node=op.node,
                    device=op.device,
                )
            if previous is not None and (k, d) <= previous:
                what = "twice" if (k, d) == previous else "out of order"
                raise _violation(
                    "order",
                    f"runs {op.node} on {op.device} {what}; operations run once each, "
                    "in ascending node order",
                    stage=t,
                    node=op.node,
                    device=op.device,
                )
            if np.isnan(g.cost[d, k]):
                raise _violation(
                    "device",
                    f"runs {op.node} on {op.device}, which has no cost for it (the "
                    "node cannot run there)",
                    stage=t,
                    node=op.node,
                    device=op.device,
                )
            if k < t and not g.nodes[k].recomputable:
                raise _violation(
                    "once",
                    f"recomputes {op.node} (node {k}), which is computed once, in its own stage "
                    "(a random op: computed again it would draw other numbers); keep it from "
                    f"stage {k} until its last use instead",
                    stage=t,
                    node=op.node,
                    device=op.device,
                )
            frontier += k == t
            previous = (k, d)
            positions.append(k)
        if frontier != 1:
            raise _violation(
                "frontier",
                f"computes its frontier node {g.nodes[t].id} {frontier} times; "
                "it must be computed exactly once, on one device",
                stage=t,
                node=g.nodes[t].id,
            )
        return positions

    def _last_uses(self, t: int, stage: Stage) -> dict[tuple[str, int], int]:
        """Position of the last operation reading each (device, tensor) in this stage."""
        g = self.graph
        last: dict[tuple[str, int], int] = {}
        for p, op in enumerate(stage.ops):
            k = g.index[op.node]
            for source_id in op.inputs:
                if g.index[source_id] not in g.inputs[k]:
                    raise _violation(
                        "inputs",
                        f"{op.node} reads {source_id}, which is not one of its inputs",
                        stage=t,
                        node=op.node,
                        device=op.device,
                    )
            for i in g.inputs[k]:
                last[op.source_of(g.nodes[i].id), i] = p
        return last

    def _run_op(self, t: int, p: int, k: int, op: Operation, last_use: dict, hold: dict) -> None:
        g = self.graph
        d = op.device
        copies = self._transfer_inputs(t, k, op)
        transient = tuple(i for i, _ in copies) + (k,)
        workspace = int(g.workspace[k])
        used = self._record(d, transient, workspace, pin=True)
        step = self.pinned[d]
        budget = g.device(d).activation_budget
        if used > budget:
            resident = used - workspace - sum(int(g.output_bytes[i]) for i in transient)
            parts = (
                f"resident {resident}, output {int(g.output_bytes[k])}, "
                f"copied inputs {sum(int(g.output_bytes[i]) for i, _ in copies)}"
            )
            numbers = {"used": used, "budget": budget}
            blame = ""
            if workspace:
                parts += f", workspace {workspace}"
                numbers["workspace"] = workspace
                if used - workspace <= budget:
                    blame = f"; without its workspace it would fit ({used - workspace} bytes)"
            raise _violation(
                "memory",
                f"{op.node} on {d} needs {used} bytes in memory ({parts}) but the budget is "
                f"{budget}{blame}",
                stage=t,
                node=op.node,
                device=d,
                numbers=numbers,
            )
        duration = float(g.cost[g.device_index[d], k])
        self.now += duration
        self.live[d].add(k)
        self.holding.add(d)
        freed = []
        for i in g.inputs[k]:
            source = op.source_of(g.nodes[i].id)
            if last_use.get((source, i)) == p and i not in hold.get(source, ()):
                self.live[source].discard(i)
                freed.append((source, g.nodes[i].id))
        self.ops.append(
            OpEvent(
                t,
                op.node,
                d,
                self.now - duration,
                self.now,
                k < t,
                g.nodes[k].kind,
                used,
                tuple(freed),
                workspace,
                step,
            )
        )
        for device in {d, *(s for s, _ in freed)}:
            self._record(device)

    def _transfer_inputs(self, t: int, k: int, op: Operation) -> list[tuple[int, str]]:
        """Check every input's availability and run the transfers; return the copies made."""
        g = self.graph
        copies = []
        for i in g.inputs[k]:
            name, source = g.nodes[i].id, op.source_of(g.nodes[i].id)
            where = {"stage": t, "node": op.node, "device": op.device}
            if i not in self.live[source]:
                place = "here" if source == op.device else f"on {source}"
                raise _violation(
                    "inputs",
                    f"{op.node} on {op.device} needs {name}, which is not resident "
                    f"{place}; keep it from an earlier stage or recompute it first",
                    **where,
                )
            if source == op.device:
                continue
            if i in self.live[op.device]:
                raise _violation(
                    "transfer",
                    f"{op.node} on {op.device} copies {name} from {source}, but it "
                    f"is already resident on {op.device}; read it locally",
                    **where,
                )
            e = g.edge_number[i, k]
            ms = g.edge_transfer_ms(e, g.device_index[source], g.device_index[op.device])
            if not np.isfinite(ms):
                raise _violation(
                    "transfer",
                    f"{op.node} on {op.device} copies {name} from {source}, but there "
                    f"is no link {source} -> {op.device}; add a link to the graph",
                    **where,
                )
            copies.append((i, source))
            self._record(op.device, tuple(c for c, _ in copies))
            self.transfers.append(
                TransferEvent(
                    t,
                    name,
                    op.node,
                    source,
                    op.device,
                    self.now,
                    self.now + ms,
                    int(g.output_bytes[i]),
                )
            )
            self.now += ms
        return copies


class _Curves(Mapping[str, MemoryCurve]):
    """Every device's curve, in the graph's device order; a device that held nothing shares
    one flat curve, made when asked for (a replay of a baseline on one of 1,000 devices
    built 1,000 curves)."""

    def __init__(self, built: dict[str, MemoryCurve], devices: Mapping[str, int]):
        self._built, self._devices = built, devices

    def __getitem__(self, device: str) -> MemoryCurve:
        curve = self._built.get(device)
        if curve is not None:
            return curve
        if device in self._devices:
            return _unused_curve(device)
        raise KeyError(device)

    def __iter__(self):
        return iter(self._devices)

    def __len__(self) -> int:
        return len(self._devices)


class _Held(set):
    """The tensors resident on one device, with their bytes and a log of every change.

    The replay used to sum and name the resident tensors at every step: O(steps x resident),
    seconds for a 2,000-node schedule and most of a replay's time. Now each step stores only
    a place in this log (:class:`_Snapshot`), and :class:`Residents` reads the names back.
    """

    def __init__(self, sizes: list[int]) -> None:
        super().__init__()
        self.sizes = sizes
        self.bytes = 0
        self.log: list[tuple[int, bool]] = []
        """``(tensor, added)`` in the order the changes happened."""

    def add(self, i: int) -> None:
        if i not in self:
            super().add(i)
            self.bytes += self.sizes[i]
            self.log.append((i, True))

    def discard(self, i: object) -> None:
        if isinstance(i, int) and i in self:
            super().discard(i)
            self.bytes -= self.sizes[i]
            self.log.append((i, False))


@dataclass(frozen=True)
class _Snapshot:
    """A step's tensors: the change log's first ``position`` entries, then ``extra``."""

    position: int
    extra: tuple[int, ...]


class Residents(Sequence):
    """The tensors in use at each step of a memory curve, read back from the change log.

    Sequential reads (iteration) replay the log once; a random read starts from the nearest
    of the snapshots taken every :data:`SNAPSHOT_EVERY` log entries on the first one.
    """

    SNAPSHOT_EVERY = 256

    def __init__(self, steps: list[_Snapshot], log: list[tuple[int, bool]], ids: list[str]):
        self._steps, self._log, self._ids = steps, log, ids
        self._snapshots: list[frozenset[int]] | None = None

    def __len__(self) -> int:
        return len(self._steps)

    def _names(self, live: set[int] | frozenset[int], extra: tuple[int, ...]) -> tuple[str, ...]:
        return tuple(self._ids[i] for i in (*sorted(live), *extra))

    def _state(self, position: int) -> set[int]:
        if self._snapshots is None:
            self._snapshots = []
            live: set[int] = set()
            for at, (i, added) in enumerate(self._log):
                if at % self.SNAPSHOT_EVERY == 0:
                    self._snapshots.append(frozenset(live))
                if added:
                    live.add(i)
                else:
                    live.discard(i)
        base = position // self.SNAPSHOT_EVERY
        if base >= len(self._snapshots):
            base = len(self._snapshots) - 1
        live = set(self._snapshots[base]) if self._snapshots else set()
        for i, added in self._log[base * self.SNAPSHOT_EVERY : position]:
            if added:
                live.add(i)
            else:
                live.discard(i)
        return live

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        step = self._steps[j]
        return self._names(self._state(step.position), step.extra)

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        live: set[int] = set()
        at = 0
        for step in self._steps:
            for i, added in self._log[at : step.position]:
                if added:
                    live.add(i)
                else:
                    live.discard(i)
            at = max(at, step.position)
            yield self._names(live, step.extra)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class _PerDevice(dict):
    """A dict that makes a device's entry on first use (``factory()``)."""

    def __init__(self, factory) -> None:
        super().__init__()
        self.factory = factory

    def __missing__(self, device: str):
        value = self[device] = self.factory()
        return value


@functools.lru_cache(maxsize=4096)
def _unused_curve(device: str) -> MemoryCurve:
    """The curve of a device that held nothing: 0 bytes from time 0 (read-only arrays, one
    per device name, shared by every timeline)."""
    times, zeros = np.zeros(1, dtype=float), np.zeros(1, dtype=np.int64)
    times.setflags(write=False)
    zeros.setflags(write=False)
    return MemoryCurve(device, times, zeros, ((),), zeros)


def add_step(history: list, entry: tuple, *, last_pinned: bool = False) -> None:
    """Add ``entry`` to a device's memory ``history`` (tuples ``(time, bytes, ...)`` in
    order, as the simulator and the concurrent estimate record them).

    A zero-width step is a step. A state recorded at the same instant as the last one used to
    overwrite it, and lost the memory held during a zero-cost operation: ``a`` (100 B) ->
    ``b`` (100 B, cost 0) -> ``c`` (1 B) peaks at 200 B while ``b`` runs, and the curve said
    101 B. The last state is replaced only when it lasted no time, is not an operation's own
    state (``last_pinned``), and is no higher than the state before it or ``entry``: such a
    state can set no peak (the maximum over every state recorded is always the curve's
    maximum) and has no width to draw. Everything else is kept as a step of zero width.

    Examples
    --------
    >>> history = [(0.0, 0)]
    >>> for entry in [(0.0, 100), (1.0, 100), (1.0, 200), (1.0, 100), (1.0, 101), (2.0, 1)]:
    ...     add_step(history, entry)
    >>> history
    [(0.0, 100), (1.0, 200), (1.0, 101), (2.0, 1)]
    """
    if history and history[-1][0] == entry[0] and not last_pinned:
        before = history[-2][1] if len(history) > 1 else entry[1]
        if history[-1][1] <= max(before, entry[1]):
            history[-1] = entry
            return
    history.append(entry)


def offload_ms(graph: Graph, i: int, source: str, target: str) -> float:
    """Milliseconds to copy tensor ``i`` over the link ``source -> target`` (inf without one).

    An offloading copy serves no edge, so per-edge ``transfer_ms`` overrides do not apply:
    the link model alone prices it (docs/spec-notes.md, "Offloading").
    """
    for link in graph.links:
        if link.source == source and link.target == target:
            return link.transfer_ms(int(graph.output_bytes[i]))
    return float("inf")


def _offload_copies(graph: Graph, t: int, stage: Stage) -> list[tuple[int, str, str]]:
    """The stage's offloading copies as ``(tensor, source, target)`` in the order they run
    (:func:`solver.execution.schedule_walk.offload_order`, which the torch runtimes follow)."""
    order = graph.device_index
    copies = [(graph.index[x], s, d) for x, s, d in stage.offload_copies()]
    for i, source, target in copies:
        if source == target:
            raise _violation(
                "offload",
                f"copies {graph.nodes[i].id} from {source} to itself; name another device",
                stage=t,
                node=graph.nodes[i].id,
                device=target,
            )
    ordered = offload_order(stage.offload_copies(), graph.index, list(order))
    return [(graph.index[x], s, d) for x, s, d in ordered]

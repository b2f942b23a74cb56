"""Concurrent-execution estimate: a schedule laid out with devices and links working in parallel.

docs/model.md §2 charges a schedule the plain sum of its operations and transfers (XEngine's
objective); §7 asks for the same schedule laid out on hardware where every device and every link
(ordered device pair) is a resource of its own. This module computes that layout, an estimate of
what the schedule would take if devices and copies overlapped. It never changes the schedule.

Tasks and instances
-------------------
The schedule is first replayed serially (:func:`solver.execution.simulate.simulate`); a schedule
that breaks a rule there is refused. Each operation becomes an *op task* on its device and each copy
(an input read from another device) a *copy task* on the link ``source -> target``. Every task
produces one *instance*: an op's output on its device, or a copy on the consuming device. A task
reads exactly the instances the serial replay would read: the copy of a tensor resident on the
device at that moment, so a tensor freed after its last use in a stage is never read again, and
a recomputation is a new op with a new instance that later readers use.

When a tensor occupies memory
-----------------------------
An instance occupies its bytes on its device from the *start* of the task that produces it
(the op, or the copy) until the *end* of the last task that reads it (an op reading it locally,
a copy reading it as its source, or, for a copy, the op it was made for); an instance that nothing
reads is released at the end of its producer. An op's workspace (the node's transient bytes)
occupies its device from the op's start to its end. Nothing else counts: a checkpoint kept across
stages is an instance with readers in later stages, and a kept tensor that is never read again
is released when its producer or last reader ends (earlier than in the serial replay, which
holds it until a stage does not keep it).

Layout rules
------------
A task starts at the earliest instant at which all of the following hold:

1. every instance it reads is complete (its producer has ended);
2. its resource (the device for an op, the link for a copy) is free;
3. it keeps the schedule's order: tasks that allocate memory on the same device (the ops on that
   device and the copies into it) start in the order of the serial replay, so the order per
   device and per link is the schedule's;
4. its bytes fit: memory in use on its device plus its new instance (and an op's workspace)
   stays within the budget (otherwise it waits for releases: delay rather than overflow).

Tasks start as soon as they can (an event simulation over task ends). Because tasks start in
serial order per device, the serial replay itself is one admissible layout: by induction over
the serial order, every task starts no later than in the serial replay, so the concurrent
makespan never exceeds the serial cost, equals it on a single device, and a schedule valid in
the serial replay never dead-locks on memory. Should it dead-lock anyway, a
:class:`~solver.errors.ScheduleViolation` with rule ``concurrent`` names the waiting tasks.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.errors import ScheduleViolation
from solver.execution.simulate import (
    MemoryCurve,
    OpEvent,
    Timeline,
    TransferEvent,
    add_step,
    offload_ms,
    simulate,
)

__all__ = ["ConcurrentLayout", "concurrent_layout", "concurrent_makespan"]


@dataclass(frozen=True)
class ConcurrentLayout:
    """A schedule laid out concurrently (see the module docstring).

    ``timeline`` has the same shape as the serial replay's (events, memory curves), with the
    concurrent start and end times, so the schedule views can draw it; note that its
    ``total_ms`` is still the serial cost (the sum of durations) and ``makespan_ms`` the time
    at which the last task ends. ``serial`` is the serial replay.
    """

    serial: Timeline
    timeline: Timeline
    makespan_ms: float

    @property
    def serial_ms(self) -> float:
        """The serial cost of docs/model.md §2 rule 6."""
        return self.serial.total_ms

    @property
    def speedup(self) -> float:
        """Serial cost over concurrent makespan (1.0 when nothing overlaps)."""
        return self.serial_ms / self.makespan_ms if self.makespan_ms > 0 else 1.0

    def busy_ms(self) -> dict[str, float]:
        """Milliseconds each device spends computing (its idle time is makespan minus this)."""
        busy = dict.fromkeys(self.timeline.devices, 0.0)
        for op in self.timeline.ops:
            busy[op.device] += op.duration
        return busy


@dataclass
class _Tasks:
    """Tasks in serial order and the instances they produce and read (plain lists)."""

    kind: list[str] = field(default_factory=list)  # "op", "copy" or "offload" (kept copy)
    stage: list[int] = field(default_factory=list)
    tensor: list[int] = field(default_factory=list)  # the op's node, or the copied tensor
    consumer: list[int] = field(default_factory=list)  # the op's node, or the copy's reader
    device: list[int] = field(default_factory=list)  # where the output instance lives
    source: list[int] = field(default_factory=list)  # copy source (an op's own device)
    duration: list[float] = field(default_factory=list)
    reads: list[list[int]] = field(default_factory=list)  # instance ids == producing task ids

    def add(self, kind, stage, tensor, consumer, device, source, duration, reads) -> int:
        self.kind.append(kind)
        self.stage.append(stage)
        self.tensor.append(tensor)
        self.consumer.append(consumer)
        self.device.append(device)
        self.source.append(source)
        self.duration.append(duration)
        self.reads.append(reads)
        return len(self.kind) - 1


def concurrent_layout(
    graph: Graph, schedule: Schedule, serial: Timeline | None = None
) -> ConcurrentLayout:
    """Lay ``schedule`` out with every device and link running in parallel.

    Parameters
    ----------
    graph
        The graph, with the budgets to respect (as for :func:`~solver.execution.simulate.simulate`).
    schedule
        Any schedule that is valid in the serial replay.
    serial
        Its serial replay on ``graph``, if already computed (saves a replay).

    Returns
    -------
    ConcurrentLayout
        The concurrent timeline and makespan beside the serial replay.

    Raises
    ------
    ScheduleViolation
        The schedule breaks a rule of the serial replay (that violation), or, which the module
        docstring shows cannot happen for a valid schedule, the layout dead-locks on memory.

    Examples
    --------
    Two independent nodes on two devices, then a node on the CPU that reads both: ``a`` (2 ms,
    CPU) and ``b`` (3 ms, GPU) run side by side, ``b`` is copied in 1 ms, ``c`` takes 1 ms.

    >>> from solver.document.graph import Device, Edge, Link, Node, make_graph
    >>> from solver.document.schedule import Operation, Schedule, Stage
    >>> g = make_graph("v", [Device("cpu", memory_limit=9), Device("gpu", memory_limit=9)],
    ...     [Node("a", 1, {"cpu": 2.0}), Node("b", 1, {"gpu": 3.0}), Node("c", 1, {"cpu": 1.0})],
    ...     [Edge("a", "c"), Edge("b", "c")], [Link("gpu", "cpu", 1000.0)])
    >>> s = Schedule("v", {}, (
    ...     Stage((Operation("a", "cpu"),), {"cpu": frozenset({"a"})}),
    ...     Stage((Operation("b", "gpu"),), {"cpu": frozenset({"a"}), "gpu": frozenset({"b"})}),
    ...     Stage((Operation("c", "cpu", {"b": "gpu"}),))))
    >>> layout = concurrent_layout(g, s)
    >>> layout.serial_ms, layout.makespan_ms
    (7.0, 5.0)
    """
    serial = serial if serial is not None else simulate(graph, schedule)
    if serial.violation is not None:
        raise serial.violation
    tasks = _build_tasks(graph, schedule)
    starts, ends, memory_at_start, freed, steps = _lay_out(graph, tasks)
    timeline = _timeline(graph, tasks, starts, ends, memory_at_start, freed, steps)
    makespan = max(ends, default=0.0)
    return ConcurrentLayout(serial, timeline, float(makespan))


def concurrent_makespan(graph: Graph, schedule: Schedule, serial: Timeline | None = None) -> float:
    """The concurrent makespan of ``schedule`` in ms (see :func:`concurrent_layout`).

    Examples
    --------
    On one device nothing can overlap: the makespan is the serial cost.

    >>> from solver.document.generators import unit_chain
    >>> from solver.optimize.baselines import checkpoint_all
    >>> g = unit_chain(3)
    >>> concurrent_makespan(g, checkpoint_all(g, "cpu"))
    7.0
    """
    return concurrent_layout(graph, schedule, serial).makespan_ms


def _build_tasks(graph: Graph, schedule: Schedule) -> _Tasks:
    """Replay the schedule's residency like the simulator and record who reads which instance.

    ``live[d][i]`` is the instance (= producing task id) of tensor ``i`` resident on device
    ``d``; the freeing rules are those of docs/model.md §2 rule 5, as in the simulator.
    """
    g = graph
    tasks = _Tasks()
    live: list[dict[int, int]] = [{} for _ in g.devices]
    for t, stage in enumerate(schedule.stages):
        last_use: dict[tuple[int, int], int] = {}
        for p, op in enumerate(stage.ops):
            k = g.index[op.node]
            for i in g.inputs[k]:
                last_use[g.device_index[op.source_of(g.nodes[i].id)], i] = p
        keep = [{g.index[x] for x in stage.kept_on(dev.name)} for dev in g.devices]
        copies = [
            (g.index[x], g.device_index[src], g.device_index[dst])
            for x, src, dst in stage.offload_copies()
        ]
        copies.sort(key=lambda c: (c[0], c[2]))  # the simulator's order
        hold = [set(kept) for kept in keep]
        for i, src, _ in copies:
            hold[src].add(i)
        for p, op in enumerate(stage.ops):
            k, d = g.index[op.node], g.device_index[op.device]
            reads = []
            for i in g.inputs[k]:
                s = g.device_index[op.source_of(g.nodes[i].id)]
                if s == d:
                    reads.append(live[d][i])
                    continue
                ms = g.edge_transfer_ms(g.edge_number[i, k], s, d)
                reads.append(tasks.add("copy", t, i, k, d, s, ms, [live[s][i]]))
            live[d][k] = tasks.add("op", t, k, k, d, d, float(g.cost[d, k]), reads)
            for i in g.inputs[k]:
                s = g.device_index[op.source_of(g.nodes[i].id)]
                if last_use.get((s, i)) == p and i not in hold[s]:
                    del live[s][i]
        for i, src, dst in copies:  # offloading copies at the end of the stage
            ms = offload_ms(g, i, g.devices[src].name, g.devices[dst].name)
            live[dst][i] = tasks.add("offload", t, i, i, dst, src, ms, [live[src][i]])
        for d in range(g.num_devices):
            live[d] = {i: live[d][i] for i in keep[d]}
    return tasks


class _Layout:
    """The event simulation of the layout rules (module docstring); lives in :func:`_lay_out`."""

    def __init__(self, graph: Graph, tasks: _Tasks):
        self.graph, self.tasks = graph, tasks
        count = len(tasks.kind)
        self.size = [int(graph.output_bytes[i]) for i in tasks.tensor]
        self.workspace = [
            int(graph.workspace[i]) if kind == "op" else 0
            for kind, i in zip(tasks.kind, tasks.tensor, strict=True)
        ]
        self.running_workspace = [0] * graph.num_devices
        self.budget = [int(b) for b in graph.activation_budgets]
        self.pending = [1] * count  # the producer, then one per reader
        for reads in tasks.reads:
            for inst in reads:
                self.pending[inst] += 1
        self.resource = [
            (tasks.source[j], tasks.device[j]) if tasks.kind[j] != "op" else (tasks.device[j],)
            for j in range(count)
        ]
        self.queues: list[list[int]] = [[] for _ in graph.devices]
        for j in range(count):
            self.queues[tasks.device[j]].append(j)
        self.head = [0] * graph.num_devices
        self.busy: set[tuple[int, ...]] = set()
        self.ended = [False] * count
        self.starts, self.ends = [0.0] * count, [0.0] * count
        self.memory_at_start = [0] * count
        self.freed: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        self.used = [0] * graph.num_devices
        self.resident: list[dict[int, int]] = [{} for _ in graph.devices]  # instance -> tensor
        self.steps: list[list] = [[(0.0, 0, (), 0)] for _ in graph.devices]
        self.running: list[tuple[float, int]] = []
        self.now = 0.0

    def run(self) -> None:
        done = 0
        while done < len(self.tasks.kind):
            while self._start_ready():
                pass
            if not self.running:
                raise self._deadlock()
            self.now = self.running[0][0]
            while self.running and self.running[0][0] <= self.now:
                self._finish(heapq.heappop(self.running)[1])
                done += 1

    def _record(self, d: int) -> None:
        entry = (
            self.now,
            self.used[d],
            tuple(sorted(self.resident[d].values())),
            self.running_workspace[d],
        )
        add_step(self.steps[d], entry)  # a zero-width step is a step (a zero-cost task)

    def _ready(self, j: int) -> bool:
        d = self.tasks.device[j]
        return (
            self.resource[j] not in self.busy
            and all(self.ended[inst] for inst in self.tasks.reads[j])
            and self.used[d] + self.size[j] + self.workspace[j] <= self.budget[d]
        )

    def _start_ready(self) -> bool:
        """Start the head task of every device queue that can start now; whether any did."""
        started = False
        for d, queue in enumerate(self.queues):
            if self.head[d] < len(queue) and self._ready(queue[self.head[d]]):
                j = queue[self.head[d]]
                self.head[d] += 1
                self.busy.add(self.resource[j])
                self.used[d] += self.size[j] + self.workspace[j]
                self.running_workspace[d] += self.workspace[j]
                self.resident[d][j] = self.tasks.tensor[j]
                self._record(d)
                self.starts[j], self.memory_at_start[j] = self.now, self.used[d]
                self.ends[j] = self.now + self.tasks.duration[j]
                heapq.heappush(self.running, (self.ends[j], j))
                started = True
        return started

    def _finish(self, j: int) -> None:
        self.ended[j] = True
        self.busy.discard(self.resource[j])
        if self.workspace[j]:  # released when its op ends
            d = self.tasks.device[j]
            self.used[d] -= self.workspace[j]
            self.running_workspace[d] -= self.workspace[j]
            self._record(d)
        for inst in (*self.tasks.reads[j], j):
            self.pending[inst] -= 1
            if self.pending[inst] == 0:
                d = self.tasks.device[inst]
                self.used[d] -= self.size[inst]
                del self.resident[d][inst]
                self.freed[j].append((d, self.tasks.tensor[inst]))
                self._record(d)

    def _deadlock(self) -> ScheduleViolation:
        g, tasks, waiting = self.graph, self.tasks, []
        for d, queue in enumerate(self.queues):
            if self.head[d] < len(queue):
                j = queue[self.head[d]]
                need = self.size[j] + self.workspace[j]
                waiting.append(
                    f"{tasks.kind[j]} of {g.nodes[tasks.tensor[j]].id} (stage {tasks.stage[j]}) "
                    f"on {g.devices[d].name} needs {need} more bytes with "
                    f"{self.used[d]} of {g.activation_budgets[d]} in use"
                )
        return ScheduleViolation(
            "the concurrent layout cannot proceed: " + "; ".join(waiting), rule="concurrent"
        )


def _lay_out(graph: Graph, tasks: _Tasks):
    """Run the layout; return starts, ends, memory at each start, releases and memory steps."""
    layout = _Layout(graph, tasks)
    layout.run()
    return layout.starts, layout.ends, layout.memory_at_start, layout.freed, layout.steps


def _timeline(graph: Graph, tasks: _Tasks, starts, ends, memory_at_start, freed, steps):
    g = graph
    names = [d.name for d in g.devices]
    ops, transfers = [], []
    for j, kind in enumerate(tasks.kind):
        node = g.nodes[tasks.tensor[j]]
        t = tasks.stage[j]
        if kind == "op":
            released = tuple((names[d], g.nodes[i].id) for d, i in freed[j])
            recompute = g.index[node.id] < t
            event = OpEvent(
                t,
                node.id,
                names[tasks.device[j]],
                starts[j],
                ends[j],
                recompute,
                node.kind,
                memory_at_start[j],
                released,
                int(g.workspace[tasks.tensor[j]]),
            )
            ops.append(event)
        else:
            transfers.append(
                TransferEvent(
                    t,
                    node.id,
                    g.nodes[tasks.consumer[j]].id if kind == "copy" else "",
                    names[tasks.source[j]],
                    names[tasks.device[j]],
                    starts[j],
                    ends[j],
                    int(g.output_bytes[tasks.tensor[j]]),
                    kind == "offload",
                )
            )
    memory = {names[d]: _curve(g, names[d], history) for d, history in enumerate(steps)}
    return Timeline(
        graph=g.name,
        devices=tuple(names),
        activation_budgets={d.name: d.activation_budget for d in g.devices},
        ops=tuple(ops),
        transfers=tuple(transfers),
        memory=memory,
    )


def _curve(graph: Graph, device: str, history: Sequence) -> MemoryCurve:
    return MemoryCurve(
        device,
        np.array([h[0] for h in history], dtype=float),
        np.array([h[1] for h in history], dtype=np.int64),
        tuple(tuple(graph.nodes[i].id for i in h[2]) for h in history),
        np.array([h[3] for h in history], dtype=np.int64),
    )

"""Walk a schedule as the simulator replays it, driving a runtime that holds real tensors.

The torch runtimes (:mod:`solver.executors`: ATen groups and torch.fx layers) run a schedule
the same way; only what "run node k on device d" means differs. The walk is the simulator's
(:func:`solver.execution.simulate.simulate`): operations in order, each input released right
where the replay frees it (``OpEvent.freed``), and at the end of a stage the offloading phase of
docs/spec-notes.md "Offloading": first every device releases what it neither keeps nor sends,
then the copies run in :func:`offload_order` (the one order the simulator charges them in too),
then every device releases what it sent and does not keep.

It lives beside the simulator, not with the runtimes, because it is the simulator's order of
events; it needs no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from solver.document.graph import Graph
from solver.document.schedule import Schedule, Stage

__all__ = ["StepRow", "StepRuntime", "walk_schedule", "end_stage", "offload_order", "order_of"]

#: One executed operation: ``(stage, node, device, milliseconds, recompute)``.
StepRow = tuple[int, str, str, float, bool]


class StepRuntime(Protocol):
    """What the walk needs of a runtime: run, release and offload tensors by node id."""

    freed_after: frozenset[tuple[str, str]]

    @property
    def store(self) -> Mapping[str, Mapping[str, Any]]:
        """Schedule device -> node id -> that node's tensors held there."""
        ...

    def run_group(self, gid: str, device: str, sources: Mapping[str, str]) -> float:
        """Run node ``gid`` on schedule device ``device``; its milliseconds."""
        ...

    def release(self, device: str, gid: str) -> None:
        """Drop node ``gid``'s tensors on ``device``."""
        ...

    def offload(self, gid: str, source: str, target: str) -> None:
        """Copy node ``gid``'s tensors from ``source`` to ``target`` and keep them there."""
        ...

    def mark_saved(self) -> None:
        """Record what every device holds now: the backward is about to start."""
        ...


def walk_schedule(
    runtime: StepRuntime,
    schedule: Schedule,
    timeline: Any,
    position: Mapping[str, int],
    devices: Sequence[str],
    boundary: int | None = None,
) -> list[StepRow]:
    """Every operation of ``schedule`` in order on ``runtime``, releasing where ``timeline``
    (its replay) frees; one row ``(stage, node, device, ms, recompute)`` each.

    ``position`` maps node ids to the schedule order and ``devices`` lists the graph's devices
    in order (:func:`order_of`): they order the offloading copies as the simulator does.
    ``boundary`` is the graph's forward/backward boundary stage: before its first operation
    the runtime records what it holds (:meth:`StepRuntime.mark_saved`), where the simulator
    counts ``Timeline.saved_bytes``.
    """
    op_ms: list[StepRow] = []
    for (t, op), event in zip(schedule.operations, timeline.ops, strict=True):
        if t == boundary and schedule.stages[t].ops[0] is op:
            runtime.mark_saved()
        runtime.freed_after = frozenset(event.freed)  # a hint: what dies after this op
        ms = runtime.run_group(op.node, op.device, op.inputs)
        op_ms.append((t, op.node, op.device, ms, event.recompute))
        for device, tensor in event.freed:
            runtime.release(device, tensor)
        if schedule.stages[t].ops[-1] is op:
            end_stage(runtime, schedule.stages[t], position, devices)
    return op_ms


def order_of(graph: Graph) -> tuple[dict[str, int], list[str]]:
    """Node id -> schedule position, and the device names in the graph's order."""
    return {node.id: j for j, node in enumerate(graph.nodes)}, [d.name for d in graph.devices]


def end_stage(
    runtime: StepRuntime, stage: Stage, position: Mapping[str, int], devices: Sequence[str]
) -> None:
    """Release what the stage does not keep, running its offloading copies in the simulator's
    order (``position``: node id -> schedule order; ``devices`` in the graph's order); a copy's
    source is held until the copy."""
    copies = offload_order(stage.offload_copies(), position, devices)
    sent = {(source, gid) for gid, source, _ in copies}
    _release_all(runtime, stage, sent)
    for gid, source, target in copies:
        runtime.offload(gid, source, target)
    _release_all(runtime, stage, set())


def offload_order(
    copies: Sequence[tuple[str, str, str]], position: Mapping[str, int], devices: Sequence[str]
) -> list[tuple[str, str, str]]:
    """The order in which a stage's offloading copies ``(tensor, source, target)`` run: by
    tensor in schedule order (``position``), then by target in the graph's device order.

    Examples
    --------
    >>> offload_order([("b", "gpu", "cpu"), ("a", "cpu", "gpu"), ("a", "cpu", "ssd")],
    ...               {"a": 0, "b": 1}, ["cpu", "ssd", "gpu"])
    [('a', 'cpu', 'ssd'), ('a', 'cpu', 'gpu'), ('b', 'gpu', 'cpu')]
    """
    order = {name: j for j, name in enumerate(devices)}
    return sorted(copies, key=lambda c: (position[c[0]], order[c[2]]))


def _release_all(runtime: StepRuntime, stage: Stage, sent: set[tuple[str, str]]) -> None:
    for device, held in runtime.store.items():
        kept = stage.kept_on(device)
        for gid in [g for g in held if g not in kept and (device, g) not in sent]:
            runtime.release(device, gid)

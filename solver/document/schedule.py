"""The schedule: operations per stage, where each input is read from, and what is kept.

This is the answer of every method (the MIQP, the baselines, a hand-written file). It says only
what docs/formats.md stores; times and memory are always derived by the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from solver.status import SolveStatus

__all__ = ["Operation", "Stage", "SolverInfo", "Schedule"]


@dataclass(frozen=True)
class Operation:
    """Node ``node`` computed on ``device``; ``inputs`` maps an input id to its source device.

    Inputs read on the same device may be left out of ``inputs``.
    """

    node: str
    device: str
    inputs: Mapping[str, str] = field(default_factory=dict)

    def source_of(self, input_id: str) -> str:
        """The device input ``input_id`` is read from (the op's own device by default)."""
        return self.inputs.get(input_id, self.device)


@dataclass(frozen=True)
class Stage:
    """One stage: its operations in execution order and, per device, the tensors kept.

    ``copies`` are the offloading copies at the end of the stage (docs/spec-notes.md,
    "Offloading"): per target device, each tensor copied there and the device it is copied
    from. A copied tensor is kept on its target (it is added to ``keep`` if missing).
    """

    ops: tuple[Operation, ...]
    keep: Mapping[str, frozenset[str]] = field(default_factory=dict)
    copies: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # An empty keep list and a missing one mean the same; equal stages compare equal.
        copies = {device: dict(sources) for device, sources in self.copies.items() if sources}
        keep = {device: frozenset(ids) for device, ids in self.keep.items()}
        for device, sources in copies.items():
            keep[device] = keep.get(device, frozenset()) | frozenset(sources)
        object.__setattr__(self, "keep", {d: ids for d, ids in keep.items() if ids})
        object.__setattr__(self, "copies", copies)

    def kept_on(self, device: str) -> frozenset[str]:
        """Tensors kept resident on ``device`` into the next stage."""
        return self.keep.get(device, frozenset())

    def copied_to(self, device: str) -> Mapping[str, str]:
        """Tensors copied to ``device`` at the end of the stage, with their source device."""
        return self.copies.get(device, {})

    def offload_copies(self) -> list[tuple[str, str, str]]:
        """Every offloading copy as ``(tensor, source, target)``, in no particular order."""
        return [(x, s, d) for d, sources in self.copies.items() for x, s in sources.items()]


@dataclass(frozen=True)
class SolverInfo:
    """How a schedule was found (the ``solver`` block of the schedule file)."""

    method: str
    backend: str = ""
    status: SolveStatus = SolveStatus.OPTIMAL
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    variables: int = 0
    constraints: int = 0


@dataclass(frozen=True)
class Schedule:
    """A complete schedule for a graph under given memory limits (bytes per device name).

    ``memory_limits`` is the file's ``budgets`` field: each device's total memory, fixed memory
    included (``Device.memory_limit``), not the activation budget.
    """

    graph: str
    memory_limits: Mapping[str, int]
    stages: tuple[Stage, ...]
    solver: SolverInfo | None = None

    @cached_property
    def operations(self) -> tuple[tuple[int, Operation], ...]:
        """All operations as ``(stage, operation)`` in execution order (computed once)."""
        return tuple((t, op) for t, stage in enumerate(self.stages) for op in stage.ops)

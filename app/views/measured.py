"""A schedule executed for real (Solve > Execute on PyTorch), as the schedule views draw it.

The executor (:mod:`solver.executors.aten_runtime`) runs the operations one after another in the
schedule's order and times each; copies are timed together (``copy_ms``). So the measured
timeline is the operations laid back to back in that order, each as long as measured, with the
copies' total time said in words rather than placed where no measurement puts them. Peaks are
per schedule device, in bytes, counted like the simulator's activations. No Qt here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from solver.document.graph import Graph
from solver.document.units import format_ms, format_size

__all__ = ["MeasuredRun", "measured_run", "prediction_basis"]


@dataclass(frozen=True)
class MeasuredRun:
    """What one execution measured, for the schedule ``schedule`` (compared by identity)."""

    schedule: object
    devices: tuple[str, ...]
    """The schedule device of each operation, in execution order."""
    starts: np.ndarray
    ends: np.ndarray
    total_ms: float
    copy_ms: float
    predicted_ms: float
    peak_bytes: Mapping[str, int]
    predicted_peak: Mapping[str, int]
    gradients_match: bool

    def spans(self, device: str) -> tuple[np.ndarray, np.ndarray]:
        """Measured ``(starts, ends)`` of ``device``'s operations (ms)."""
        keep = np.array([d == device for d in self.devices], dtype=bool)
        return self.starts[keep], self.ends[keep]

    def summary(self) -> str:
        """One line: measured beside predicted time, the copies, the gradients check."""
        ratio = self.total_ms / self.predicted_ms if self.predicted_ms > 0 else float("nan")
        text = (
            f"measured {format_ms(self.total_ms)} vs predicted {format_ms(self.predicted_ms)} "
            f"({ratio:.2g}\u00d7)"
        )
        if self.copy_ms > 0:
            text += f", copies {format_ms(self.copy_ms)} of it (not placed)"
        return text + ("" if self.gradients_match else ", gradients DIFFER")

    def peak_text(self, device: str) -> str:
        """``measured peak X (predicted Y)`` for ``device``, or ``""`` if not measured there."""
        if device not in self.peak_bytes:
            return ""
        return (
            f"measured peak {format_size(self.peak_bytes[device])} "
            f"(predicted {format_size(self.predicted_peak.get(device, 0))})"
        )


def measured_run(schedule: object, report: Mapping[str, Any]) -> MeasuredRun:
    """A :class:`MeasuredRun` from the executor's report (``main.py execute --json`` and its
    ``op_ms`` rows ``[stage, node, device, ms, recompute]``, in execution order).

    Examples
    --------
    >>> doc = {"measured": {"total_ms": 5.0, "copy_ms": 1.0, "peak_bytes": {"gpu": 10}},
    ...        "predicted": {"total_ms": 2.0, "peak_bytes": {"gpu": 12}},
    ...        "gradients_match": True,
    ...        "op_ms": [[0, "a", "gpu", 1.5, False], [1, "b", "cpu", 2.5, False]]}
    >>> run = measured_run(None, doc)
    >>> run.spans("gpu"), run.spans("cpu")[0].tolist(), run.summary()
    ((array([0.]), array([1.5])), [1.5], 'measured 5 ms vs predicted 2 ms (2.5×), copies 1 ms of it (not placed)')
    """  # noqa: E501
    rows: Sequence[Sequence[Any]] = report.get("op_ms", ())
    durations = np.array([float(row[3]) for row in rows], dtype=float)
    ends = np.cumsum(durations)
    measured, predicted = report["measured"], report["predicted"]
    return MeasuredRun(
        schedule=schedule,
        devices=tuple(str(row[2]) for row in rows),
        starts=ends - durations,
        ends=ends,
        total_ms=float(measured["total_ms"]),
        copy_ms=float(measured.get("copy_ms", 0.0)),
        predicted_ms=float(predicted["total_ms"]),
        peak_bytes=dict(measured["peak_bytes"]),
        predicted_peak=dict(predicted["peak_bytes"]),
        gradients_match=bool(report.get("gradients_match", True)),
    )


def prediction_basis(graph: Graph | None) -> str:
    """What the predicted times model, e.g. ``modelled ryzen-9-7950x (cpu), rtx-3090 (gpu)``:
    the importer's cost model of published hardware, not the machine a step runs on.

    >>> from solver.document.generators import unit_chain
    >>> g = unit_chain(1)
    >>> prediction_basis(g)
    ''
    >>> from dataclasses import replace
    >>> prediction_basis(replace(g, meta={"cost_model": {"gpu": "roofline rtx-3090 (35 TF/s)"}}))
    'the modelled rtx-3090 (gpu), not this machine'
    """
    models = graph.meta.get("cost_model") if graph is not None else None
    if not isinstance(models, Mapping) or not models:
        return ""
    parts = []
    for device, text in models.items():
        words = str(text).split(" (", 1)[0].split()
        hardware = words[-1] if words else str(text)
        parts.append(f"{hardware} ({device})")
    return f"the modelled {', '.join(parts)}, not this machine"

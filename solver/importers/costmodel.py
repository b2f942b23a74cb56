"""Per-operator forward and backward times, behind one interface.

A cost model turns an :class:`~solver.importers.ops.OpGraph` into milliseconds per op and per
direction. Two implementations:

* :class:`RooflineCostModel`: ``max(FLOPs / (peak x eta_c), bytes / (bandwidth x eta_m)) +
  launch`` against a published device spec (:mod:`solver.importers.hardware`). Backward FLOPs
  and bytes are modelled per op kind (:attr:`Op.backward_flops`, :attr:`Op.backward_bytes`),
  not taken as 2x forward: measured ratios range from 0.05 (max-pool) to 10 (linear at batch 1).
* :class:`MeasuredCpuCostModel`: every op run on the local CPU with torch, forward and backward
  timed separately (median of repeats, thread CPU time), see :mod:`solver.importers.profiling`.

The loss gets a time too, under the key :data:`LOSS_KEY`: cross-entropy's forward and the
gradient of the logits, both of which the loss node produces.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from solver.errors import GraphFormatError
from solver.importers.hardware import DeviceSpec, Platform
from solver.importers.ops import Op, OpGraph, TorchSource

__all__ = [
    "LOSS_KEY",
    "OpTime",
    "CostModel",
    "RooflineCostModel",
    "MeasuredCpuCostModel",
    "resolve_cost_models",
]

LOSS_KEY = "loss"
_LOSS_FLOPS_PER_ELEMENT = 8  # softmax (5) + log, pick, subtract for the gradient


@dataclass(frozen=True)
class OpTime:
    """Forward and backward milliseconds of one op on one device."""

    forward_ms: float
    backward_ms: float


@runtime_checkable
class CostModel(Protocol):
    """Anything that times the ops of a network on one device."""

    def describe(self) -> str:
        """One line for the graph's ``meta``: what the numbers are and where they came from."""

    def estimate(self, graph: OpGraph) -> dict[str, OpTime]:
        """Times by op name, plus :data:`LOSS_KEY` for the loss."""


@dataclass(frozen=True)
class RooflineCostModel:
    """Roofline estimate against a device spec.

    Examples
    --------
    >>> from solver.importers.hardware import DEVICES
    >>> from solver.importers.ops import Op
    >>> op = Op("fc", "linear", ("x",), (4096,), (1, 1000), 4, flops=8.192e6, params=4097000)
    >>> t = RooflineCostModel(DEVICES["rtx-3090"]).op_time(op)
    >>> round(t.forward_ms, 4), t.backward_ms > t.forward_ms   # weight-bandwidth bound
    (0.0269, True)
    """

    spec: DeviceSpec

    def describe(self) -> str:
        s = self.spec
        return (
            f"roofline {s.key} ({s.peak_flops / 1e12:g} TFLOP/s x {s.compute_efficiency:g}, "
            f"{s.mem_bandwidth / 1e9:g} GB/s x {s.memory_efficiency:g}, "
            f"{s.launch_ms:g} ms per op)"
        )

    def seconds(self, flops: float, num_bytes: float) -> float:
        """Time of a kernel doing ``flops`` and moving ``num_bytes``: the slower of the two."""
        s = self.spec
        compute = flops / (s.peak_flops * s.compute_efficiency)
        memory = num_bytes / (s.mem_bandwidth * s.memory_efficiency)
        return max(compute, memory)

    def op_time(self, op: Op) -> OpTime:
        """Forward and backward time of one op."""
        launch = self.spec.launch_ms
        return OpTime(
            1000.0 * self.seconds(op.flops, op.bytes_accessed) + launch,
            1000.0 * self.seconds(op.backward_flops, op.backward_bytes) + launch,
        )

    def estimate(self, graph: OpGraph) -> dict[str, OpTime]:
        times = {op.name: self.op_time(op) for op in graph.ops}
        out = graph.output
        numel = math.prod(out.shape)
        loss_ms = 1000.0 * self.seconds(_LOSS_FLOPS_PER_ELEMENT * numel, 3 * out.output_bytes)
        times[LOSS_KEY] = OpTime(loss_ms + self.spec.launch_ms, 0.0)
        return times


@dataclass(frozen=True)
class MeasuredCpuCostModel:
    """Times measured on this machine's CPU with torch (thread CPU time, median of repeats).

    Parameters
    ----------
    warmup, repeats
        Untimed and timed runs per op and direction.
    threads
        torch intra-op threads while measuring; 1 makes thread CPU time equal the op's work,
        which stays reliable on a busy machine (wall clock was 2-5x inflated there).
    on_progress
        Called as ``on_progress(done, total, op_name)`` after each op.
    """

    warmup: int = 1
    repeats: int = 3
    threads: int = 1
    on_progress: Callable[[int, int, str], None] | None = None

    def describe(self) -> str:
        return (
            f"measured on the local CPU with torch ({self.threads} thread, median of "
            f"{self.repeats} after {self.warmup} warm-up, thread CPU time)"
        )

    def estimate(self, graph: OpGraph) -> dict[str, OpTime]:
        if not isinstance(graph.source, TorchSource):
            raise GraphFormatError(
                "measured costs need a torch module to run",
                where=graph.name,
                fix="use the roofline cost model for ONNX files",
            )
        from solver.importers.profiling import profile_ops  # needs torch: import late

        return profile_ops(
            graph,
            warmup=self.warmup,
            repeats=self.repeats,
            threads=self.threads,
            on_progress=self.on_progress,
        )


def resolve_cost_models(
    cost_model: str | CostModel | Mapping[str, CostModel] | None, platform: Platform
) -> dict[str, CostModel]:
    """One cost model per graph device.

    ``"roofline"`` (default) puts every device on its spec's roofline; ``"measured"`` measures
    the ``cpu``-kind devices on this machine and keeps the roofline for the others; a single
    model applies to all devices; a mapping picks per device (roofline for the rest).
    """
    roofline: dict[str, CostModel] = {
        name: RooflineCostModel(spec) for name, spec in platform.devices
    }
    if cost_model is None or cost_model == "roofline":
        return roofline
    if cost_model == "measured":
        measured = MeasuredCpuCostModel()
        return {
            name: measured if spec.kind == "cpu" else roofline[name]
            for name, spec in platform.devices
        }
    if isinstance(cost_model, str):
        raise GraphFormatError(
            f"unknown cost model {cost_model!r}",
            where="cost model",
            fix="use 'roofline' or 'measured'",
        )
    if isinstance(cost_model, Mapping):
        unknown = sorted(set(cost_model) - set(roofline))
        if unknown:
            raise GraphFormatError(
                f"unknown device {unknown[0]!r}",
                where="cost model",
                fix=f"devices are: {', '.join(roofline)}",
            )
        return {**roofline, **cost_model}
    return dict.fromkeys(roofline, cost_model)

"""The driver both torch runtimes share, and the bookkeeping every runtime keeps.

One training step by a schedule is always the same sequence, whatever runs a node (ATen ops of
the joint graph, :mod:`solver.executors.aten_runtime`; torch.fx layers under autograd,
:mod:`solver.executors.fx_runtime`): check that the graph is the import, replay the schedule
strictly (:func:`solver.execution.simulate.check_schedule`), map its devices to torch devices,
refuse what the runtime cannot place, take the reference step (a plain ``loss.backward()`` on
the same model, inputs and seed), walk the schedule (:mod:`solver.execution.schedule_walk`), and
compare the gradients. :func:`execute_step` is that sequence; a runtime supplies a
:class:`StepKind` with its four own parts.

Measured: time per operation and per copy (thread CPU time with one torch thread on the CPU,
wall clock with CUDA synchronisation on a GPU; a copy from or to a GPU on the GPU's clock, see
:func:`solver.executors.gpu_step.copy_timer`), and the peak activation bytes per schedule
device, counted as the distinct storages of what a runtime holds for it (:func:`storage_bytes`);
with CUDA, ``torch.cuda.max_memory_allocated`` beside it. Parameters, buffers and the inputs are
fixed memory, not counted, as in the graph.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.errors import XEngineError
from solver.execution.schedule_walk import StepRow, order_of, walk_schedule
from solver.execution.simulate import Timeline, check_schedule, effective_graph
from solver.executors.gpu_step import copy_timer, full_float32
from solver.importers._deps import require_torch
from solver.importers.aten_capture import loss_of
from solver.importers.profiling import require_memory

__all__ = [
    "ExecutorError",
    "StepKind",
    "StepReport",
    "HeldTensors",
    "clock",
    "compare_gradients",
    "copied",
    "execute_step",
    "geometry",
    "map_devices",
    "one_thread",
    "reference_gradients",
    "run_step",
    "storage_bytes",
    "storage_id",
]


class ExecutorError(XEngineError):
    """The schedule cannot be run on torch (wrong graph, unknown device, no CUDA)."""


@dataclass(frozen=True)
class StepReport:
    """Measured and predicted time and peak memory of one training step run on torch."""

    measured_ms: float
    measured_peak: dict[str, int]
    predicted_ms: float
    predicted_peak: dict[str, int]
    budgets: dict[str, int]
    gradients_match: bool
    max_abs_error: float
    device_map: dict[str, str]
    op_ms: tuple[StepRow, ...] = ()
    copy_ms: float = 0.0
    cuda_peak: dict[str, int] = field(default_factory=dict)
    measured_saved: dict[str, int] = field(default_factory=dict)
    """Per device, the bytes held when the backward starts (empty for a graph without one)."""
    predicted_saved: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_step(
        cls,
        runtime: HeldTensors,
        op_ms: Sequence[StepRow],
        timeline: Timeline,
        graph: Graph,
        compared: tuple[bool, float],
        mapping: Mapping[str, Any],
        cuda_peak: dict[str, int] | None = None,
    ) -> StepReport:
        """The report of a step: the runtime's peaks and copy time, the operations' times, and
        the replay (``timeline`` of ``graph``) it is compared with."""
        return cls(
            measured_ms=sum(row[3] for row in op_ms) + runtime.copy_ms,
            measured_peak=dict(runtime.peak),
            predicted_ms=timeline.total_ms,
            predicted_peak=timeline.peaks,
            budgets={d.name: d.activation_budget for d in graph.devices},
            gradients_match=compared[0],
            max_abs_error=compared[1],
            device_map={k: str(v) for k, v in mapping.items()},
            op_ms=tuple(op_ms),
            copy_ms=runtime.copy_ms,
            cuda_peak=cuda_peak or {},
            measured_saved=dict(runtime.boundary_bytes),
            predicted_saved=dict(timeline.saved_bytes),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of ``main.py execute``."""
        return {
            "measured": {
                "total_ms": round(self.measured_ms, 3),
                "copy_ms": round(self.copy_ms, 3),
                "peak_bytes": dict(self.measured_peak),
                **({"saved_bytes": dict(self.measured_saved)} if self.measured_saved else {}),
                **({"cuda_max_allocated": dict(self.cuda_peak)} if self.cuda_peak else {}),
            },
            "predicted": {
                "total_ms": round(self.predicted_ms, 3),
                "peak_bytes": dict(self.predicted_peak),
                **({"saved_bytes": dict(self.predicted_saved)} if self.predicted_saved else {}),
            },
            "budget_bytes": dict(self.budgets),
            "gradients_match": self.gradients_match,
            "max_abs_gradient_error": self.max_abs_error,
            "device_map": dict(self.device_map),
        }


# ----- the runtime's bookkeeping ---------------------------------------------------------------
class HeldTensors:
    """What every runtime holds per schedule device, by node id, and the byte and time counts.

    ``store[device][node]`` is a dict of named tensors (a node's outputs, and whatever the
    runtime keeps with them); ``copies`` the inputs copied in for the running operation. A
    runtime fills ``fixed`` (storages of parameters, buffers and inputs) and defines
    :meth:`measure` and :meth:`run_group`.
    """

    def __init__(self, torch: Any, mapping: Mapping[str, Any]) -> None:
        self.torch = torch
        self.mapping: dict[str, Any] = dict(mapping)
        self.store: dict[str, dict[str, dict[str, Any]]] = {d: {} for d in self.mapping}
        self.peak: dict[str, int] = dict.fromkeys(self.mapping, 0)
        self.copies: dict[str, Any] = {}
        self.copy_ms = 0.0
        self.fixed: set[int] = set()
        self.freed_after: frozenset[tuple[str, str]] = frozenset()
        self.boundary_bytes: dict[str, int] = {}

    def run_group(self, gid: str, device: str, sources: Mapping[str, str]) -> float:
        """Run node ``gid`` on schedule device ``device``; return its milliseconds."""
        raise NotImplementedError

    def measure(self, device: str) -> None:
        """Raise ``peak[device]`` to the bytes held there now."""
        raise NotImplementedError

    def gradients(self) -> dict[str, Any]:
        """Parameter gradients by parameter name, on the CPU."""
        raise NotImplementedError

    def mark_saved(self) -> None:
        """``boundary_bytes[device]``: the bytes of the distinct storages each device holds
        now, the fixed memory left out (the walk calls it when the backward starts)."""
        self.boundary_bytes = {
            device: self.held_bytes(t for value in held.values() for t in value.values())
            for device, held in self.store.items()
        }

    def release(self, device: str, gid: str) -> None:
        """Free node ``gid``'s tensors on ``device`` (a ``freed`` entry of the timeline)."""
        self.store[device].pop(gid, None)

    def offload(self, gid: str, source: str, target: str) -> None:
        """An offloading copy at the end of a stage: node ``gid``'s tensors from ``source`` to
        ``target``, kept there (docs/spec-notes.md "Offloading")."""
        self.store[target][gid] = self.timed_copy(self.store[source][gid], source, target)
        self.measure(target)

    def timed_copy(self, value: Mapping[str, Any], source: str, target: str) -> dict[str, Any]:
        """:func:`copied` from schedule device ``source`` to ``target``, its time in
        ``copy_ms`` on the clock that sees the copy end."""
        timer = copy_timer(self.mapping[source], self.mapping[target])
        start = clock(self.torch, timer)
        result = copied(value, self.mapping[target])
        self.copy_ms += clock(self.torch, timer) - start
        return result

    def held_bytes(self, tensors: Iterable[Any]) -> int:
        """:func:`storage_bytes` of ``tensors`` without the fixed memory."""
        return storage_bytes(self.torch, tensors, self.fixed)

    def reset_cuda_peaks(self) -> None:
        """Start ``max_memory_allocated`` afresh on every GPU (the reference step came first)."""
        for dev in {str(d): d for d in self.mapping.values() if d.type == "cuda"}.values():
            self.torch.cuda.reset_peak_memory_stats(dev)

    def cuda_peaks(self) -> dict[str, int]:
        """``torch.cuda.max_memory_allocated`` per schedule device mapped to a GPU (fixed
        memory included: the model's copy on that GPU and the inputs)."""
        return {
            name: int(self.torch.cuda.max_memory_allocated(dev))
            for name, dev in self.mapping.items()
            if dev.type == "cuda"
        }

    def close(self) -> None:
        """Drop every tensor now (a step keeps the whole training state)."""
        for held in self.store.values():
            held.clear()
        self.copies = {}


# ----- the driver ------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepKind:
    """What a runtime adds to :func:`execute_step`, in the order the driver asks."""

    check_graph: Callable[[Graph], None]
    """Raise :class:`ExecutorError` unless the graph is the import the runtime runs."""
    check_devices: Callable[[Graph, Schedule, Mapping[str, Any]], None]
    """Refuse, before anything runs, an operation the runtime cannot place (graph, schedule,
    schedule device -> torch device)."""
    build: Callable[[Any, int], tuple[Any, list[Any]]]
    """``(torch, seed)`` -> the model (train mode) and its inputs, drawn after seeding."""
    runtime: Callable[[Any, Mapping[str, Any], Any, Sequence[Any], Graph, Schedule], HeldTensors]
    """``(torch, mapping, model, inputs, graph, schedule)`` -> a fresh runtime for one step
    (``graph``: the effective graph of the schedule)."""


def execute_step(
    kind: StepKind,
    graph: Graph,
    schedule: Schedule,
    device_map: Mapping[str, str] | None = None,
    *,
    seed: int = 0,
) -> StepReport:
    """Run one training step by ``schedule`` and compare it with the simulator and with a plain
    ``loss.backward()``.

    Raises
    ------
    ExecutorError
        If the graph is not the import, or a device cannot be used.
    ScheduleViolation
        If the schedule breaks a rule of the model on ``graph``.
    """
    torch = require_torch("the schedule executor")
    kind.check_graph(graph)
    sized = effective_graph(graph, schedule)
    timeline = check_schedule(sized, schedule)
    mapping = map_devices(torch, [d.name for d in graph.devices], device_map or {})
    kind.check_devices(graph, schedule, mapping)  # before minutes of work, not after
    fixed = max((d.fixed_memory for d in graph.devices), default=0)
    require_memory(fixed + int(sum(graph.output_bytes)), "running the step and its reference")
    model, inputs = kind.build(torch, seed)
    with one_thread(torch, mapping):  # the same kernels as the step: the same rounding
        reference = reference_gradients(torch, model, inputs, seed)
    runtime = kind.runtime(torch, mapping, model, inputs, sized, schedule)
    op_ms = run_step(
        torch, runtime, schedule, timeline, mapping, order_of(sized), seed, sized.boundary
    )
    compared = compare_gradients(torch, runtime.gradients(), reference)
    cuda_peak = runtime.cuda_peaks()
    runtime.close()
    return StepReport.of_step(runtime, op_ms, timeline, sized, compared, mapping, cuda_peak)


def run_step(
    torch: Any,
    runtime: HeldTensors,
    schedule: Schedule,
    timeline: Timeline,
    mapping: Mapping[str, Any],
    order: tuple[Mapping[str, int], Sequence[str]],
    seed: int = 0,
    boundary: int | None = None,
) -> list[StepRow]:
    """The step itself on ``runtime``: every operation in order, releasing where ``timeline``
    frees (``order``: node positions and device names, :func:`order_of`), one torch thread on
    the CPU and no TF32 on a GPU; the random generators seeded as the reference's backward.
    ``boundary``: the graph's boundary stage, where the runtime records ``boundary_bytes``."""
    runtime.reset_cuda_peaks()
    torch.manual_seed(seed + 1)
    with one_thread(torch, mapping), full_float32(torch, mapping):
        return walk_schedule(runtime, schedule, timeline, *order, boundary)


def reference_gradients(torch: Any, model: Any, inputs: Sequence[Any], seed: int) -> dict[str, Any]:
    """Parameter gradients of a plain ``loss.backward()`` on a copy of ``model`` and ``inputs``
    (the step's seed, as the walk seeds it); zeros for a parameter the loss does not reach."""
    model = copy.deepcopy(model)
    torch.manual_seed(seed + 1)
    loss_of(model(*inputs)).backward()
    return {
        name: p.grad if p.grad is not None else torch.zeros_like(p)
        for name, p in model.named_parameters()
    }


def map_devices(torch: Any, devices: list[str], given: Mapping[str, str]) -> dict[str, Any]:
    """Schedule device -> torch device: ``given`` (``--device-map``), else ``cpu`` for a device
    called ``cpu`` and ``cuda:0`` for any other.

    Raises
    ------
    ExecutorError
        For a name that is not a device of the graph, a text that is not a torch device, or a
        GPU that torch does not see (one line, with the fix).
    """
    unknown = sorted(set(given) - set(devices))
    if unknown:
        raise ExecutorError(
            f"--device-map names {unknown[0]!r}, which is not a device of the graph; "
            f"devices are {', '.join(devices)}"
        )
    mapping = {}
    for name in devices:
        text = given.get(name, "cpu" if name == "cpu" else "cuda:0")
        try:
            device = torch.device(text)
        except RuntimeError:
            raise ExecutorError(f"--device-map {name}={text}: not a torch device") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ExecutorError(
                f"device {name!r} maps to {text}, but torch sees no CUDA GPU here; "
                f"map it to the CPU with --device-map {name}=cpu"
            )
        mapping[name] = device
    return mapping


def compare_gradients(
    torch: Any, grads: Mapping[str, Any], reference: Mapping[str, Any]
) -> tuple[bool, float]:
    """allclose per parameter, with the absolute tolerance scaled to the reference's largest
    entry: a model whose gradients are all tiny (a loss of a LayerNorm output, ~1e-8) would
    pass a fixed ``atol=1e-5`` whatever the step computed. Returns (match, max abs error)."""
    error = 0.0
    match = True
    for name, expected in reference.items():
        got = grads[name]
        if not got.numel():
            continue
        error = max(error, float((got - expected).abs().max()))
        scale = float(expected.abs().max())
        atol = 1e-5 * scale if scale > 0 else 1e-12
        match &= bool(torch.allclose(got, expected, rtol=1e-4, atol=atol))
    return match, error


# ----- tensors, bytes and clocks ---------------------------------------------------------------
def storage_id(tensor: Any) -> int:
    """The identity of a tensor's storage, shared by its views: the address of the storage
    object itself (not of its data, which fake tensors do not have)."""
    return int(tensor.untyped_storage()._cdata)


def storage_bytes(torch: Any, tensors: Iterable[Any], fixed: set[int]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (lists and tuples of tensors too;
    views count once), except the ``fixed`` ones."""
    seen: dict[int, int] = {}
    for t in tensors:
        for tensor in t if isinstance(t, list | tuple) else (t,):
            if isinstance(tensor, torch.Tensor):
                key = storage_id(tensor)
                if key not in fixed:
                    seen[key] = tensor.untyped_storage().nbytes()
    return sum(seen.values())


def geometry(tensor: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Shape, strides and offset: with the storage, what makes two views the same tensor."""
    return tuple(tensor.shape), tuple(tensor.stride()), int(tensor.storage_offset())


def copied(value: Mapping[str, Any], device: Any) -> dict[str, Any]:
    """A copy of a node's named tensors on torch device ``device``; entries that are one tensor
    (the gradient an addition hands both its inputs) stay one."""
    done: dict[tuple[int, tuple[Any, ...]], Any] = {}
    result = {}
    for key, tensor in value.items():
        ident = (storage_id(tensor), geometry(tensor))
        if ident not in done:
            done[ident] = tensor.to(device, copy=True)
        result[key] = done[ident]
    return result


def clock(torch: Any, target: Any) -> float:
    """Milliseconds now on torch device ``target``: wall clock after a CUDA synchronisation on
    a GPU, this thread's CPU time on the CPU (one torch thread: the op's whole work)."""
    if target.type == "cuda":
        torch.cuda.synchronize(target)
        return time.perf_counter() * 1000.0
    return time.thread_time_ns() / 1e6


@contextlib.contextmanager
def one_thread(torch: Any, mapping: Mapping[str, Any]) -> Iterator[None]:
    """One torch thread while a CPU device runs, so thread CPU time is an op's whole work."""
    before = torch.get_num_threads()
    if any(d.type == "cpu" for d in mapping.values()):
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)

"""The Python API: what the command line does, from a notebook or a training script.

    import solver
    model = solver.import_model(net, (x,))           # an nn.Module and example inputs
    plan = model.solve(gpu="60%")                    # or "8GiB"; cpu=... too
    print(plan.summary())
    report = plan.execute()                          # one real step, checked
    plan.single_device("gpu").train_step(net, x)     # train with PyTorch's checkpointing

:func:`import_model` captures one training step (``import-torch``), :meth:`ImportedModel.solve`
schedules it (``solve``), :meth:`Plan.execute` runs the step by the schedule on torch and
compares it with the simulator and with ``loss.backward()`` (``execute``), and
:meth:`Plan.export_policy` / :meth:`Plan.train_step` apply a one-device plan with
``torch.utils.checkpoint``'s selective checkpointing (``execute --export-policy``).

A heterogeneous plan (some nodes on the CPU, some on the GPU, tensors moved between them) is
this project's own: PyTorch has no way to train by it, so :meth:`Plan.context_fn` and
:meth:`Plan.train_step` refuse it and :meth:`Plan.single_device` gives the closest plan for one
device (the best schedule that keeps the same budget on that device alone).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.document.units import format_size, parse_size
from solver.errors import XEngineError
from solver.execution.simulate import Timeline
from solver.optimize.bounds import no_remat_peak
from solver.optimize.incumbents import SolveResult

__all__ = ["ImportedModel", "Plan", "import_model"]

MemoryLimit = str | int | float | None
"""A device's memory limit: ``"60%"`` (of the step's activations without rematerialization,
on top of the fixed memory), a size (``"8GiB"``, bytes as an int), or ``None``: unlimited."""


def import_model(
    model: Any,
    example_inputs: Any,
    *,
    level: str = "layer",
    cost: str = "roofline",
    devices: Any = None,
    name: str | None = None,
    dropout_masks: str = "float",
) -> ImportedModel:
    """Capture one training step of ``model`` on inputs like ``example_inputs``.

    Parameters
    ----------
    model
        An ``nn.Module`` (its own weights are used when the step runs), or a callable that
        builds one with no arguments.
    example_inputs
        A tensor, or a tuple of them (one per argument of ``forward``, in order). Only their
        shapes and dtypes matter: integer inputs are token ids, drawn as 0 or 1 when run.
    level, cost, devices, name
        As for ``main.py import-torch``: ``"layer"`` or ``"op"``; ``"roofline"`` or
        ``"measured"``; a :class:`~solver.importers.hardware.Platform` or device names mapped
        to spec keys (default: a desktop CPU and GPU).
    dropout_masks
        ``"float"``: dropout as eager PyTorch runs it (a float mask, 4 bytes per element);
        ``"bool"``: its mask held as a bool tensor (1 byte per element), as PyTorch's
        partitioner saves it; such a plan runs by :meth:`Plan.execute` but exports no
        checkpointing policy (:mod:`solver.importers.aten_masks`).

    Raises
    ------
    XEngineError
        One line, if the step cannot be captured (or the model code fails: what, where, fix).
    """
    from solver.importers.aten import capture_model as capture
    from solver.importers.aten import graph_from_plan
    from solver.importers.aten_groups import plan_groups
    from solver.importers.hardware import Platform, make_platform

    torch = _torch()
    tensors = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    inputs = tuple(_input_spec(torch, t) for t in tensors)
    if isinstance(model, torch.nn.Module):
        instance = model
        factory: Callable[[], Any] = lambda: instance  # noqa: E731 - the user's own weights
        factory.__qualname__ = type(model).__qualname__
        factory.__module__ = type(model).__module__
        label = name or type(model).__name__.lower()
    else:
        factory, label = model, name or getattr(model, "__name__", "model").lower()
    platform = devices if isinstance(devices, Platform) else make_platform(devices)
    plan = plan_groups(capture(factory, inputs, name=label, dropout_masks=dropout_masks), level)
    measured = None
    if cost == "measured":
        from solver.importers.profiling import measure_group_times

        measured = measure_group_times(plan)
    elif cost != "roofline":
        raise XEngineError(f"cost {cost!r}: use 'roofline' or 'measured'")
    return ImportedModel(graph_from_plan(plan, platform, measured), plan)


@dataclass(frozen=True)
class ImportedModel:
    """A captured training step: the graph to schedule, and the capture it came from."""

    graph: Graph
    plan: Any  # solver.importers.aten_groups.GroupPlan (torch-typed, so not named here)

    def solve(
        self,
        gpu: MemoryLimit = "60%",
        cpu: MemoryLimit = None,
        *,
        method: str = "xengine",
        time_limit: float = 60.0,
        offload: bool = False,
        saved: Mapping[str, int | str] | None = None,
    ) -> Plan:
        """The fastest schedule (``method``: ``xengine``, ``greedy``, ``checkmate:gpu``, ...)
        under the memory limits ``gpu`` and ``cpu``: ``"60%"``, ``"8GiB"``, a byte count, or
        ``None`` for unlimited. ``saved`` bounds, per device, the bytes the forward leaves
        resident for the backward (``{"cpu": "2MiB"}``, a size or a byte count): the
        activations saved across the boundary, with or without a peak limit
        (:meth:`~solver.document.graph.Graph.with_saved_limits`).

        Raises
        ------
        XEngineError
            If no schedule fits (one line: what the step needs, what the budget gives).
        """
        from solver.optimize.methods import solve
        from solver.optimize.solve import SolveOptions

        limits = {d: _limit(self.graph, d, b) for d, b in (("gpu", gpu), ("cpu", cpu))}
        graph = self.graph.with_memory_limits({d: v for d, v in limits.items() if v is not None})
        if saved:
            graph = graph.with_saved_limits({d: parse_size(v) for d, v in saved.items()})
        options = SolveOptions(time_limit_s=time_limit, offload=offload)
        result = solve(graph, method, options)
        if not result.ok:
            raise XEngineError(
                f"{self.graph.name}: no schedule ({result.status}): {result.message}"
            )
        return Plan(self, graph, result)


@dataclass(frozen=True)
class Plan:
    """A schedule of an imported step, replayed by the simulator."""

    model: ImportedModel
    graph: Graph
    """The imported graph with the memory limits the plan was solved under."""
    result: SolveResult

    @property
    def schedule(self) -> Schedule:
        assert self.result.schedule is not None
        return self.result.schedule

    @property
    def timeline(self) -> Timeline:
        assert self.result.timeline is not None
        return self.result.timeline

    @property
    def devices(self) -> list[str]:
        """The devices the schedule computes on."""
        return sorted({op.device for _, op in self.schedule.operations})

    def summary(self) -> str:
        """Method, time, recomputations and each device's peak against its budget."""
        t = self.timeline
        lines = [
            f"{self.graph.name}: {self.result.method} ({self.result.status}), "
            f"{t.total_ms:.3f} ms ({t.compute_ms:.3f} compute, {t.transfer_ms:.3f} transfers), "
            f"{t.recomputations} recomputations"
        ]
        for d in self.graph.devices:
            line = (
                f"  {d.name}: peak {format_size(t.peaks.get(d.name, 0))} of "
                f"{format_size(d.activation_budget)} for activations"
            )
            if d.saved_limit is not None:
                held = t.saved_bytes.get(d.name, 0)
                line += (
                    f"; {format_size(held)} saved for the backward, of {format_size(d.saved_limit)}"
                )
            lines.append(line)
        return "\n".join(lines)

    def execute(self, device_map: Mapping[str, str] | None = None, seed: int = 0) -> Any:
        """Run one training step by the schedule on torch (default: both devices on the CPU
        if torch sees no GPU) and compare it; a :class:`~solver.executors.harness.StepReport`."""
        from solver.executors.aten_runtime import execute_schedule

        torch = _torch()
        mapping = dict(device_map or {})
        if not torch.cuda.is_available():
            mapping = {d.name: "cpu" for d in self.graph.devices} | mapping
        return execute_schedule(self.model.plan, self.graph, self.schedule, mapping, seed=seed)

    def single_device(self, device: str = "gpu", *, time_limit: float = 60.0) -> Plan:
        """The closest plan PyTorch can train by: the best schedule on ``device`` alone, with
        its budget and its saved-bytes limit unchanged (Checkmate's model)."""
        limit = self.graph.device(device).saved_limit
        return self.model.solve(
            gpu=self.graph.device("gpu").memory_limit if device == "gpu" else None,
            cpu=self.graph.device("cpu").memory_limit if device == "cpu" else None,
            method=f"checkmate:{device}",
            time_limit=time_limit,
            saved={device: limit} if limit is not None else None,
        )

    def policy_source(self, lean: bool = False) -> str:
        """The selective-checkpointing policy module of a one-device plan (Python source);
        ``lean``: also recompute the FLOP-free ops no backward reads (see
        :func:`solver.executors.sac_policy.policy_source`).

        Raises
        ------
        XEngineError
            For a plan on two devices (PyTorch cannot split a step so): use
            :meth:`single_device`.
        """
        from solver.executors.sac_policy import policy_source

        try:
            return policy_source(self.model.plan, self.graph, self.schedule, lean=lean)
        except XEngineError as exc:
            raise XEngineError(
                f"{exc}; PyTorch has no equivalent of a CPU+GPU split: "
                "plan.single_device('gpu') is the closest plan it can train by"
            ) from None

    def export_policy(self, path: str | Path) -> None:
        """Write :meth:`policy_source` to ``path`` (``from policy import context_fn``)."""
        from solver.document.atomic import atomic_write_text

        atomic_write_text(path, self.policy_source())

    def context_fn(self, lean: bool = False) -> Callable[[], Any]:
        """``checkpoint(model, x, use_reentrant=False, context_fn=plan.context_fn())``."""
        namespace: dict[str, Any] = {}
        source = self.policy_source(lean)
        exec(compile(source, "<xengine policy>", "exec"), namespace)
        return namespace["context_fn"]

    def train_step(
        self, module: Any, *inputs: Any, loss: Callable[[Any], Any] | None = None
    ) -> Any:
        """One training step of ``module`` by this plan: the forward under selective
        checkpointing (recomputing exactly what the schedule recomputes), then the backward;
        the loss (default: the import's ``mean(output ** 2)``). Step the optimizer after."""
        from torch.utils.checkpoint import checkpoint

        from solver.importers.aten_capture import loss_of

        output = checkpoint(module, *inputs, use_reentrant=False, context_fn=self.context_fn())
        value = (loss or loss_of)(output)
        value.backward()
        return value.detach()


def _limit(graph: Graph, device: str, limit: MemoryLimit) -> int | None:
    """A device's memory limit in bytes from a :data:`MemoryLimit` (fixed memory included)."""
    if limit is None:
        return None
    fixed = graph.device(device).fixed_memory
    if isinstance(limit, str) and limit.strip().endswith("%"):
        share = float(limit.strip()[:-1]) / 100
        if not 0 <= share <= 10:
            raise XEngineError(f"{device}={limit!r}: a percentage from 0% to 1000%")
        return fixed + int(share * no_remat_peak(graph))
    return parse_size(limit)


def _input_spec(torch: Any, tensor: Any) -> Any:
    from solver.importers.aten_capture import DTYPES, InputSpec

    if not isinstance(tensor, torch.Tensor):
        raise XEngineError(
            f"example input {tensor!r} is not a tensor; pass a tensor, or a tuple of them"
        )
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        raise XEngineError(f"example input of dtype {dtype} is not supported")
    return InputSpec(tuple(tensor.shape), DTYPES[dtype])


def _torch() -> Any:
    from solver.importers._deps import require_torch

    return require_torch("the Python API")

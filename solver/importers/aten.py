"""Import a PyTorch model as a training graph from its ATen-level joint forward+backward graph.

The forward ops, the backward ops and the tensors each backward op reads all come from
PyTorch's own capture of one training step (:mod:`solver.importers.aten_capture`), grouped into
nodes by :mod:`solver.importers.aten_groups`. FLOPs are ``torch.utils.flop_counter``'s per-op
formulas, bytes come from the captured shapes and dtypes. Costs:

* ``"roofline"`` (default): per ATen op ``max(FLOPs / peak, bytes / bandwidth) + launch`` on
  each device's published spec (:mod:`solver.importers.hardware`), summed per node;
* ``"measured"``: every node's ATen ops run on this machine's CPU with real tensors
  (:func:`solver.importers.profiling.measure_group_times`: thread CPU time, median of repeats)
  for the ``cpu``-kind devices, roofline for the others.

The torch.fx importer (:mod:`solver.importers.torch_fx`) stays as the fallback for models
whose training step cannot be captured.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from solver.document.graph import Edge, Graph, Node, make_graph
from solver.errors import XEngineError
from solver.importers.aten_capture import InputSpec, JointCapture, capture_joint
from solver.importers.aten_groups import (
    GroupPlan,
    is_view,
    op_bytes,
    op_flops,
    plan_groups,
    random_groups,
)
from solver.importers.aten_masks import BOOL_MASKS, bool_masks
from solver.importers.costmodel import RooflineCostModel
from solver.importers.hardware import DeviceSpec, Platform, make_platform
from solver.importers.torch_fx import load_factory, model_label
from solver.importers.user_code import user_code

__all__ = ["COSTS", "capture_model", "import_aten", "graph_from_plan", "structure_hash"]

logger = logging.getLogger(__name__)

COSTS = ("roofline", "measured")
_HEAVY_NAMES = ("mm", "addmm", "bmm", "convolution")


def capture_model(
    spec: str | Callable[[], Any],
    input_shape: tuple[int, ...] | Sequence[InputSpec],
    *,
    name: str | None = None,
    dropout_masks: str = "float",
) -> JointCapture:
    """Capture the training step of the model ``spec`` names (``module:Class`` or a callable)
    on one float input of shape ``input_shape``, or on the inputs it lists (shape and dtype).
    ``dropout_masks="bool"`` rewrites eager dropout's float masks as bool ones
    (:func:`solver.importers.aten_masks.bool_masks`)."""
    if dropout_masks not in ("float", BOOL_MASKS):
        raise XEngineError(f"dropout masks {dropout_masks!r}: use 'float' or 'bool'")
    factory = load_factory(spec) if isinstance(spec, str) else spec
    name = name or getattr(factory, "__name__", "model").lower()
    with user_code(model_label(spec, factory), "capturing its training step"):
        capture = capture_joint(factory, input_shape, name=name)
    source = spec if isinstance(spec, str) else getattr(spec, "__qualname__", repr(spec))
    meta = {"source": source, **capture.meta}
    if dropout_masks == BOOL_MASKS and bool_masks(capture.gm):
        meta["dropout_masks"] = BOOL_MASKS
    return replace(capture, meta=meta)


def import_aten(
    spec: str | Callable[[], Any],
    input_shape: tuple[int, ...] | Sequence[InputSpec],
    *,
    level: str = "layer",
    devices: Platform | Mapping[str, str | DeviceSpec] | None = None,
    cost_model: str = "roofline",
    name: str | None = None,
) -> Graph:
    """Import a model as a training graph through PyTorch's joint graph.

    Parameters
    ----------
    spec
        ``"module:Class"`` (or ``path/to/file.py:Class``), or a callable returning the module;
        it is built with no arguments on the meta device.
    input_shape
        Shape of the float input, batch first; or one :class:`InputSpec` (shape and dtype)
        per input of ``forward``, in order (token ids: ``InputSpec((4, 12), "int64")``).
    level
        ``"layer"`` (ops grouped by module, GEMM-less modules fused into the one before) or
        ``"op"`` (one node per allocating ATen op).
    devices
        A :class:`Platform` or graph device names mapped to spec keys; default desktop
        ``cpu`` (Ryzen 9 7950X) + ``gpu`` (RTX 3090).
    cost_model
        ``"roofline"`` or ``"measured"`` (cpu devices timed on this machine).
    name
        Graph name; defaults to the class name in lower case.

    Raises
    ------
    MissingDependencyError
        Without torch.
    GraphFormatError
        If the spec is unusable or the training step cannot be captured (one line: why, where,
        what to do).
    """
    if cost_model not in COSTS:
        raise ValueError(f"cost model {cost_model!r} is not one of {', '.join(COSTS)}")
    platform = devices if isinstance(devices, Platform) else make_platform(devices)
    capture = capture_model(spec, input_shape, name=name)
    plan = plan_groups(capture, level)
    measured = None
    if cost_model == "measured":
        from solver.importers.profiling import measure_group_times  # runs the model: late

        with user_code(model_label(spec, capture.factory), "measuring its ops on this CPU"):
            measured = measure_group_times(plan)
    return graph_from_plan(plan, platform, measured)


def graph_from_plan(
    plan: GroupPlan, platform: Platform, measured: Mapping[str, float] | None = None
) -> Graph:
    """The training graph of a grouping, with roofline (or measured cpu) costs."""
    capture = plan.capture
    ops = {n.name: n for n in capture.gm.graph.nodes}
    nodes, edges = [], []
    once = random_groups(plan)  # random ops: the checkpoint policy always saves them
    for group in plan.groups:
        cost = {}
        for device, spec in platform.devices:
            if measured is not None and spec.kind == "cpu":
                cost[device] = _round(measured[group.id])
            else:
                cost[device] = _round(_roofline_ms(RooflineCostModel(spec), group, ops))
        extra: dict[str, Any] = {
            "aten": list(group.aten),
            "aten_ops": len(group.ops),
            "kept_bytes": int(group.kept),  # what other nodes read; memory adds the working set
        }
        if group.shape:
            extra["shape"] = list(group.shape)
        if group.module:
            extra["module"] = group.module
        nodes.append(
            Node(
                id=group.id,
                memory=int(group.memory),
                cost=cost,
                kind=group.kind,
                op=_display_op(group),
                of=group.of,
                flops=float(group.flops),
                bytes_accessed=float(group.bytes_accessed),
                extra=extra,
                workspace=int(group.workspace),  # intermediates, in use only while it runs
                recomputable=group.id not in once,
            )
        )
        sources = dict.fromkeys(plan.owner[v] for v in group.reads)
        edges += [Edge(source, group.id) for source in sources if source != group.id]
    params = _param_placeholders(capture)  # once: per placeholder it was quadratic
    fixed = 2 * sum(
        int(n.meta["val"].numel()) * n.meta["val"].dtype.itemsize
        for n in capture.gm.graph.nodes
        if n.op == "placeholder" and n.name in params
    )
    graph = make_graph(
        capture.name, platform.graph_devices(fixed), nodes, edges, platform.graph_links()
    )
    meta = {
        **capture.meta,
        "level": plan.level,
        "parameters": capture.parameters,
        "fixed_memory": "parameters + their gradients on every device",
        "forward_flops": plan.forward_flops,
        "capture_seconds": round(capture.seconds, 3),
        "cost_model": {
            name: ("measured on the local CPU, op by op (thread CPU time)")
            if measured is not None and spec.kind == "cpu"
            else RooflineCostModel(spec).describe()
            for name, spec in platform.devices
        },
        "training": "PyTorch's joint graph: a backward node reads the tensors autograd saves",
    }
    graph = replace(graph, meta=meta)
    return replace(graph, meta={**meta, "structure": structure_hash(graph)})


def structure_hash(graph: Graph) -> str:
    """A fingerprint of node ids, kinds, memory (workspaces where not 0) and edges (not
    costs): the executor checks a schedule's graph against the imported one with it.

    A node without a workspace adds the same tuple as before workspaces existed, so the
    fingerprints of torch.fx imports (which have none) are unchanged."""
    nodes = [
        (n.id, n.kind, n.memory, n.workspace) if n.workspace else (n.id, n.kind, n.memory)
        for n in graph.nodes
    ]
    text = repr(
        (nodes, sorted((graph.nodes[i].id, graph.nodes[k].id) for i, k in graph.edge_pairs))
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _param_placeholders(capture: JointCapture) -> set[str]:
    placeholders = [n.name for n in capture.gm.graph.nodes if n.op == "placeholder"]
    first = len(capture.inputs)
    return set(placeholders[first : first + len(capture.param_names)])


def _roofline_ms(model: RooflineCostModel, group, ops: Mapping[str, Any]) -> float:
    """Sum of per-op rooflines (each kernel pays its launch), in ms."""
    total = 0.0
    for name in group.ops:
        node = ops[name]
        if is_view(node) or str(node.target) == "<built-in function getitem>":
            continue
        total += 1000.0 * model.seconds(op_flops(node), op_bytes(node)) + model.spec.launch_ms
    return total


def _display_op(group) -> str:
    heavy = [a for a in group.aten if a in _HEAVY_NAMES or "attention" in a]
    parts = heavy or list(group.aten[:1])
    label = "+".join(dict.fromkeys(parts)) or "aten"
    return f"{label}_backward" if group.kind == "backward" else label


def _round(ms: float) -> float:
    return float(f"{ms:.6g}")

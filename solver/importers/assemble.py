"""From an operator list and its costs to a training :class:`~solver.document.graph.Graph`.

Both importers end here, so a network gives the same graph whichever way it came in.

* **Layer level** (default) folds normalisation, activation and dropout into their sole
  producer (conv+BN+ReLU is one node, as a Keras layer or Checkmate's graphs). A fused node's
  memory also holds the tensors its folded parts keep for the backward (BN's input, max-pool
  indices), so fusion never hides memory. **Op level** keeps one node per operator.
* The training graph is :func:`solver.document.training.build_training_graph` with autograd's
  rules: the backward of a node reads its forward inputs only when autograd saves
  them, and its own forward output (or the tensors kept alongside) when those are saved; its
  memory is the gradient of its activation inputs (0 for the first convolution).
* Parameters and their gradients are ``fixed_memory`` on every device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from solver.document.graph import Edge, Graph, Node, make_graph
from solver.document.training import build_training_graph
from solver.importers.costmodel import LOSS_KEY, CostModel, OpTime
from solver.importers.hardware import Platform
from solver.importers.ops import FUSABLE, Op, OpGraph

__all__ = ["LEVELS", "fuse_layers", "assemble_graph"]

LEVELS = ("layer", "op")
_TRAINING_NOTE = (
    "one backward node per forward node; a backward reads the forward tensors autograd saves for it"
)


def fuse_layers(graph: OpGraph) -> list[list[Op]]:
    """Group ops into layers: a fusable op joins its producer's group when it is that
    producer's only consumer (otherwise the pre-activation tensor would still be needed).

    Examples
    --------
    >>> from solver.importers.ops import Op
    >>> ops = (Op("conv", "conv", (None,), (12,), (1, 2), 4),
    ...        Op("bn", "batch_norm", ("conv",), (8,), (1, 2), 4),
    ...        Op("relu", "relu", ("bn",), (8,), (1, 2), 4))
    >>> [[op.name for op in g] for g in fuse_layers(OpGraph("n", ops, (1, 3), 0))]
    [['conv', 'bn', 'relu']]
    """
    users = graph.users()
    groups: list[list[Op]] = []
    group_of: dict[str, int] = {}
    for op in graph.ops:
        source = op.inputs[0] if len(op.inputs) == 1 else None
        if op.kind in FUSABLE and source is not None and users[source] == [op.name]:
            group_of[op.name] = group_of[source]
            groups[group_of[source]].append(op)
        else:
            group_of[op.name] = len(groups)
            groups.append([op])
    return groups


def assemble_graph(
    graph: OpGraph,
    platform: Platform,
    cost_models: Mapping[str, CostModel],
    *,
    level: str = "layer",
) -> Graph:
    """Build the training graph of ``graph`` on ``platform`` with one cost model per device.

    Raises
    ------
    ValueError
        If ``level`` is neither ``"layer"`` nor ``"op"``.
    """
    if level not in LEVELS:
        raise ValueError(f"level {level!r} is not one of {', '.join(LEVELS)}")
    times = _estimate(graph, cost_models)
    groups = fuse_layers(graph) if level == "layer" else [[op] for op in graph.ops]
    fixed = 2 * graph.parameters * graph.itemsize
    forward = _forward_graph(graph, groups, times, platform, fixed)
    heads = {group[0].name: group for group in groups}
    out = graph.output
    loss = Node(
        LOSS_KEY,
        out.output_bytes,
        _costs(times, LOSS_KEY, "forward_ms"),
        kind="loss",
        op="cross_entropy",
        extra={"shape": list(out.shape)},
    )
    training = build_training_graph(
        forward,
        saves_input=lambda node: "input" in heads[node.id][0].saves,
        saves_output=lambda node: _keeps_own_tensors(heads[node.id]),
        backward_memory={name: group[0].grad_bytes for name, group in heads.items()},
        backward_cost={
            name: _group_costs(group, times, "backward_ms") for name, group in heads.items()
        },
        loss=loss,
    )
    meta = {
        **graph.meta,
        "level": level,
        "parameters": graph.parameters,
        "fixed_memory": "parameters + their gradients on every device",
        "forward_flops": sum(op.flops for op in graph.ops),
        "cost_model": {name: model.describe() for name, model in cost_models.items()},
        "training": _TRAINING_NOTE,
    }
    return replace(training, name=graph.name, meta=meta)


def _estimate(graph: OpGraph, cost_models: Mapping[str, CostModel]) -> dict[str, dict]:
    cache: dict[int, dict[str, OpTime]] = {}
    result = {}
    for device, model in cost_models.items():
        if id(model) not in cache:
            cache[id(model)] = model.estimate(graph)
        result[device] = cache[id(model)]
    return result


def _forward_graph(
    graph: OpGraph, groups: Sequence[list[Op]], times: Mapping, platform: Platform, fixed: int
) -> Graph:
    group_id = {op.name: group[0].name for group in groups for op in group}
    nodes, edges = [], []
    for group in groups:
        head, last = group[0], group[-1]
        extra: dict[str, object] = {"shape": list(last.shape)}
        if len(group) > 1:
            extra["parts"] = [op.name for op in group]
        nodes.append(
            Node(
                id=head.name,
                memory=_group_memory(group),
                cost=_group_costs(group, times, "forward_ms"),
                op="+".join(op.kind for op in group),
                flops=float(sum(op.flops for op in group)),
                bytes_accessed=float(sum(op.bytes_accessed for op in group)),
                extra=extra,
            )
        )
        edges += [Edge(group_id[s], head.name) for s in dict.fromkeys(head.inputs) if s]
    return make_graph(
        graph.name, platform.graph_devices(fixed), nodes, edges, platform.graph_links()
    )


def _group_memory(group: Sequence[Op]) -> int:
    """Output bytes, plus whatever the folded parts keep for the backward (counted once)."""
    kept: dict[str, int] = {}
    for i, op in enumerate(group):
        if i > 0 and "input" in op.saves:
            kept[group[i - 1].name] = group[i - 1].output_bytes
        if "output" in op.saves and i < len(group) - 1:
            kept[op.name] = op.output_bytes
    return group[-1].output_bytes + sum(op.extra_bytes for op in group) + sum(kept.values())


def _keeps_own_tensors(group: Sequence[Op]) -> bool:
    """Whether the backward reads the node's own forward memory (output or kept internals)."""
    return any(
        "output" in op.saves or op.extra_bytes or (i > 0 and "input" in op.saves)
        for i, op in enumerate(group)
    )


def _group_costs(group: Sequence[Op], times: Mapping, field: str) -> dict[str, float]:
    return {
        device: _round(sum(getattr(per_op[op.name], field) for op in group))
        for device, per_op in times.items()
    }


def _costs(times: Mapping, key: str, field: str) -> dict[str, float]:
    return {device: _round(getattr(per_op[key], field)) for device, per_op in times.items()}


def _round(ms: float) -> float:
    """Six significant digits: keeps files small and diffs of regenerated files readable."""
    return float(f"{ms:.6g}")

"""Building a training graph (forward, loss, backward) from a forward graph (docs/model.md §6).

Backward nodes come in reverse order after the loss, so the node list is already a topological
order (Checkmate's mirror numbering). Which forward tensors each backward node reads is a
per-operator fact: by default the backward of ``c`` reads the inputs of ``c`` (as a convolution
or a linear layer does); importers that know what autograd saves pass their own rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from solver.document.graph import Edge, Graph, Node, make_graph

__all__ = ["build_training_graph", "backward_id", "LOSS_ID"]

LOSS_ID = "loss"


def backward_id(forward_id: str) -> str:
    """The id given to the backward node of ``forward_id``."""
    return f"{forward_id}.grad"


def build_training_graph(
    forward: Graph,
    *,
    saves_input: Callable[[Node], bool] | None = None,
    saves_output: Callable[[Node], bool] | None = None,
    backward_cost_factor: float = 2.0,
    backward_memory: Mapping[str, int] | None = None,
    backward_cost: Mapping[str, Mapping[str, float]] | None = None,
    loss: Node | None = None,
) -> Graph:
    """Return the training graph of a forward graph.

    Parameters
    ----------
    forward
        A DAG of forward operators (any ``kind`` is overwritten with ``forward``).
    saves_input, saves_output
        Whether the backward of a node reads the node's inputs / its own output. Defaults:
        inputs yes, output no (docs/model.md §6; ReLU-like ops read their output).
    backward_cost_factor
        Backward cost = factor x forward cost, for nodes missing from ``backward_cost``.
    backward_memory, backward_cost
        Measured values by forward id, overriding the defaults (memory of the forward node).
    loss
        The loss node; by default it copies the memory and cost of the last forward node.

    Examples
    --------
    >>> from solver.document.graph import Device
    >>> fwd = make_graph("ab", [Device("cpu", memory_limit=100)],
    ...                  [Node("a", 4, {"cpu": 1.0}), Node("b", 4, {"cpu": 1.0})], [Edge("a", "b")])
    >>> train = build_training_graph(fwd)
    >>> [n.id for n in train.nodes]
    ['a', 'b', 'loss', 'b.grad', 'a.grad']
    >>> sorted((train.nodes[i].id, train.nodes[k].id) for i, k in train.edge_pairs)[:3]
    [('a', 'b'), ('a', 'b.grad'), ('b', 'loss')]
    """
    saves_input = saves_input or (lambda node: True)
    saves_output = saves_output or (lambda node: False)
    memory, costs = dict(backward_memory or {}), dict(backward_cost or {})
    sinks = [node for i, node in enumerate(forward.nodes) if not forward.users[i]]
    loss = loss or Node(LOSS_ID, sinks[-1].memory, dict(sinks[-1].cost), kind="loss", op="loss")
    forward_nodes = [replace(node, kind="forward") for node in forward.nodes]
    backward_nodes = [
        _backward_node(n, memory, costs, backward_cost_factor) for n in reversed(forward.nodes)
    ]
    edges = [Edge(e.source, e.target, dict(e.transfer_ms)) for e in forward.edges]
    edges += [Edge(node.id, loss.id) for node in sinks]
    edges += [Edge(loss.id, backward_id(node.id)) for node in sinks]
    for e in forward.edges:
        consumer = forward.node(e.target)
        edges.append(Edge(backward_id(e.target), backward_id(e.source)))
        if saves_input(consumer):
            edges.append(Edge(e.source, backward_id(e.target)))
    for node in forward.nodes:
        if saves_output(node):
            edges.append(Edge(node.id, backward_id(node.id)))
    return make_graph(
        f"{forward.name} (training)",
        forward.devices,
        [*forward_nodes, loss, *backward_nodes],
        edges,
        forward.links,
        {**forward.meta, "training": "built from the forward graph (model.md §6)"},
    )


def _backward_node(node: Node, memory: Mapping, costs: Mapping, factor: float) -> Node:
    cost = costs.get(node.id) or {d: factor * ms for d, ms in node.cost.items()}
    return Node(
        id=backward_id(node.id),
        memory=int(memory.get(node.id, node.memory)),
        cost=dict(cost),
        kind="backward",
        op=f"{node.op}_backward" if node.op else "backward",
        of=node.id,
    )

"""Collapsing a big graph by block: every node of one module prefix drawn as a single box.

Imported networks name their nodes after modules (``layer1_0_conv1``, ``layer1_0_downsample_0``,
``features_10``). A node with three or more name parts belongs to the block of its first two
(``layer1_0``: one bottleneck); shorter names are blocks of their own. Backward nodes form the
block of their forward node's block, marked ``.grad``. The collapsed drawing is a graph of its
own (for the layout only, never solved): one node per block with the largest member's memory,
and an edge wherever a member of one block feeds a member of another. No Qt here.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from solver.document.graph import Edge, Graph, Node, make_graph
from solver.errors import XEngineError

__all__ = ["GROUP_MARK", "block_of", "collapse"]

GROUP_MARK = "\u25b8 "
"""Collapsed boxes are named ``"▸ <block> (<n>)"``; a click expands them."""
_PARTS = re.compile(r"[_.]")


def block_of(graph: Graph, node_id: str) -> str:
    """The block (module prefix) of ``node_id``.

    >>> from solver.document.generators import unit_chain
    >>> g = unit_chain(2)
    >>> block_of(g, "n0"), _prefix("layer1_0_conv1"), _prefix("layer1_0_downsample_0")
    ('n0', 'layer1_0', 'layer1_0')
    """
    node = graph.node(node_id)
    if node.kind == "backward" and node.of in graph.index:
        return _prefix(node.of) + ".grad"
    return _prefix(node_id)


def _prefix(name: str) -> str:
    parts = _PARTS.split(name)
    if len(parts) >= 3:
        return "_".join(parts[:2])
    return name


def collapse(graph: Graph, expanded: Collection[str] = ()) -> tuple[Graph, dict[str, list[str]]]:
    """The block graph of ``graph`` and, per drawn node id, the member node ids.

    Blocks in ``expanded`` and blocks of one node keep their nodes. If contracting would make a
    cycle (blocks that feed each other), the graph is returned unchanged.
    """
    blocks: dict[str, list[str]] = {}
    for node in graph.nodes:
        blocks.setdefault(block_of(graph, node.id), []).append(node.id)
    drawn: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    grouped = {b: f"{GROUP_MARK}{b} ({len(ids)})" for b, ids in blocks.items()}
    grouped = {b: name for b, name in grouped.items() if len(blocks[b]) > 1 and b not in expanded}
    nodes: list[Node] = []
    for block, ids in blocks.items():
        if block not in grouped:
            for node_id in ids:
                drawn[node_id] = node_id
                members[node_id] = [node_id]
                nodes.append(graph.node(node_id))
            continue
        name = grouped[block]
        first = graph.node(ids[0])
        biggest = max(graph.node(i).memory for i in ids)
        forward = block.removesuffix(".grad") if block.endswith(".grad") else None
        of = grouped.get(forward) if forward is not None else None
        if forward is not None and of is None and forward in blocks:
            of = blocks[forward][0]  # the forward block is drawn node by node
        nodes.append(
            Node(name, biggest, dict(first.cost), first.kind, f"{len(ids)} operations", of)
        )
        members[name] = ids
        for node_id in ids:
            drawn[node_id] = name
    edges = {
        (drawn[e.source], drawn[e.target])
        for e in graph.edges
        if drawn[e.source] != drawn[e.target]
    }
    try:
        shown = make_graph(
            graph.name, graph.devices, nodes, [Edge(a, b) for a, b in sorted(edges)], graph.links
        )
    except XEngineError:
        return graph, {n.id: [n.id] for n in graph.nodes}
    return shown, members

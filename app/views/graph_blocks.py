"""Collapsing a big graph by block: every node of one module prefix drawn as a single box.

Imported networks name their nodes after modules (``layer1_0_conv1``, ``layer1_0_downsample_0``,
``features_10``). A node with three or more name parts belongs to the block of its first two
(``layer1_0``: one bottleneck); shorter names are blocks of their own. Backward nodes form the
block of their forward node's block, marked ``.grad``. The collapsed drawing is a graph of its
own (for the layout only, never solved): one node per block with the largest member's memory,
and an edge wherever a member of one block feeds a member of another. No Qt here.

``coarse`` blocks go one level up, to the first name part (``layer1``: a whole stage of
ResNet-50), for networks whose blocks alone are still too many to read at Fit. Expanding a
coarse block shows its blocks; expanding one of those shows its nodes.
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


def block_of(
    graph: Graph, node_id: str, expanded: Collection[str] = (), coarse: bool = False
) -> str:
    """The block (module prefix) of ``node_id``: the coarsest level not in ``expanded``.

    >>> from solver.document.generators import unit_chain
    >>> g = unit_chain(2)
    >>> block_of(g, "n0"), _levels("layer1_0_conv1"), _levels("layer1_0_downsample_0")
    ('n0', ['layer1', 'layer1_0'], ['layer1', 'layer1_0'])
    """
    node = graph.node(node_id)
    name, suffix = node_id, ""
    if node.kind == "backward" and node.of in graph.index:
        name, suffix = node.of, ".grad"
    levels = _coarse_levels(graph, name) if coarse else _levels(name)[-1:]
    for level in levels:
        if level + suffix not in expanded:
            return level + suffix
    return levels[-1] + suffix


def _coarse_levels(graph: Graph, name: str) -> list[str]:
    """The levels for a coarse collapse. A forward node outside any block (ResNet's
    ``add_3``, the residual sum after a bottleneck) joins the stage of an input that is in
    one: drawn on its own between two boxes of its stage, it would make the stage feed itself
    (a cycle). Only direct inputs count, so the head (``avgpool``, ``fc``, the loss) stays."""
    levels = _levels(name)
    k = graph.index[name]
    if len(levels) > 1 or graph.nodes[k].kind != "forward":
        return levels
    for j in graph.inputs[k]:
        found = _levels(graph.nodes[j].id)
        if len(found) > 1:
            return [found[0], name]
    return levels


def _levels(name: str) -> list[str]:
    """A name's block prefixes, coarsest first: its first part, then its first two parts."""
    parts = _PARTS.split(name)
    if len(parts) >= 3:
        return [parts[0], "_".join(parts[:2])]
    return [name]


def collapse(
    graph: Graph, expanded: Collection[str] = (), coarse: bool = False
) -> tuple[Graph, dict[str, list[str]]]:
    """The block graph of ``graph`` and, per drawn node id, the member node ids.

    Blocks in ``expanded`` and blocks of one node keep their nodes. If contracting would make a
    cycle (blocks that feed each other), the graph is returned unchanged.
    """
    blocks: dict[str, list[str]] = {}
    for node in graph.nodes:
        blocks.setdefault(block_of(graph, node.id, expanded, coarse), []).append(node.id)
    drawn: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    grouped = {b: f"{GROUP_MARK}{b} ({len(ids)})" for b, ids in blocks.items()}
    grouped = {b: name for b, name in grouped.items() if len(blocks[b]) > 1 and b not in expanded}
    if not grouped:  # no block to contract (names without module prefixes): nothing to rebuild
        return graph, {n.id: [n.id] for n in graph.nodes}
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

"""Folding a big graph by module path: every node of a collapsed module drawn as one box.

An op-level import names each node's module (``Node.extra["module"]``: ``layer3.1.conv1``,
from the ATen importer), so the graph is a tree of modules as in Netron or TensorBoard:
``layer3`` holds ``layer3.1``, which holds ``layer3.1.conv1``, which holds its operations.
Graphs without module names (layer-level imports, hand-made graphs) take the module from the
node id: a name of three or more parts (``layer1_0_conv1``) lies in its first part and its
first two (``layer1`` > ``layer1_0``). A backward node lies in its forward node's modules,
marked ``.grad``, so a module and its gradient expand together.

:func:`fold` draws every module not in ``expanded`` as one box: a graph of its own (for the
layout only, never solved) with an edge wherever a member of one box feeds a member of
another. Expanding a module replaces its box by its children, in place; the rest keeps its
boxes. :func:`initial_expansion` opens a big graph at the deepest level that still fits
:data:`TARGET_BOXES` boxes. No Qt here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

import networkx as nx

from solver.document.graph import Edge, Graph, Node, make_graph
from solver.errors import XEngineError

__all__ = ["GROUP_MARK", "Folded", "Hierarchy", "fold", "hierarchy", "initial_expansion"]

GROUP_MARK = "\u25b8 "
"""Collapsed boxes are named ``"▸ <module> (<n>)"``; a click expands them."""
TARGET_BOXES = 60
"""A big graph opens with at most this many boxes (a dock's width reads about that many)."""
GRAD = ".grad"
_PARTS = re.compile(r"[_.]")


@dataclass(frozen=True)
class Hierarchy:
    """Each node's modules, coarsest first (a backward node: its forward node's), and
    whether it is a backward node drawn in its modules' ``.grad`` boxes."""

    paths: dict[str, tuple[str, ...]]
    backward: frozenset[str]
    sizes: dict[str, int]
    """Nodes in each module (forward and backward together)."""

    def box_of(self, node_id: str, expanded: Collection[str]) -> str:
        """The box ``node_id`` is drawn in: its coarsest module not in ``expanded`` that
        holds more than one node (``.grad`` for a backward node), else the node itself."""
        for module in self.paths.get(node_id, ()):
            if module not in expanded and self.sizes[module] > 1:
                return module + GRAD if node_id in self.backward else module
        return node_id


@dataclass(frozen=True)
class Folded:
    """A folded graph: what to lay out, and what each drawn box stands for."""

    graph: Graph
    members: dict[str, list[str]]
    """Drawn id -> the source graph's node ids in it (itself alone for a plain node)."""
    module: dict[str, str]
    """Drawn id of a box -> its module (``layer3.1``, ``layer3.1.grad``)."""
    expanded: frozenset[str]
    """The modules drawn open: those asked for, and any opened to keep the drawing acyclic."""


def hierarchy(graph: Graph) -> Hierarchy:
    """The module tree of ``graph`` (see module docstring).

    >>> from solver.document.generators import unit_chain
    >>> h = hierarchy(unit_chain(1))
    >>> h.paths["n0"], _id_modules("layer1_0_conv1"), _id_modules("features_10")
    ((), ('layer1', 'layer1_0'), ())
    """
    own: dict[str, tuple[str, ...]] = {}
    for node in graph.nodes:
        if node.kind != "backward":
            own[node.id] = _modules(graph, node)
    paths: dict[str, tuple[str, ...]] = {}
    backward = set()
    for node in graph.nodes:
        if node.kind == "backward" and node.of in graph.index:
            paths[node.id] = own.get(node.of, ())
            backward.add(node.id)
        else:
            paths[node.id] = own.get(node.id, _modules(graph, node))
    sizes = Counter(module for path in paths.values() for module in path)
    return Hierarchy(paths, frozenset(backward), dict(sizes))


def _modules(graph: Graph, node: Node) -> tuple[str, ...]:
    """A forward node's modules, coarsest first, without the node itself."""
    module = node.extra.get("module") if node.extra else None
    if isinstance(module, str) and module:
        parts = module.split(".")
        prefixes = tuple(".".join(parts[: k + 1]) for k in range(len(parts)))
        return prefixes[:-1] if prefixes[-1] == node.id else prefixes
    found = _id_modules(node.id)
    if found or node.kind != "forward":
        return found
    # a forward node outside any block (ResNet's add_3, the residual sum after a bottleneck)
    # joins the block of its latest input that is in one: drawn between two boxes, it would
    # make a block feed itself through it (a cycle). Only direct inputs count, so the head
    # (avgpool, fc, the loss) stays apart.
    for j in sorted(graph.inputs[graph.index[node.id]], reverse=True):
        near = _id_modules(graph.nodes[j].id)
        if near:
            return near
    return ()


def _id_modules(name: str) -> tuple[str, ...]:
    """The modules a name of three or more parts lies in: its first part, its first two."""
    parts = _PARTS.split(name)
    if len(parts) >= 3:
        return (parts[0], "_".join(parts[:2]))
    return ()


def initial_expansion(graph: Graph, h: Hierarchy, target: int = TARGET_BOXES) -> set[str]:
    """The modules to open so that the drawing shows the deepest level with at most
    ``target`` boxes. Level by level, as a reader unfolds a network: every box of a level
    is opened while the count stays within ``target``; at the level where that no longer
    holds, the biggest boxes are opened one by one while it does."""
    children = _children(h)
    expanded: set[str] = set()
    visible = {h.box_of(node, expanded) for node in h.paths}
    while True:
        closed = sorted(
            {box.removesuffix(GRAD) for box in visible if box not in graph.index},
            key=lambda m: (-h.sizes[m], m),
        )
        if not closed:
            return expanded
        grown = set(visible)
        for module in closed:
            grown = (grown - {module, module + GRAD}) | children[module]
        if len(grown) <= target:
            expanded.update(closed)
            visible = grown
            continue
        for module in closed:  # this level does not fit whole: its biggest boxes first
            trial = (visible - {module, module + GRAD}) | children[module]
            if len(trial) <= target:
                expanded.add(module)
                visible = trial
        return expanded


def _children(h: Hierarchy) -> dict[str, set[str]]:
    """Per module, the boxes its members are drawn in once it is open (and its parents)."""
    children: dict[str, set[str]] = {m: set() for m in h.sizes}
    for node, path in h.paths.items():
        grad = node in h.backward
        big = [m for m in path if h.sizes[m] > 1]
        for k, module in enumerate(big):
            if k + 1 < len(big):
                kid = big[k + 1] + (GRAD if grad else "")
            else:
                kid = node
            children[module].add(kid)
    return children


def fold(graph: Graph, expanded: Collection[str] = (), h: Hierarchy | None = None) -> Folded:
    """``graph`` with every module not in ``expanded`` drawn as one box (module docstring).

    Boxes that would feed each other (a cycle, which no layering can draw) are opened until
    none do; a graph without modules comes back as it is.
    """
    h = h or hierarchy(graph)
    opened = set(expanded)
    if not h.sizes:  # no modules: nothing to fold
        return Folded(graph, {n.id: [n.id] for n in graph.nodes}, {}, frozenset())
    for _ in range(len(h.sizes) + 1):
        drawn = {node.id: h.box_of(node.id, opened) for node in graph.nodes}
        edges = {(drawn[e.source], drawn[e.target]) for e in graph.edges}
        edges = {(a, b) for a, b in edges if a != b}
        cycle = _a_cycle(edges)
        if cycle is None:
            return _folded(graph, h, drawn, edges, frozenset(opened))
        boxes = [box for box in cycle if box not in graph.index]
        if not boxes:
            break
        opened.add(max(boxes, key=lambda b: h.sizes[b.removesuffix(GRAD)]).removesuffix(GRAD))
    plain = {n.id: [n.id] for n in graph.nodes}
    return Folded(graph, plain, {}, frozenset(h.sizes))


def _a_cycle(edges: set[tuple[str, str]]) -> list[str] | None:
    dag = nx.DiGraph(edges)
    if nx.is_directed_acyclic_graph(dag):  # a topological sort: fast, unlike find_cycle
        return None
    return [a for a, _ in nx.find_cycle(dag)]


def _folded(
    graph: Graph,
    h: Hierarchy,
    drawn: dict[str, str],
    edges: set[tuple[str, str]],
    opened: frozenset[str],
) -> Folded:
    members: dict[str, list[str]] = {}
    for node in graph.nodes:
        members.setdefault(drawn[node.id], []).append(node.id)
    if all(len(ids) == 1 and box == ids[0] for box, ids in members.items()):
        return Folded(graph, members, {}, opened)
    names = {box: _box_name(box, ids) for box, ids in members.items() if box not in graph.index}
    nodes: list[Node] = []
    for box, ids in members.items():
        if box not in names:
            nodes.append(graph.node(box))
            continue
        nodes.append(_box_node(graph, box, ids, names))
    renamed = [Edge(names.get(a, a), names.get(b, b)) for a, b in sorted(edges)]
    try:
        shown = make_graph(graph.name, graph.devices, nodes, renamed, graph.links)
    except XEngineError:  # e.g. a box no device can run: draw the graph as it is
        return Folded(graph, {n.id: [n.id] for n in graph.nodes}, {}, frozenset(h.sizes))
    return Folded(
        shown,
        {names.get(box, box): ids for box, ids in members.items()},
        {names[box]: box for box in names},
        opened,
    )


def _box_name(module: str, ids: list[str]) -> str:
    return f"{GROUP_MARK}{module} ({len(ids)})"


def _box_node(graph: Graph, box: str, ids: list[str], names: dict[str, str]) -> Node:
    """One node standing for a box: the biggest member's size (the box's height), the
    first member's kind and costs (every device that runs it), and what it holds."""
    nodes = [graph.node(i) for i in ids]
    first = nodes[0]
    of = None
    if box.endswith(GRAD):
        forward = box.removesuffix(GRAD)
        of = names.get(forward)
        if of is None:  # the forward module is drawn open, or is one node
            fwd = graph.node(first.of) if first.of in graph.index else None
            of = fwd.id if fwd is not None else None
    total = sum(n.memory for n in nodes)
    flops = sum(n.flops or 0.0 for n in nodes)
    cost = {
        d.name: sum(n.cost.get(d.name, 0.0) for n in nodes)
        for d in graph.devices
        if all(d.name in n.cost for n in nodes)
    } or dict(first.cost)
    extra = {"module": box, "members": len(ids), "total_bytes": total}
    return Node(
        names[box], max(n.memory for n in nodes), cost, first.kind, f"{len(ids)} ops", of,
        flops or None, None, extra,
    )  # fmt: skip

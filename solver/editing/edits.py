"""Pure graph edits: each takes a frozen :class:`~solver.document.graph.Graph` and returns a
new, valid one.

The editor's undo commands (``app/commands.py``) compute their target graph with these functions
*before* they are pushed, so an invalid edit (a cycle, a node no device can run) raises
:class:`~solver.errors.GraphFormatError` with the core's message and never reaches the undo
stack. Every result goes through :func:`~solver.document.graph.make_graph`, which re-sorts the nodes
into schedule order and re-checks every rule of the graph format (docs/model.md section 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from solver.document.graph import Device, Edge, Graph, Link, Node, make_graph
from solver.errors import GraphFormatError

__all__ = [
    "DEFAULT_BANDWIDTH",
    "DEFAULT_LATENCY_MS",
    "rebuild",
    "next_node_id",
    "add_node",
    "remove_items",
    "rename_node",
    "set_graph_name",
    "add_edge",
    "set_node_fields",
    "set_edge_transfer",
    "empty_graph",
    "example_graph",
]


DEFAULT_BANDWIDTH = 12e9
"""Bytes per second of a new device's links (PCIe 3 x16, as in the bundled examples)."""
DEFAULT_LATENCY_MS = 0.01
"""Latency (ms) of a new device's links."""


def rebuild(
    graph: Graph,
    *,
    devices: Iterable[Device] | None = None,
    nodes: Iterable[Node] | None = None,
    edges: Iterable[Edge] | None = None,
    links: Iterable[Link] | None = None,
) -> Graph:
    """Build a graph from ``graph`` with some parts replaced, re-sorting and re-validating.

    Parameters
    ----------
    graph
        The graph to start from; its name and ``meta`` are kept.
    devices, nodes, edges, links
        Replacements for the graph's parts; ``None`` keeps the part as it is.

    Returns
    -------
    Graph
        A new graph in schedule order.

    Raises
    ------
    GraphFormatError
        If the parts break a rule of the graph format (the message names the place).

    Examples
    --------
    >>> graph = empty_graph("demo")
    >>> [d.name for d in rebuild(graph, devices=graph.devices[:1], links=()).devices]
    ['cpu']
    """
    return make_graph(
        graph.name,
        graph.devices if devices is None else devices,
        graph.nodes if nodes is None else nodes,
        graph.edges if edges is None else edges,
        graph.links if links is None else links,
        graph.meta,
    )


def empty_graph(name: str = "untitled") -> Graph:
    """A CPU and a GPU joined by default links, and no nodes: the start of a hand-drawn graph.

    Parameters
    ----------
    name
        The graph's name.

    Returns
    -------
    Graph
        A 16 GiB CPU and a 1 GiB GPU, linked both ways at :data:`DEFAULT_BANDWIDTH`.

    Examples
    --------
    >>> graph = empty_graph()
    >>> graph.name, [d.name for d in graph.devices], graph.n, len(graph.links)
    ('untitled', ['cpu', 'gpu'], 0, 2)
    """
    devices = (Device("cpu", "cpu", 16 * 1024**3), Device("gpu", "gpu", 1024**3))
    links = (
        Link("cpu", "gpu", DEFAULT_BANDWIDTH, DEFAULT_LATENCY_MS),
        Link("gpu", "cpu", DEFAULT_BANDWIDTH, DEFAULT_LATENCY_MS),
    )
    return make_graph(name, devices, (), (), links)


def next_node_id(graph: Graph, prefix: str = "n") -> str:
    """The first free id ``prefix1``, ``prefix2``, ... in ``graph``.

    Parameters
    ----------
    graph
        The graph whose ids are taken.
    prefix
        The start of the id.

    Returns
    -------
    str
        An id no node of ``graph`` has.

    Examples
    --------
    >>> graph = add_node(empty_graph(), Node("n1", 1, {"cpu": 1.0}))
    >>> next_node_id(graph), next_node_id(graph, "conv")
    ('n2', 'conv1')
    """
    i = 1
    while f"{prefix}{i}" in graph.index:
        i += 1
    return f"{prefix}{i}"


def add_node(graph: Graph, node: Node) -> Graph:
    """Append ``node``; it has no edges yet.

    Parameters
    ----------
    graph
        The graph to add to.
    node
        The new node.

    Returns
    -------
    Graph
        The graph with ``node`` last.

    Raises
    ------
    GraphFormatError
        If the id is taken or empty, or the node is otherwise invalid.

    Examples
    --------
    >>> [n.id for n in add_node(empty_graph(), Node("a", 1, {"cpu": 1.0})).nodes]
    ['a']
    """
    return rebuild(graph, nodes=[*graph.nodes, node])


def remove_items(
    graph: Graph, node_ids: Iterable[str] = (), edges: Iterable[tuple[str, str]] = ()
) -> Graph:
    """Remove nodes (with their edges) and single edges.

    Parameters
    ----------
    graph
        The graph to remove from.
    node_ids
        Nodes to remove, with every edge that touches them.
    edges
        ``(source, target)`` pairs of edges to remove; unknown pairs are ignored.

    Returns
    -------
    Graph
        The graph without those nodes and edges.

    Raises
    ------
    GraphFormatError
        If a node id is unknown.

    Examples
    --------
    >>> graph = example_graph()
    >>> [n.id for n in remove_items(graph, ["a"]).nodes]
    ['b']
    >>> remove_items(graph, (), [("a", "b")]).edges
    ()
    """
    gone = set(node_ids)
    cut = set(edges)
    unknown = sorted(gone - set(graph.index))
    if unknown:
        raise GraphFormatError(f"unknown node {unknown[0]!r}", where="delete")
    nodes = [n for n in graph.nodes if n.id not in gone]
    kept = [
        e
        for e in graph.edges
        if e.source not in gone and e.target not in gone and (e.source, e.target) not in cut
    ]
    return rebuild(graph, nodes=nodes, edges=kept)


def rename_node(graph: Graph, old: str, new: str) -> Graph:
    """Give node ``old`` the id ``new`` everywhere: its edges (so the inputs of its users) and
    the ``of`` of the backward nodes that point at it. The node order is kept.

    Parameters
    ----------
    graph
        The graph to edit.
    old
        The node's current id.
    new
        Its new id; the same id returns ``graph``.

    Returns
    -------
    Graph
        The graph with the node renamed, in the same order.

    Raises
    ------
    GraphFormatError
        If ``old`` is unknown, or ``new`` is empty or already another node's id.

    Examples
    --------
    >>> graph = rename_node(example_graph(), "a", "conv1")
    >>> [n.id for n in graph.nodes], [(e.source, e.target) for e in graph.edges]
    (['conv1', 'b'], [('conv1', 'b')])
    >>> rename_node(graph, "conv1", "b")
    Traceback (most recent call last):
    ...
    solver.errors.GraphFormatError: node 'conv1': id 'b' is already taken; node ids must be unique
    """
    if new == old:
        return graph
    if old not in graph.index:
        raise GraphFormatError(f"unknown node {old!r}", where="rename")
    if not new.strip():
        raise GraphFormatError("empty node id", where=f"node '{old}'", fix="give the node an id")
    if new in graph.index:
        raise GraphFormatError(
            f"id {new!r} is already taken", where=f"node '{old}'", fix="node ids must be unique"
        )

    def swap(node_id: str) -> str:
        return new if node_id == old else node_id

    nodes = [
        replace(n, id=swap(n.id), of=None if n.of is None else swap(n.of)) for n in graph.nodes
    ]
    edges = [replace(e, source=swap(e.source), target=swap(e.target)) for e in graph.edges]
    return rebuild(graph, nodes=nodes, edges=edges)


def set_graph_name(graph: Graph, name: str) -> Graph:
    """Rename the graph itself.

    Parameters
    ----------
    graph
        The graph to rename.
    name
        The new name; the same name returns ``graph``.

    Returns
    -------
    Graph
        The same devices, nodes, edges, links and ``meta`` under the new name.

    Raises
    ------
    GraphFormatError
        If ``name`` is empty.

    Examples
    --------
    >>> set_graph_name(empty_graph(), "resnet").name
    'resnet'
    """
    if name == graph.name:
        return graph
    if not name.strip():
        raise GraphFormatError("empty graph name", where="graph", fix="give the graph a name")
    return make_graph(name, graph.devices, graph.nodes, graph.edges, graph.links, graph.meta)


def add_edge(graph: Graph, source: str, target: str) -> Graph:
    """Add ``source -> target``; a cycle raises the core's error naming it.

    Parameters
    ----------
    graph
        The graph to add to.
    source, target
        Node ids: ``target`` will consume the output of ``source``.

    Returns
    -------
    Graph
        The graph with the edge, nodes re-sorted if needed.

    Raises
    ------
    GraphFormatError
        If the edge exists, an id is unknown, or the edge would close a cycle.

    Examples
    --------
    >>> add_edge(example_graph(), "b", "a")
    Traceback (most recent call last):
    ...
    solver.errors.GraphFormatError: edges: the edges form a cycle: a -> b -> a; a schedule needs a DAG; remove one edge of the cycle
    """  # noqa: E501
    if any(e.source == source and e.target == target for e in graph.edges):
        raise GraphFormatError(
            "the nodes are already connected", where=f"edge {source} -> {target}"
        )
    return rebuild(graph, edges=[*graph.edges, Edge(source, target)])


def set_node_fields(graph: Graph, node_id: str, **fields: object) -> Graph:
    """Replace fields of one node (``memory``, ``cost``, ``kind``, ``op``).

    Parameters
    ----------
    graph
        The graph to edit.
    node_id
        The node to change.
    **fields
        New values by :class:`~solver.document.graph.Node` field name.

    Returns
    -------
    Graph
        The graph with the node changed.

    Raises
    ------
    GraphFormatError
        If a new value is invalid (a negative memory, a cost for no device, ...).

    Examples
    --------
    >>> set_node_fields(example_graph(), "a", memory=5).node("a").memory
    5
    """
    node = graph.node(node_id)
    changed = replace(node, **fields)  # type: ignore[arg-type]  # Graph() checks each value
    return rebuild(graph, nodes=[changed if n.id == node_id else n for n in graph.nodes])


def set_edge_transfer(
    graph: Graph, source: str, target: str, transfer_ms: Mapping[str, float]
) -> Graph:
    """Set an edge's transfer-time overrides (``{"cpu->gpu": ms}``); empty means the link model.

    Parameters
    ----------
    graph
        The graph to edit.
    source, target
        The edge.
    transfer_ms
        Milliseconds by ``"src->dst"`` device pair; replaces the edge's overrides.

    Returns
    -------
    Graph
        The graph with the edge's overrides replaced.

    Raises
    ------
    GraphFormatError
        If a key names an unknown device pair or a time is negative.

    Examples
    --------
    >>> graph = set_edge_transfer(example_graph(), "a", "b", {"cpu->gpu": 2.0})
    >>> graph.transfer_ms("a", "b", "cpu", "gpu")
    2.0
    """
    edges = [
        replace(e, transfer_ms=dict(transfer_ms)) if (e.source, e.target) == (source, target) else e
        for e in graph.edges
    ]
    return rebuild(graph, edges=edges)


def example_graph() -> Graph:
    """``a -> b`` on the one CPU of :func:`empty_graph`: a start for doctests and tests."""
    nodes = [Node("a", 1, {"cpu": 1.0}), Node("b", 1, {"cpu": 1.0})]
    return rebuild(empty_graph("ab"), nodes=nodes, edges=[Edge("a", "b")])

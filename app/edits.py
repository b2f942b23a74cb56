"""Pure graph edits for the editor: each takes a frozen Graph and returns a new, validated one.

The undo commands compute their target graph with these functions *before* they are pushed, so
an invalid edit (a cycle, a node no device can run) raises :class:`GraphFormatError` with the
core's message and never reaches the undo stack. No Qt here: these could move to ``solver/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from solver.errors import GraphFormatError
from solver.graph import Device, Edge, Graph, Link, Node, make_graph

__all__ = [
    "DEFAULT_BANDWIDTH",
    "DEFAULT_LATENCY_MS",
    "rebuild",
    "next_node_id",
    "add_node",
    "remove_items",
    "add_edge",
    "set_node_fields",
    "set_edge_transfer",
    "add_device",
    "remove_device",
    "rename_device",
    "set_link",
    "empty_graph",
]

DEFAULT_BANDWIDTH = 12e9
"""Bytes per second of a new device's links (PCIe 3 x16, as in the bundled examples)."""
DEFAULT_LATENCY_MS = 0.01


def rebuild(
    graph: Graph,
    *,
    devices: Iterable[Device] | None = None,
    nodes: Iterable[Node] | None = None,
    edges: Iterable[Edge] | None = None,
    links: Iterable[Link] | None = None,
) -> Graph:
    """Build a graph from ``graph`` with some parts replaced, re-sorting and re-validating."""
    return make_graph(
        graph.name,
        graph.devices if devices is None else devices,
        graph.nodes if nodes is None else nodes,
        graph.edges if edges is None else edges,
        graph.links if links is None else links,
        graph.meta,
    )


def empty_graph(name: str = "untitled") -> Graph:
    """A CPU and a GPU joined by default links, and no nodes: the start of a hand-drawn graph."""
    devices = (Device("cpu", "cpu", 16 * 1024**3), Device("gpu", "gpu", 1024**3))
    links = (
        Link("cpu", "gpu", DEFAULT_BANDWIDTH, DEFAULT_LATENCY_MS),
        Link("gpu", "cpu", DEFAULT_BANDWIDTH, DEFAULT_LATENCY_MS),
    )
    return make_graph(name, devices, (), (), links)


def next_node_id(graph: Graph, prefix: str = "n") -> str:
    """The first free id ``prefix1``, ``prefix2``, ... in ``graph``."""
    i = 1
    while f"{prefix}{i}" in graph.index:
        i += 1
    return f"{prefix}{i}"


def add_node(graph: Graph, node: Node) -> Graph:
    """Append ``node``; it has no edges yet."""
    return rebuild(graph, nodes=[*graph.nodes, node])


def remove_items(
    graph: Graph, node_ids: Iterable[str] = (), edges: Iterable[tuple[str, str]] = ()
) -> Graph:
    """Remove nodes (with their edges) and single edges."""
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


def add_edge(graph: Graph, source: str, target: str) -> Graph:
    """Add ``source -> target``; a cycle raises the core's error naming it."""
    if any(e.source == source and e.target == target for e in graph.edges):
        raise GraphFormatError(
            "the nodes are already connected", where=f"edge {source} -> {target}"
        )
    return rebuild(graph, edges=[*graph.edges, Edge(source, target)])


def set_node_fields(graph: Graph, node_id: str, **fields: object) -> Graph:
    """Replace fields of one node (``memory``, ``cost``, ``kind``, ``op``)."""
    node = graph.node(node_id)
    changed = replace(node, **fields)
    return rebuild(graph, nodes=[changed if n.id == node_id else n for n in graph.nodes])


def set_edge_transfer(
    graph: Graph, source: str, target: str, transfer_ms: Mapping[str, float]
) -> Graph:
    """Set an edge's transfer-time overrides (``{"cpu->gpu": ms}``); empty means the link model."""
    edges = [
        replace(e, transfer_ms=dict(transfer_ms)) if (e.source, e.target) == (source, target) else e
        for e in graph.edges
    ]
    return rebuild(graph, edges=edges)


def add_device(graph: Graph, device: Device) -> Graph:
    """Add a device that runs every node at the cost of the first device, linked both ways
    to every device with default bandwidth, so that it is usable at once."""
    if device.name in graph.device_index:
        raise GraphFormatError("duplicate device name", where=f"device '{device.name}'")
    first = graph.devices[0].name
    nodes = [
        replace(n, cost={**n.cost, device.name: n.cost[first]}) if first in n.cost else n
        for n in graph.nodes
    ]
    links = list(graph.links)
    for other in graph.devices:
        links.append(Link(other.name, device.name, DEFAULT_BANDWIDTH, DEFAULT_LATENCY_MS))
        links.append(Link(device.name, other.name, DEFAULT_BANDWIDTH, DEFAULT_LATENCY_MS))
    return rebuild(graph, devices=[*graph.devices, device], nodes=nodes, links=links)


def remove_device(graph: Graph, name: str) -> Graph:
    """Remove a device, its costs, links and transfer overrides.

    Refused (by the core's checks) when it is the last device or some node then has no device.
    """
    devices = [d for d in graph.devices if d.name != name]
    nodes = [replace(n, cost={k: v for k, v in n.cost.items() if k != name}) for n in graph.nodes]
    links = [lk for lk in graph.links if name not in (lk.source, lk.target)]
    edges = [
        replace(e, transfer_ms={k: v for k, v in e.transfer_ms.items() if name not in _pair(k)})
        for e in graph.edges
    ]
    return rebuild(graph, devices=devices, nodes=nodes, edges=edges, links=links)


def rename_device(graph: Graph, old: str, new: str) -> Graph:
    """Rename a device everywhere it is mentioned (costs, links, transfer overrides)."""
    if new == old:
        return graph
    if not new.strip():
        raise GraphFormatError("empty device name", where=f"device '{old}'", fix="name it")
    if new in graph.device_index:
        raise GraphFormatError("duplicate device name", where=f"device '{new}'", fix="rename it")

    def swap(name: str) -> str:
        return new if name == old else name

    devices = [replace(d, name=swap(d.name)) for d in graph.devices]
    nodes = [replace(n, cost={swap(k): v for k, v in n.cost.items()}) for n in graph.nodes]
    links = [replace(lk, source=swap(lk.source), target=swap(lk.target)) for lk in graph.links]
    edges = [
        replace(
            e,
            transfer_ms={"->".join(swap(p) for p in _pair(k)): v for k, v in e.transfer_ms.items()},
        )
        for e in graph.edges
    ]
    return rebuild(graph, devices=devices, nodes=nodes, edges=edges, links=links)


def set_link(graph: Graph, source: str, target: str, bandwidth: float, latency_ms: float) -> Graph:
    """Set (or create) the link ``source -> target``."""
    link = Link(source, target, float(bandwidth), float(latency_ms))
    links = [lk for lk in graph.links if (lk.source, lk.target) != (source, target)]
    position = next(
        (i for i, lk in enumerate(graph.links) if (lk.source, lk.target) == (source, target)),
        len(links),
    )
    links.insert(position, link)
    return rebuild(graph, links=links)


def _pair(key: str) -> tuple[str, ...]:
    return tuple(key.split("->"))

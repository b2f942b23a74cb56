"""Pure device and link edits: add, remove or rename a device, set a link (see
solver/editing/edits.py).

Like the graph edits, each takes a frozen :class:`~solver.document.graph.Graph` and returns a new,
valid one through :func:`~solver.editing.edits.rebuild`, so an invalid edit raises
:class:`~solver.errors.GraphFormatError` before it reaches the editor's undo stack.
"""

from __future__ import annotations

from dataclasses import replace

from solver.document.graph import Device, Graph, Link
from solver.editing.edits import DEFAULT_BANDWIDTH, DEFAULT_LATENCY_MS, rebuild
from solver.errors import GraphFormatError

__all__ = [
    "add_device",
    "remove_device",
    "rename_device",
    "set_link",
]


def add_device(graph: Graph, device: Device) -> Graph:
    """Add a device that runs every node at the cost of the first device, linked both ways
    to every device with default bandwidth, so that it is usable at once.

    Parameters
    ----------
    graph
        The graph to add to.
    device
        The new device.

    Returns
    -------
    Graph
        The graph with ``device`` last.

    Raises
    ------
    GraphFormatError
        If the name is taken or the device is invalid.

    Examples
    --------
    >>> from solver.editing.edits import example_graph
    >>> graph = add_device(example_graph(), Device("tpu", "tpu", 8))
    >>> graph.node("a").cost, len(graph.links)
    ({'cpu': 1.0, 'tpu': 1.0}, 6)
    """
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

    Parameters
    ----------
    graph
        The graph to edit.
    name
        The device to remove.

    Returns
    -------
    Graph
        The graph without the device.

    Raises
    ------
    GraphFormatError
        (from the core's checks) When it is the last device or some node then has no device.

    Examples
    --------
    >>> from solver.editing.edits import empty_graph, example_graph
    >>> [d.name for d in remove_device(empty_graph(), "gpu").devices]
    ['cpu']
    >>> remove_device(example_graph(), "cpu")
    Traceback (most recent call last):
    ...
    solver.errors.GraphFormatError: node 'a', field 'cost': no device can run it; give a cost (ms) for at least one device
    """  # noqa: E501
    devices = [d for d in graph.devices if d.name != name]
    nodes = [replace(n, cost={k: v for k, v in n.cost.items() if k != name}) for n in graph.nodes]
    links = [lk for lk in graph.links if name not in (lk.source, lk.target)]
    edges = [
        replace(e, transfer_ms={k: v for k, v in e.transfer_ms.items() if name not in _pair(k)})
        for e in graph.edges
    ]
    return rebuild(graph, devices=devices, nodes=nodes, edges=edges, links=links)


def rename_device(graph: Graph, old: str, new: str) -> Graph:
    """Rename a device everywhere it is mentioned (costs, links, transfer overrides).

    Parameters
    ----------
    graph
        The graph to edit.
    old, new
        The current and the new name; renaming to the same name returns ``graph``.

    Returns
    -------
    Graph
        The graph with the device renamed.

    Raises
    ------
    GraphFormatError
        If ``new`` is empty or already a device's name.

    Examples
    --------
    >>> from solver.editing.edits import example_graph
    >>> graph = rename_device(example_graph(), "cpu", "host")
    >>> [d.name for d in graph.devices], graph.node("a").cost
    (['host', 'gpu'], {'host': 1.0})
    """
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
    """Set (or create) the link ``source -> target``.

    Parameters
    ----------
    graph
        The graph to edit.
    source, target
        Device names.
    bandwidth
        Bytes per second, > 0.
    latency_ms
        Milliseconds, >= 0.

    Returns
    -------
    Graph
        The graph with the link in its old place (or last, when new).

    Raises
    ------
    GraphFormatError
        If a device is unknown, the bandwidth is not positive or the latency negative.

    Examples
    --------
    >>> from solver.editing.edits import empty_graph
    >>> set_link(empty_graph(), "cpu", "gpu", 1e9, 0.5).links[0]
    Link(source='cpu', target='gpu', bandwidth=1000000000.0, latency_ms=0.5)
    """
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

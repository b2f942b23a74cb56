"""The graph document: devices, links, operator nodes and edges, plus the arrays a solver needs.

Nodes are kept in the *schedule order* of docs/model.md section 1: a topological order that
numbers stages. :func:`make_graph` puts any node list into that order; the :class:`Graph`
constructor checks every structural rule and raises :class:`GraphFormatError` naming the place.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from solver.document.units import MAX_SIZE
from solver.errors import GraphFormatError

__all__ = [
    "NODE_KINDS",
    "Device",
    "Link",
    "Node",
    "Edge",
    "Graph",
    "make_graph",
    "topological_order",
]

NODE_KINDS = ("forward", "loss", "backward", "other")
MAX_TRANSFER_TABLE_BYTES = 2 * 2**30
"""The largest transfer table (edges x devices^2 floats) built; more is refused in one line."""


@dataclass(frozen=True)
class Device:
    """A device and its memory limit; ``fixed_memory`` (weights, optimizer state) is always in use.

    ``memory_limit`` is the file formats' ``memory`` of a device: every byte resident there.
    ``saved_limit`` (the formats' ``saved``; ``None``: no limit) bounds the activations the
    device holds across the forward/backward boundary: the bytes resident there when the
    backward starts (:attr:`Graph.boundary`; docs/solver.md, "Saved-bytes budget").
    """

    name: str
    kind: str = "cpu"
    memory_limit: int = 0
    fixed_memory: int = 0
    peak_flops: float | None = None
    mem_bandwidth: float | None = None
    saved_limit: int | None = None

    @property
    def activation_budget(self) -> int:
        """Bytes available to activations: the memory limit less the fixed memory.

        The *activation budget* is the ``B_d`` of docs/model.md that the model and the
        simulator enforce.
        """
        return max(self.memory_limit - self.fixed_memory, 0)


@dataclass(frozen=True)
class Link:
    """A one-way connection between two devices; transfer time = latency + bytes / bandwidth."""

    source: str
    target: str
    bandwidth: float
    latency_ms: float = 0.0

    def transfer_ms(self, num_bytes: int) -> float:
        """Milliseconds to move ``num_bytes`` over this link."""
        return self.latency_ms + 1000.0 * num_bytes / self.bandwidth


@dataclass(frozen=True)
class Node:
    """An operator: the bytes of its output and its compute time (ms) per device name.

    A device missing from ``cost`` cannot run the node. ``workspace`` is the bytes the
    operator needs only while it runs (intermediates freed inside it): counted on its device
    during each run, never kept, copied or freed by the schedule (docs/spec-notes.md,
    "Workspace memory"). ``recomputable`` False: the node is computed once, in its own stage,
    and never again (a random op, whose recomputation would draw other numbers; its output
    may be kept or freed; docs/spec-notes.md, "Nodes computed once").
    """

    id: str
    memory: int
    cost: Mapping[str, float]
    kind: str = "other"
    op: str = ""
    of: str | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    workspace: int = 0
    recomputable: bool = True


@dataclass(frozen=True)
class Edge:
    """``target`` consumes the output of ``source``; ``transfer_ms`` overrides the link model.

    ``transfer_ms`` is keyed by ``"src->dst"`` device-name pairs, as in the file format.
    """

    source: str
    target: str
    transfer_ms: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Graph:
    """A validated operator graph in schedule order.

    Construct it with :func:`make_graph` (which sorts nodes topologically) or directly with
    nodes already in a topological order. ``notes`` holds what the loader wants the user to know
    (a reordering, an ignored field), never errors.
    """

    name: str
    devices: tuple[Device, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...] = ()
    links: tuple[Link, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_devices(self.devices, self.links)
        _check_nodes(self.nodes, {d.name for d in self.devices})
        _check_edges(self.nodes, self.edges, {d.name for d in self.devices})
        if self.boundary is None:
            for device in self.devices:
                if device.saved_limit is not None:
                    raise GraphFormatError(
                        "a saved-bytes limit needs a backward node, and the graph has none",
                        where=f"device '{device.name}', field 'saved'",
                        fix="drop the field, or give a training graph (with backward nodes)",
                    )
        order = {node.id: i for i, node in enumerate(self.nodes)}
        for edge in self.edges:
            if order[edge.source] >= order[edge.target]:
                raise GraphFormatError(
                    f"'{edge.target}' comes before its input '{edge.source}' in the node order",
                    where=f"edge {edge.source} -> {edge.target}",
                    fix="list nodes in a topological order, or load through make_graph",
                )

    # ----- sizes and lookups --------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of nodes (and of stages)."""
        return len(self.nodes)

    @property
    def num_devices(self) -> int:
        """Number of devices."""
        return len(self.devices)

    @cached_property
    def index(self) -> dict[str, int]:
        """Node id -> position in the schedule order."""
        return {node.id: i for i, node in enumerate(self.nodes)}

    @cached_property
    def device_index(self) -> dict[str, int]:
        """Device name -> position."""
        return {d.name: i for i, d in enumerate(self.devices)}

    def device(self, name: str) -> Device:
        """The device called ``name``."""
        return self.devices[self.device_index[name]]

    def node(self, node_id: str) -> Node:
        """The node called ``node_id``."""
        return self.nodes[self.index[node_id]]

    # ----- arrays for solvers and the simulator --------------------------------------------
    @cached_property
    def edge_pairs(self) -> tuple[tuple[int, int], ...]:
        """Edges as ``(i, k)`` index pairs, sorted; position = edge number ``e``."""
        return tuple(sorted((self.index[e.source], self.index[e.target]) for e in self.edges))

    @cached_property
    def edge_number(self) -> dict[tuple[int, int], int]:
        """``(i, k)`` -> edge number."""
        return {pair: e for e, pair in enumerate(self.edge_pairs)}

    @cached_property
    def inputs(self) -> tuple[tuple[int, ...], ...]:
        """For each node, the indices of its inputs, ascending."""
        result: list[list[int]] = [[] for _ in self.nodes]
        for i, k in self.edge_pairs:
            result[k].append(i)
        return tuple(tuple(r) for r in result)

    @cached_property
    def users(self) -> tuple[tuple[int, ...], ...]:
        """For each node, the indices of the nodes that consume its output, ascending."""
        result: list[list[int]] = [[] for _ in self.nodes]
        for i, k in self.edge_pairs:
            result[i].append(k)
        return tuple(tuple(r) for r in result)

    @cached_property
    def output_bytes(self) -> np.ndarray:
        """Output bytes ``M_i`` per node (int64); a device's limit: :attr:`Device.memory_limit`."""
        return np.array([node.memory for node in self.nodes], dtype=np.int64)

    @cached_property
    def workspace(self) -> np.ndarray:
        """Workspace bytes ``W_i`` per node (int64): in use on its device only while it runs."""
        return np.array([node.workspace for node in self.nodes], dtype=np.int64)

    @cached_property
    def once(self) -> tuple[int, ...]:
        """Indices of the nodes computed once, never recomputed (``Node.recomputable`` False).

        >>> from solver.document.generators import unit_chain
        >>> unit_chain(2).once
        ()
        """
        return tuple(i for i, node in enumerate(self.nodes) if not node.recomputable)

    @cached_property
    def cost(self) -> np.ndarray:
        """Compute time ``C[d][i]`` in ms, shape (D, n); NaN where ``d`` cannot run ``i``."""
        table = np.full((self.num_devices, self.n), np.nan)
        for i, node in enumerate(self.nodes):
            for name, ms in node.cost.items():
                table[self.device_index[name], i] = ms
        return table

    @cached_property
    def memory_limits(self) -> Mapping[str, int]:
        """Each device's memory limit by name (read-only): a schedule's ``budgets``.

        >>> from solver.document.generators import unit_chain
        >>> dict(unit_chain(2, budget=5).memory_limits)
        {'cpu': 5}
        """
        return _ReadOnlyMap({d.name: d.memory_limit for d in self.devices})

    @cached_property
    def boundary(self) -> int | None:
        """The forward/backward boundary: the stage of the first backward node (``None`` when
        the graph has none). The checkpoints resident at the start of this stage,
        ``S[d, boundary, *]``, are what the forward leaves for the backward.

        >>> from solver.document.generators import unit_chain
        >>> unit_chain(2, budget=5).boundary  # n0 n1 forward, n2 the loss, n3 n4 backward
        3
        """
        return next((k for k, node in enumerate(self.nodes) if node.kind == "backward"), None)

    @cached_property
    def saved_limits(self) -> Mapping[str, int]:
        """The devices with a saved-bytes limit (``Device.saved_limit``), by name (read-only)."""
        return _ReadOnlyMap(
            {d.name: d.saved_limit for d in self.devices if d.saved_limit is not None}
        )

    @cached_property
    def activation_budgets(self) -> np.ndarray:
        """Activation budget ``B_d`` in bytes per device (memory limit less fixed memory)."""
        return np.array([d.activation_budget for d in self.devices], dtype=np.int64)

    @cached_property
    def activation_budget_map(self) -> Mapping[str, int]:
        """The activation budgets by device name (read-only; one for every replay)."""
        return _ReadOnlyMap({d.name: d.activation_budget for d in self.devices})

    @cached_property
    def transfer(self) -> np.ndarray:
        """``CC[e][d'][d]`` in ms, shape (E, D, D); inf where no link or override allows it.

        Built with numpy per edge (a Python loop over device pairs took 10 s for 9 edges
        between 1,000 devices); a table past :data:`MAX_TRANSFER_TABLE_BYTES` is refused
        before it is allocated.
        """
        edges, count = len(self.edge_pairs), self.num_devices
        need = edges * count * count * 8
        if need > MAX_TRANSFER_TABLE_BYTES:
            raise GraphFormatError(
                f"{edges} edges between {count} devices need a transfer table of "
                f"{need / 2**30:.1f} GiB (a time per edge and device pair)",
                where="devices",
                fix=f"use fewer devices or edges (at most {MAX_TRANSFER_TABLE_BYTES // 2**30} GiB)",
            )
        latency = np.full((count, count), np.inf)
        bandwidth = np.ones((count, count))
        for link in self.links:
            a, b = self.device_index[link.source], self.device_index[link.target]
            latency[a, b], bandwidth[a, b] = link.latency_ms, link.bandwidth
        linked = np.isfinite(latency)
        diagonal = np.arange(count)
        table = np.full((edges, count, count), np.inf)
        overrides = {(e.source, e.target): e.transfer_ms for e in self.edges}
        for e, (i, k) in enumerate(self.edge_pairs):
            row = table[e]
            # the same float operations as Link.transfer_ms, element by element
            np.add(latency, 1000.0 * int(self.output_bytes[i]) / bandwidth, out=row, where=linked)
            row[diagonal, diagonal] = 0.0
            for key, ms in overrides.get((self.nodes[i].id, self.nodes[k].id), {}).items():
                src, dst = key.split("->")
                row[self.device_index[src], self.device_index[dst]] = float(ms)
        return table

    def edge_transfer_ms(self, e: int, src: int, dst: int) -> float:
        """``transfer[e, src, dst]`` without building the table when it is not built yet: one
        copy's time costs a dict lookup, where the table of 40 edges between 1,000 devices
        took 2.3 s to fill for a construction that reads a few dozen entries."""
        if "transfer" in self.__dict__ or src == dst:
            return float(self.transfer[e, src, dst]) if src != dst else 0.0
        i, k = self.edge_pairs[e]
        override = self._transfer_overrides.get((self.nodes[i].id, self.nodes[k].id), {})
        key = f"{self.devices[src].name}->{self.devices[dst].name}"
        if key in override:
            return float(override[key])
        link = self._links_by_index.get((src, dst))
        return math.inf if link is None else link.transfer_ms(int(self.output_bytes[i]))

    @cached_property
    def _transfer_overrides(self) -> Mapping[tuple[str, str], Mapping[str, float]]:
        return {(e.source, e.target): e.transfer_ms for e in self.edges}

    @cached_property
    def _links_by_index(self) -> Mapping[tuple[int, int], Link]:
        return {
            (self.device_index[lk.source], self.device_index[lk.target]): lk for lk in self.links
        }

    def transfer_ms(self, source: str, target: str, src_device: str, dst_device: str) -> float:
        """Transfer time of edge ``source -> target`` between two devices (inf: not allowed)."""
        e = self.edge_number[self.index[source], self.index[target]]
        d_src, d_dst = self.device_index[src_device], self.device_index[dst_device]
        return float(self.transfer[e, d_src, d_dst])

    # ----- derived graphs ---------------------------------------------------------------------
    def with_memory_limits(self, limits: Mapping[str, int]) -> Graph:
        """Return a copy whose devices have the given memory limits (bytes) by name."""
        unknown = sorted(set(limits) - set(self.device_index))
        if unknown:
            names = ", ".join(self.device_index)
            raise GraphFormatError(
                f"unknown device {unknown[0]!r}", where="budgets", fix=f"devices are: {names}"
            )
        devices = tuple(
            replace(d, memory_limit=int(limits[d.name])) if d.name in limits else d
            for d in self.devices
        )
        return replace(self, devices=devices)

    def with_saved_limits(self, limits: Mapping[str, int | None]) -> Graph:
        """Return a copy whose devices hold at most ``limits[name]`` bytes across the
        forward/backward boundary (``None``: no limit); see :attr:`Device.saved_limit`.

        Raises ``GraphFormatError`` for an unknown device, a negative size, or a graph with no
        backward node (nothing is held across a boundary it does not have).
        """
        unknown = sorted(set(limits) - set(self.device_index))
        if unknown:
            names = ", ".join(self.device_index)
            raise GraphFormatError(
                f"unknown device {unknown[0]!r}", where="saved", fix=f"devices are: {names}"
            )
        if self.boundary is None and any(v is not None for v in limits.values()):
            raise GraphFormatError(
                "a saved-bytes limit needs a backward node, and the graph has none",
                where="saved",
                fix="give a training graph (forward, loss and backward nodes)",
            )
        devices = tuple(
            replace(d, saved_limit=_optional_int(limits[d.name])) if d.name in limits else d
            for d in self.devices
        )
        return replace(self, devices=devices)

    def with_devices(self, names: Iterable[str]) -> Graph:
        """Return the same graph restricted to some devices (e.g. one, for Checkmate's model)."""
        keep = [self.device(name) for name in names]
        kept = {d.name for d in keep}
        nodes = tuple(
            replace(n, cost={k: v for k, v in n.cost.items() if k in kept}) for n in self.nodes
        )
        links = tuple(lk for lk in self.links if lk.source in kept and lk.target in kept)
        edges = tuple(
            replace(
                e,
                transfer_ms={
                    key: ms for key, ms in e.transfer_ms.items() if set(key.split("->")) <= kept
                },
            )
            for e in self.edges
        )
        return replace(self, devices=tuple(keep), nodes=nodes, links=links, edges=edges)

    def to_networkx(self) -> nx.DiGraph:
        """The DAG as a networkx graph over node ids (for layout and graph algorithms)."""
        dag = nx.DiGraph()
        dag.add_nodes_from(node.id for node in self.nodes)
        dag.add_edges_from((e.source, e.target) for e in self.edges)
        return dag


def _optional_int(value: int | None) -> int | None:
    return None if value is None else int(value)


def topological_order(nodes: Iterable[Node], edges: Iterable[Edge]) -> list[Node]:
    """Return ``nodes`` in a deterministic topological order that keeps the given order if valid.

    Among nodes that are ready at the same time, the one listed first comes first, so a list
    that is already topological is returned unchanged.

    Raises
    ------
    GraphFormatError
        If the edges form a cycle; the message names the cycle.
    """
    nodes = list(nodes)
    position = {node.id: i for i, node in enumerate(nodes)}
    dag = nx.DiGraph()
    dag.add_nodes_from(position)
    dag.add_edges_from((e.source, e.target) for e in edges)
    try:
        ordered = list(nx.lexicographical_topological_sort(dag, key=position.__getitem__))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(dag)
        path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
        raise GraphFormatError(
            f"the edges form a cycle: {path}",
            where="edges",
            fix="a schedule needs a DAG; remove one edge of the cycle",
        ) from None
    return [nodes[position[node_id]] for node_id in ordered]


class _ReadOnlyMap(Mapping[str, int]):
    """A read-only view of a dict that, unlike ``MappingProxyType``, can be pickled (a
    timeline goes from a sweep worker or the solve process to its parent)."""

    def __init__(self, data: dict[str, int]):
        self._data = data

    def __getitem__(self, key: str) -> int:
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


def make_graph(
    name: str,
    devices: Iterable[Device],
    nodes: Iterable[Node],
    edges: Iterable[Edge] = (),
    links: Iterable[Link] = (),
    meta: Mapping[str, Any] | None = None,
    notes: Iterable[str] = (),
) -> Graph:
    """Build a :class:`Graph`, putting the nodes into schedule order first.

    Duplicate edges are merged (the union of their overrides). A note says when the order had
    to change.

    Examples
    --------
    >>> g = make_graph("ab", [Device("cpu", memory_limit=10)],
    ...                [Node("b", 1, {"cpu": 1.0}), Node("a", 1, {"cpu": 1.0})], [Edge("a", "b")])
    >>> [node.id for node in g.nodes], g.notes
    (['a', 'b'], ('nodes reordered into a topological order: a, b',))
    """
    nodes, devices, notes = list(nodes), tuple(devices), list(notes)
    _check_nodes(nodes, {d.name for d in devices})
    edges = _merge_edges(edges)
    _check_edges(nodes, edges, {d.name for d in devices})
    ordered = topological_order(nodes, edges)
    if [n.id for n in ordered] != [n.id for n in nodes]:
        shown = ", ".join(n.id for n in ordered[:8]) + (", ..." if len(ordered) > 8 else "")
        notes.append(f"nodes reordered into a topological order: {shown}")
    return Graph(
        name=name,
        devices=devices,
        nodes=tuple(ordered),
        edges=tuple(edges),
        links=tuple(links),
        meta=dict(meta or {}),
        notes=tuple(notes),
    )


# ----- checks ---------------------------------------------------------------------------------
def _merge_edges(edges: Iterable[Edge]) -> list[Edge]:
    merged: dict[tuple[str, str], Edge] = {}
    for edge in edges:
        key = (edge.source, edge.target)
        if key in merged:
            both = {**merged[key].transfer_ms, **edge.transfer_ms}
            merged[key] = replace(merged[key], transfer_ms=both)
        else:
            merged[key] = edge
    return list(merged.values())


def _check_devices(devices: tuple[Device, ...], links: tuple[Link, ...]) -> None:
    if not devices:
        raise GraphFormatError("no devices", where="devices", fix="add at least one device")
    seen: set[str] = set()
    for device in devices:
        where = f"device '{device.name}'"
        if not device.name:
            raise GraphFormatError("empty device name", where="devices", fix="name every device")
        if device.name in seen:
            raise GraphFormatError("duplicate device name", where=where, fix="rename one")
        if "->" in device.name:
            raise GraphFormatError("'->' in a device name", where=where, fix="rename it")
        seen.add(device.name)
        for label, value in (
            ("memory", device.memory_limit),
            ("fixed_memory", device.fixed_memory),
            ("saved", 0 if device.saved_limit is None else device.saved_limit),
        ):
            _check_size(value, f"{where}, field '{label}'")
    for link in links:
        where = f"link {link.source} -> {link.target}"
        for name in (link.source, link.target):
            if name not in seen:
                raise GraphFormatError(
                    f"unknown device {name!r}",
                    where=where,
                    fix=f"devices are: {', '.join(sorted(seen))}",
                )
        if link.source == link.target:
            raise GraphFormatError(
                "a link from a device to itself",
                where=where,
                fix="links join two different devices",
            )
        if not (link.bandwidth > 0 and math.isfinite(link.bandwidth)):
            raise GraphFormatError(
                f"bandwidth {link.bandwidth} is not positive",
                where=where,
                fix="give bytes per second, e.g. '12 GB/s'",
            )
        if not (link.latency_ms >= 0 and math.isfinite(link.latency_ms)):
            raise GraphFormatError(
                f"latency {link.latency_ms} is negative", where=where, fix="latency_ms must be >= 0"
            )


def _check_workspace(value: object, where: str) -> None:
    """A node's workspace is a whole number of bytes >= 0 (the file reader parses units)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise GraphFormatError(
            f"{value!r} is not a whole number of bytes",
            where=f"{where}, field 'workspace'",
            fix="give bytes >= 0 as an integer or a size such as '4 MiB'",
        )
    if value < 0:
        raise GraphFormatError(
            f"{value} is negative", where=f"{where}, field 'workspace'", fix="sizes must be >= 0"
        )


def _check_size(value: int, where: str) -> None:
    """A size is 0 to 2^53 bytes, as the file reader accepts (docs/spec-notes.md, "Hostile
    input"): a graph built in code (an importer's) must never hold what no file may."""
    if value < 0:
        raise GraphFormatError(f"{value} is negative", where=where, fix="sizes must be >= 0")
    if value > MAX_SIZE:
        raise GraphFormatError(
            f"{value} bytes is too large",
            where=where,
            fix=f"sizes must be at most {MAX_SIZE} bytes (8 PiB); for an import, give a "
            "smaller input shape",
        )


def _check_nodes(nodes: Iterable[Node], device_names: set[str]) -> None:
    seen: set[str] = set()
    total = 0
    for node in nodes:
        where = f"node '{node.id}'"
        if not node.id:
            raise GraphFormatError("empty node id", where="nodes", fix="give every node an id")
        if node.id in seen:
            raise GraphFormatError("duplicate node id", where=where, fix="node ids must be unique")
        seen.add(node.id)
        _check_size(node.memory, f"{where}, field 'memory'")
        _check_workspace(node.workspace, where)
        _check_size(node.workspace, f"{where}, field 'workspace'")
        if not isinstance(node.recomputable, bool | np.bool_):
            raise GraphFormatError(
                f"{node.recomputable!r} is not true or false",
                where=f"{where}, field 'recomputable'",
                fix="write false for a node computed once (a random op), or leave it out",
            )
        total += node.memory + node.workspace
        if node.kind not in NODE_KINDS:
            raise GraphFormatError(
                f"unknown kind {node.kind!r}",
                where=f"{where}, field 'kind'",
                fix=f"use one of {', '.join(NODE_KINDS)}",
            )
        for device, ms in node.cost.items():
            if device not in device_names:
                raise GraphFormatError(
                    f"unknown device {device!r}",
                    where=f"{where}, field 'cost'",
                    fix=f"devices are: {', '.join(sorted(device_names))}",
                )
            if not (isinstance(ms, int | float) and math.isfinite(ms) and ms >= 0):
                raise GraphFormatError(
                    f"{ms!r} is not a cost",
                    where=f"{where}, cost '{device}'",
                    fix="costs are milliseconds >= 0",
                )
        if not node.cost:
            raise GraphFormatError(
                "no device can run it",
                where=f"{where}, field 'cost'",
                fix="give a cost (ms) for at least one device",
            )
    if total > MAX_SIZE:
        raise GraphFormatError(
            f"the node sizes add up to {total} bytes",
            where="field 'nodes'",
            fix=f"all tensors together must be at most {MAX_SIZE} bytes (8 PiB)",
        )


def _check_edges(nodes: Iterable[Node], edges: Iterable[Edge], device_names: set[str]) -> None:
    ids = {node.id for node in nodes}
    for edge in edges:
        where = f"edge {edge.source} -> {edge.target}"
        for end in (edge.source, edge.target):
            if end not in ids:
                raise GraphFormatError(
                    f"unknown node {end!r}",
                    where=where,
                    fix="edges must join ids listed in 'nodes'",
                )
        if edge.source == edge.target:
            raise GraphFormatError("a self-loop", where=where, fix="a node cannot consume itself")
        for key, ms in edge.transfer_ms.items():
            pair = key.split("->")
            if len(pair) != 2 or not set(pair) <= device_names or pair[0] == pair[1]:
                raise GraphFormatError(
                    f"bad transfer key {key!r}",
                    where=f"{where}, 'transfer_ms'",
                    fix="write 'src->dst' with two different device names",
                )
            if not (isinstance(ms, int | float) and math.isfinite(ms) and ms >= 0):
                raise GraphFormatError(
                    f"{ms!r} is not a time",
                    where=f"{where}, '{key}'",
                    fix="transfer times are milliseconds >= 0",
                )

"""Graph documents (``*.graph.json``, docs/formats.md): read, check every field, write back.

:func:`graph_from_dict` raises :class:`GraphFormatError` naming the file, the place and the fix,
and never returns a half-read graph; :func:`graph_to_dict` writes a document it reads back to an
equal graph. Costs missing from a node are filled by the roofline model when the node has FLOPs
and bytes and its device peak numbers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from solver.document.fields import (
    field_error,
    get_field,
    number_field,
    object_field,
    size_field,
)
from solver.document.graph import NODE_KINDS, Device, Edge, Graph, Link, Node, make_graph
from solver.document.json_io import read_json, write_json
from solver.document.units import MAX_SIZE, parse_bandwidth
from solver.errors import GraphFormatError

__all__ = ["GRAPH_FORMAT", "graph_from_dict", "graph_to_dict", "load_graph", "save_graph"]

GRAPH_FORMAT = "remat-graph"
_NODE_FIELDS = {
    "id",
    "op",
    "kind",
    "of",
    "memory",
    "workspace",
    "cost",
    "inputs",
    "flops",
    "bytes_accessed",
    "recomputable",
}
_GRAPH_FIELDS = {"format", "version", "name", "devices", "links", "nodes", "edges", "meta"}


def graph_from_dict(doc: Any, path: str | os.PathLike | None = None) -> Graph:
    """Build a :class:`Graph` from a parsed graph document.

    Raises
    ------
    GraphFormatError
        On any malformed or inconsistent field, naming the file and the place.

    Examples
    --------
    >>> g = graph_from_dict({"format": "remat-graph", "version": 1, "name": "x",
    ...     "devices": [{"name": "cpu", "memory": "1 KiB"}],
    ...     "nodes": [{"id": "a", "memory": 8, "cost": {"cpu": 1}},
    ...               {"id": "b", "memory": 8, "cost": {"cpu": 2}, "inputs": ["a"]}]})
    >>> g.n, g.devices[0].memory_limit, g.edge_pairs
    (2, 1024, ((0, 1),))
    """
    try:
        return _graph_from_dict(doc)
    except GraphFormatError as exc:
        raise exc.with_path(str(path)) if path is not None else exc from None


def _graph_from_dict(doc: Any) -> Graph:
    doc = object_field(doc, "top level")
    fmt = doc.get("format")
    if fmt != GRAPH_FORMAT:
        raise field_error(
            f"'format' is {fmt!r}", "top level", f'a graph file says "{GRAPH_FORMAT}"'
        )
    if doc.get("version", 1) != 1:
        raise field_error(
            f"version {doc.get('version')!r} is not supported",
            "top level",
            "this program reads version 1",
        )
    notes = [f"unknown top-level field '{k}' ignored" for k in doc if k not in _GRAPH_FIELDS]
    devices = [_device(d, i) for i, d in enumerate(get_field(doc, "devices", "top level", list))]
    links = [_link(x, i) for i, x in enumerate(get_field(doc, "links", "top level", list, []))]
    raw_nodes = get_field(doc, "nodes", "top level", list)
    if not raw_nodes:
        raise field_error("no nodes", "field 'nodes'", "add at least one node")
    nodes: list[Node] = []
    edges: list[Edge] = []
    for i, raw in enumerate(raw_nodes):
        node, inputs, node_notes = _node(raw, i, devices)
        nodes.append(node)
        edges.extend(Edge(source, node.id) for source in inputs)
        notes.extend(node_notes)
    edges.extend(_edge(x, i) for i, x in enumerate(get_field(doc, "edges", "top level", list, [])))
    meta = object_field(doc.get("meta", {}), "field 'meta'")
    name = get_field(doc, "name", "top level", str, "untitled")
    total = sum(node.memory + node.workspace for node in nodes)
    if total > MAX_SIZE:
        raise field_error(
            f"the node sizes add up to {total} bytes",
            "field 'nodes'",
            f"all tensors together must be at most {MAX_SIZE} bytes (8 PiB)",
        )
    return make_graph(name, devices, nodes, edges, links, meta, notes)


def _device(raw: Any, i: int) -> Device:
    raw = object_field(raw, f"devices[{i}]")
    name = get_field(raw, "name", f"devices[{i}]", str)
    where = f"device '{name}'"
    optional = {}
    for key in ("peak_flops", "mem_bandwidth"):
        if key in raw:
            optional[key] = number_field(raw[key], f"{where}, field '{key}'", "a positive number")
    return Device(
        name=name,
        kind=get_field(raw, "kind", where, str, "cpu"),
        memory_limit=size_field(
            get_field(raw, "memory", where, (int, float, str)), f"{where}, field 'memory'"
        ),
        fixed_memory=size_field(raw.get("fixed_memory", 0), f"{where}, field 'fixed_memory'"),
        saved_limit=(
            size_field(raw["saved"], f"{where}, field 'saved'")
            if raw.get("saved") is not None
            else None
        ),
        **optional,
    )


def _link(raw: Any, i: int) -> Link:
    raw = object_field(raw, f"links[{i}]")
    source = get_field(raw, "from", f"links[{i}]", str)
    target = get_field(raw, "to", f"links[{i}]", str)
    where = f"link {source} -> {target}"
    try:
        bandwidth = parse_bandwidth(get_field(raw, "bandwidth", where, (int, float, str)))
    except ValueError as exc:
        raise field_error(
            str(exc).split("; ")[0],
            f"{where}, field 'bandwidth'",
            "give bytes per second or e.g. '12 GB/s'",
        ) from None
    latency = number_field(raw.get("latency_ms", 0.0), f"{where}, field 'latency_ms'", "ms >= 0")
    return Link(source, target, bandwidth, latency)


def _node(raw: Any, i: int, devices: list[Device]) -> tuple[Node, list[str], list[str]]:
    raw = object_field(raw, f"nodes[{i}]")
    node_id = get_field(raw, "id", f"nodes[{i}]", str)
    where = f"node '{node_id}'"
    memory = size_field(
        get_field(raw, "memory", where, (int, float, str)), f"{where}, field 'memory'"
    )
    workspace = size_field(
        get_field(raw, "workspace", where, (int, float, str), 0), f"{where}, field 'workspace'"
    )
    kind = get_field(raw, "kind", where, str, "other")
    if kind not in NODE_KINDS:
        raise field_error(
            f"unknown kind {kind!r}",
            f"{where}, field 'kind'",
            f"use one of {', '.join(NODE_KINDS)}",
        )
    flops = raw.get("flops")
    bytes_accessed = raw.get("bytes_accessed")
    if flops is not None:
        flops = number_field(flops, f"{where}, field 'flops'", "a number >= 0")
    if bytes_accessed is not None:
        bytes_accessed = number_field(bytes_accessed, f"{where}, field 'bytes_accessed'", ">= 0")
    cost = _cost(raw, where, devices, flops, bytes_accessed)
    inputs = get_field(raw, "inputs", where, list, [])
    for j, source in enumerate(inputs):
        if not isinstance(source, str):
            raise field_error(
                f"inputs[{j}] is {type(source).__name__}", where, "inputs are node ids"
            )
    recomputable = get_field(raw, "recomputable", where, bool, True)
    extra = {k: v for k, v in raw.items() if k not in _NODE_FIELDS}
    node = Node(
        id=node_id,
        memory=memory,
        cost=cost,
        kind=kind,
        op=get_field(raw, "op", where, str, ""),
        of=get_field(raw, "of", where, str, None),
        flops=flops,
        bytes_accessed=bytes_accessed,
        extra=extra,
        workspace=workspace,
        recomputable=recomputable,
    )
    return node, inputs, []


def _cost(raw: Mapping, where: str, devices: list[Device], flops, bytes_accessed) -> dict:
    if "cost" not in raw:
        roofline = _roofline(devices, flops, bytes_accessed)
        if roofline:
            return roofline
        raise field_error(
            "missing field 'cost'",
            where,
            "give milliseconds per device, or 'flops' and devices with 'peak_flops'",
        )
    cost = object_field(raw["cost"], f"{where}, field 'cost'")
    names = {d.name for d in devices}
    result = {}
    for device, ms in cost.items():
        if device not in names:
            raise field_error(
                f"unknown device {device!r}",
                f"{where}, field 'cost'",
                f"devices are: {', '.join(sorted(names))}",
            )
        result[device] = number_field(
            ms, f"{where}, cost '{device}'", "costs are milliseconds >= 0"
        )
    return result


def _roofline(devices: list[Device], flops, bytes_accessed) -> dict[str, float]:
    """Fill costs from FLOPs and bytes: time = max(compute time, memory time), in ms."""
    result: dict[str, float] = {}
    if flops is None:
        return result
    for device in devices:
        if device.peak_flops:
            seconds = flops / device.peak_flops
            if bytes_accessed and device.mem_bandwidth:
                seconds = max(seconds, bytes_accessed / device.mem_bandwidth)
            result[device.name] = 1000.0 * seconds
    return result


def _edge(raw: Any, i: int) -> Edge:
    where = f"edges[{i}]"
    if isinstance(raw, list):
        if len(raw) != 2 or not all(isinstance(x, str) for x in raw):
            raise field_error('a short edge must be ["from", "to"]', where, "write two node ids")
        return Edge(raw[0], raw[1])
    raw = object_field(raw, where)
    source = get_field(raw, "from", where, str)
    target = get_field(raw, "to", where, str)
    overrides = object_field(
        raw.get("transfer_ms", {}), f"edge {source} -> {target}, 'transfer_ms'"
    )
    checked = {
        key: number_field(ms, f"edge {source} -> {target}, '{key}'", "milliseconds >= 0")
        for key, ms in overrides.items()
    }
    return Edge(source, target, checked)


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The graph as a document that :func:`graph_from_dict` reads back to an equal graph."""
    nodes = []
    for i, node in enumerate(graph.nodes):
        entry: dict[str, Any] = {"id": node.id}
        if node.op:
            entry["op"] = node.op
        entry["kind"] = node.kind
        if node.of:
            entry["of"] = node.of
        entry["memory"] = node.memory
        if node.workspace:  # omitted when 0: files without workspaces save as before
            entry["workspace"] = node.workspace
        entry["cost"] = dict(node.cost)
        if not node.recomputable:  # written only when false: other files save as before
            entry["recomputable"] = False
        inputs = [graph.nodes[j].id for j in graph.inputs[i]]
        if inputs:
            entry["inputs"] = inputs
        for key in ("flops", "bytes_accessed"):
            if getattr(node, key) is not None:
                entry[key] = getattr(node, key)
        entry.update(node.extra)
        nodes.append(entry)
    doc: dict[str, Any] = {
        "format": GRAPH_FORMAT,
        "version": 1,
        "name": graph.name,
        "devices": [_device_to_dict(d) for d in graph.devices],
        "links": [
            {
                "from": lk.source,
                "to": lk.target,
                "bandwidth": lk.bandwidth,
                "latency_ms": lk.latency_ms,
            }
            for lk in graph.links
        ],
        "nodes": nodes,
    }
    overrides = [
        {"from": e.source, "to": e.target, "transfer_ms": dict(e.transfer_ms)}
        for e in graph.edges
        if e.transfer_ms
    ]
    if overrides:
        doc["edges"] = overrides
    if graph.meta:
        doc["meta"] = dict(graph.meta)
    return doc


def _device_to_dict(device: Device) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": device.name,
        "kind": device.kind,
        "memory": device.memory_limit,
    }
    if device.fixed_memory:
        entry["fixed_memory"] = device.fixed_memory
    if device.saved_limit is not None:
        entry["saved"] = device.saved_limit
    for key in ("peak_flops", "mem_bandwidth"):
        if getattr(device, key) is not None:
            entry[key] = getattr(device, key)
    return entry


def load_graph(path: str | os.PathLike) -> Graph:
    """Read a ``*.graph.json`` file.

    Raises
    ------
    GraphFormatError
        On unreadable files, JSON syntax errors and any invalid field.
    """
    return graph_from_dict(read_json(path), path)


def save_graph(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``graph`` to ``path`` atomically."""
    write_json(graph_to_dict(graph), path)

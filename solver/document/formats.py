"""Reading and writing graph and schedule JSON documents (spec/formats.md).

Readers check every field and raise :class:`GraphFormatError` / :class:`ScheduleFormatError`
naming the file, the place and the fix; they never return half-read documents. They read only
regular files of at most :data:`MAX_FILE_BYTES`, nested at most :data:`MAX_DEPTH` deep, and refuse
NaN, Infinity and numbers out of a float's range, so no input ends in a traceback or a hang.

Writers are atomic: a temporary file in the same folder is renamed over the target (through a
symlink to its target), the folder is synced, a read-only target is refused and JSON never holds
NaN or Infinity.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from solver.document.graph import NODE_KINDS, Device, Edge, Graph, Link, Node, make_graph
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.document.units import MAX_SIZE, format_size, parse_bandwidth, parse_size
from solver.errors import FileWriteError, GraphFormatError, ScheduleFormatError
from solver.status import SolveStatus

__all__ = [
    "GRAPH_FORMAT",
    "SCHEDULE_FORMAT",
    "graph_from_dict",
    "graph_to_dict",
    "load_graph",
    "save_graph",
    "schedule_from_dict",
    "schedule_to_dict",
    "load_schedule",
    "save_schedule",
    "read_json",
    "dumps_json",
    "write_json",
    "atomic_write_text",
    "atomic_write_bytes",
    "MAX_FILE_BYTES",
    "MAX_DEPTH",
]

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 64 * 1024**2
"""The largest file read (64 MiB; the biggest bundled graph is 50 kB). A cap keeps ``/dev/zero``
or a huge file from filling memory."""
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects accepted (the formats need 5 levels)."""
_MAX_INT_DIGITS = 300
"""Integers with more digits are refused while parsing (no float holds them)."""
STALE_TEMP_SECONDS = 10 * 60
"""A writer's temporary file older than this is a crash leftover and is removed on the next save."""

GRAPH_FORMAT = "remat-graph"
SCHEDULE_FORMAT = "remat-schedule"
_NODE_FIELDS = {"id", "op", "kind", "of", "memory", "cost", "inputs", "flops", "bytes_accessed"}
_GRAPH_FIELDS = {"format", "version", "name", "devices", "links", "nodes", "edges", "meta"}


# ----- small typed readers ------------------------------------------------------------------
def _fail(what: str, where: str, fix: str = "") -> GraphFormatError:
    return GraphFormatError(what, where=where, fix=fix)


def _get(obj: Mapping, key: str, where: str, kind: type | tuple, default: Any = ...) -> Any:
    if key not in obj:
        if default is ...:
            raise _fail(f"missing field '{key}'", where, f"add '{key}'")
        return default
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _as_tuple(kind):
        names = " or ".join(t.__name__ for t in _as_tuple(kind)).replace("str", "string")
        raise _fail(f"field '{key}' is {type(value).__name__}", where, f"it must be a {names}")
    return value


def _as_tuple(kind: type | tuple) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


def _size(value: Any, where: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise _fail(str(exc).split("; ")[0], where, _tail(exc, "sizes must be >= 0")) from None


def _tail(exc: ValueError, default: str) -> str:
    parts = str(exc).split("; ", 1)
    return parts[1] if len(parts) > 1 else default


def _number(value: Any, where: str, fix: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(f"{_short(value)} is not a number", where, fix)
    try:
        number = float(value)
    except OverflowError:
        raise _fail("the number is too large for a float", where, fix) from None
    if not math.isfinite(number):
        raise _fail(f"{number!r} is not a finite number", where, fix)
    if number < 0:
        raise _fail(f"{number} is negative", where, fix)
    return number


def _short(value: Any, limit: int = 40) -> str:
    """A repr cut to one short line (ids and values come from files of any size)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return "a very large integer"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _object(value: Any, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise _fail(f"expected an object, got {type(value).__name__}", where, "write {...}")
    return value


# ----- graphs ----------------------------------------------------------------------------------
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
    >>> g.n, g.devices[0].memory, g.edge_pairs
    (2, 1024, ((0, 1),))
    """
    try:
        return _graph_from_dict(doc)
    except GraphFormatError as exc:
        raise exc.with_path(str(path)) if path is not None else exc from None


def _graph_from_dict(doc: Any) -> Graph:
    doc = _object(doc, "top level")
    fmt = doc.get("format")
    if fmt != GRAPH_FORMAT:
        raise _fail(f"'format' is {fmt!r}", "top level", f'a graph file says "{GRAPH_FORMAT}"')
    if doc.get("version", 1) != 1:
        raise _fail(
            f"version {doc.get('version')!r} is not supported",
            "top level",
            "this program reads version 1",
        )
    notes = [f"unknown top-level field '{k}' ignored" for k in doc if k not in _GRAPH_FIELDS]
    devices = [_device(d, i) for i, d in enumerate(_get(doc, "devices", "top level", list))]
    links = [_link(x, i) for i, x in enumerate(_get(doc, "links", "top level", list, []))]
    raw_nodes = _get(doc, "nodes", "top level", list)
    if not raw_nodes:
        raise _fail("no nodes", "field 'nodes'", "add at least one node")
    nodes: list[Node] = []
    edges: list[Edge] = []
    for i, raw in enumerate(raw_nodes):
        node, inputs, node_notes = _node(raw, i, devices)
        nodes.append(node)
        edges.extend(Edge(source, node.id) for source in inputs)
        notes.extend(node_notes)
    edges.extend(_edge(x, i) for i, x in enumerate(_get(doc, "edges", "top level", list, [])))
    meta = _object(doc.get("meta", {}), "field 'meta'")
    name = _get(doc, "name", "top level", str, "untitled")
    total = sum(node.memory for node in nodes)
    if total > MAX_SIZE:
        raise _fail(
            f"the node sizes add up to {total} bytes",
            "field 'nodes'",
            f"all tensors together must be at most {MAX_SIZE} bytes (8 PiB)",
        )
    return make_graph(name, devices, nodes, edges, links, meta, notes)


def _device(raw: Any, i: int) -> Device:
    raw = _object(raw, f"devices[{i}]")
    name = _get(raw, "name", f"devices[{i}]", str)
    where = f"device '{name}'"
    optional = {}
    for key in ("peak_flops", "mem_bandwidth"):
        if key in raw:
            optional[key] = _number(raw[key], f"{where}, field '{key}'", "a positive number")
    return Device(
        name=name,
        kind=_get(raw, "kind", where, str, "cpu"),
        memory=_size(_get(raw, "memory", where, (int, float, str)), f"{where}, field 'memory'"),
        fixed_memory=_size(raw.get("fixed_memory", 0), f"{where}, field 'fixed_memory'"),
        **optional,
    )


def _link(raw: Any, i: int) -> Link:
    raw = _object(raw, f"links[{i}]")
    source = _get(raw, "from", f"links[{i}]", str)
    target = _get(raw, "to", f"links[{i}]", str)
    where = f"link {source} -> {target}"
    try:
        bandwidth = parse_bandwidth(_get(raw, "bandwidth", where, (int, float, str)))
    except ValueError as exc:
        raise _fail(
            str(exc).split("; ")[0],
            f"{where}, field 'bandwidth'",
            "give bytes per second or e.g. '12 GB/s'",
        ) from None
    latency = _number(raw.get("latency_ms", 0.0), f"{where}, field 'latency_ms'", "ms >= 0")
    return Link(source, target, bandwidth, latency)


def _node(raw: Any, i: int, devices: list[Device]) -> tuple[Node, list[str], list[str]]:
    raw = _object(raw, f"nodes[{i}]")
    node_id = _get(raw, "id", f"nodes[{i}]", str)
    where = f"node '{node_id}'"
    memory = _size(_get(raw, "memory", where, (int, float, str)), f"{where}, field 'memory'")
    kind = _get(raw, "kind", where, str, "other")
    if kind not in NODE_KINDS:
        raise _fail(
            f"unknown kind {kind!r}",
            f"{where}, field 'kind'",
            f"use one of {', '.join(NODE_KINDS)}",
        )
    flops = raw.get("flops")
    bytes_accessed = raw.get("bytes_accessed")
    if flops is not None:
        flops = _number(flops, f"{where}, field 'flops'", "a number >= 0")
    if bytes_accessed is not None:
        bytes_accessed = _number(bytes_accessed, f"{where}, field 'bytes_accessed'", ">= 0")
    cost = _cost(raw, where, devices, flops, bytes_accessed)
    inputs = _get(raw, "inputs", where, list, [])
    for j, source in enumerate(inputs):
        if not isinstance(source, str):
            raise _fail(f"inputs[{j}] is {type(source).__name__}", where, "inputs are node ids")
    extra = {k: v for k, v in raw.items() if k not in _NODE_FIELDS}
    node = Node(
        id=node_id,
        memory=memory,
        cost=cost,
        kind=kind,
        op=_get(raw, "op", where, str, ""),
        of=_get(raw, "of", where, str, None),
        flops=flops,
        bytes_accessed=bytes_accessed,
        extra=extra,
    )
    return node, inputs, []


def _cost(raw: Mapping, where: str, devices: list[Device], flops, bytes_accessed) -> dict:
    if "cost" not in raw:
        roofline = _roofline(devices, flops, bytes_accessed)
        if roofline:
            return roofline
        raise _fail(
            "missing field 'cost'",
            where,
            "give milliseconds per device, or 'flops' and devices with 'peak_flops'",
        )
    cost = _object(raw["cost"], f"{where}, field 'cost'")
    names = {d.name for d in devices}
    result = {}
    for device, ms in cost.items():
        if device not in names:
            raise _fail(
                f"unknown device {device!r}",
                f"{where}, field 'cost'",
                f"devices are: {', '.join(sorted(names))}",
            )
        result[device] = _number(ms, f"{where}, cost '{device}'", "costs are milliseconds >= 0")
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
            raise _fail('a short edge must be ["from", "to"]', where, "write two node ids")
        return Edge(raw[0], raw[1])
    raw = _object(raw, where)
    source = _get(raw, "from", where, str)
    target = _get(raw, "to", where, str)
    overrides = _object(raw.get("transfer_ms", {}), f"edge {source} -> {target}, 'transfer_ms'")
    checked = {
        key: _number(ms, f"edge {source} -> {target}, '{key}'", "milliseconds >= 0")
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
        entry["cost"] = dict(node.cost)
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
    entry: dict[str, Any] = {"name": device.name, "kind": device.kind, "memory": device.memory}
    if device.fixed_memory:
        entry["fixed_memory"] = device.fixed_memory
    for key in ("peak_flops", "mem_bandwidth"):
        if getattr(device, key) is not None:
            entry[key] = getattr(device, key)
    return entry


# ----- files -------------------------------------------------------------------------------------
def read_json(path: str | os.PathLike, error: type[GraphFormatError] = GraphFormatError) -> Any:
    """Parse a JSON file, turning every way it can fail into a format error naming the place.

    Only regular files are read (a FIFO would block, ``/dev/zero`` never ends), at most
    :data:`MAX_FILE_BYTES`; NaN, Infinity, floats out of range, integers of more than 300
    digits and nesting deeper than :data:`MAX_DEPTH` are refused.
    """
    name = str(path)
    data = _read_regular_file(path, error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise error("not a UTF-8 text file", path=name, fix="save it as UTF-8 JSON") from None
    try:
        doc = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_checked_float,
            parse_int=_checked_int,
        )
    except json.JSONDecodeError as exc:
        raise error(
            exc.msg,
            path=name,
            where=f"line {exc.lineno}, column {exc.colno}",
            fix="fix the JSON syntax there",
        ) from None
    except _BadNumber as exc:
        raise error(exc.what, path=name, where=_locate(text, exc.token), fix=exc.fix) from None
    except RecursionError:
        too_deep = True  # the parser's own recursion limit
    else:
        too_deep = _too_deep(doc)
    if too_deep:
        raise error(
            f"nested more than {MAX_DEPTH} levels deep",
            path=name,
            fix="graph and schedule files need about 5 levels",
        )
    return doc


class _BadNumber(ValueError):
    """A number JSON should not hold, found while parsing (the caller adds the line)."""

    def __init__(self, token: str, what: str, fix: str):
        super().__init__(what)
        self.token, self.what, self.fix = token, what, fix


def _refuse_constant(token: str) -> float:
    raise _BadNumber(token, f"{token} is not a JSON number", "write a finite number")


def _checked_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _BadNumber(token, f"{token[:30]} is out of range", "write a number below 1e308")
    return value


def _checked_int(token: str) -> int:
    if len(token.lstrip("-")) > _MAX_INT_DIGITS:
        digits = len(token.lstrip("-"))
        raise _BadNumber(token, f"an integer of {digits} digits", "write a smaller number")
    return int(token)


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)')


def _locate(text: str, token: str) -> str:
    """``line L, column C`` of the first ``token`` outside a string (the error path only)."""
    for match in _TOKEN.finditer(text):
        if match.group(1) == token:
            pos = match.start()
            line = text.count("\n", 0, pos) + 1
            column = pos - text.rfind("\n", 0, pos)
            return f"line {line}, column {column}"
    return ""


def _too_deep(doc: Any) -> bool:
    """Whether ``doc`` nests deeper than :data:`MAX_DEPTH` (iteratively: no recursion)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _read_regular_file(path: str | os.PathLike, error: type[GraphFormatError]) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_FILE_BYTES` (never blocks)."""
    name = str(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise error(
                "not a regular file (a folder, device or pipe)", path=name, fix="give a JSON file"
            )
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open does not block.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise error("not a regular file", path=name, fix="give a JSON file")
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise error(exc.strerror or str(exc), path=name, fix="check the path") from None
    if len(data) > MAX_FILE_BYTES:
        raise error(
            f"larger than {format_size(MAX_FILE_BYTES)}",
            path=name,
            fix="graph and schedule files are far smaller; is this the right file?",
        )
    return data


def load_graph(path: str | os.PathLike) -> Graph:
    """Read a ``*.graph.json`` file.

    Raises
    ------
    GraphFormatError
        On unreadable files, JSON syntax errors and any invalid field.
    """
    return graph_from_dict(read_json(path), path)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so that a crash or a
    full disk never leaves a half-written file behind.

    A symlink is written through (its target is replaced, the link stays); an existing file
    without write permission is refused, as editors do; the folder is synced after the rename
    so the new name survives a power cut; temporary files that an earlier crash left next to
    the target are removed.

    Raises
    ------
    FileWriteError
        An :class:`OSError` naming the file, what went wrong and what to do.
    """
    target = Path(os.path.realpath(path))  # through symlinks: replace the file, keep the link
    _refuse_read_only(target, str(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _write_error(str(path), exc) from None
    try:
        os.chmod(tmp, _file_mode(target))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, FileWriteError):
            raise _write_error(str(path), exc) from None
        raise
    _sync_folder(target.parent)
    _remove_stale_temps(target)


def _refuse_read_only(target: Path, name: str) -> None:
    try:
        mode = target.stat().st_mode
    except OSError:
        return  # a new file
    if not stat.S_ISREG(mode):
        raise FileWriteError(name, "not a regular file", "choose a file name")
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise FileWriteError(
            name, "the file is read-only", "save under another name, or make it writable first"
        )


def _write_error(name: str, exc: OSError) -> FileWriteError:
    reason = exc.strerror or str(exc)
    fixes = {
        errno.ENOSPC: "free some disk space and save again",
        errno.EACCES: "choose a folder you can write to",
        errno.EROFS: "the disk is read-only; choose another folder",
        errno.ENOENT: "the folder does not exist; choose another",
    }
    fix = fixes.get(exc.errno, "") if exc.errno is not None else ""
    return FileWriteError(name, f"could not write: {reason}", fix)


def _sync_folder(folder: Path) -> None:
    """fsync the folder, so that the rename itself is on disk (not every system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        logger.debug("could not sync folder %s: %s", folder, exc)
    finally:
        os.close(fd)


def _remove_stale_temps(target: Path) -> None:
    """Remove this writer's temporary files for ``target`` that a crash left behind.

    Only names this writer makes (``.NAME.XXXXXXXX.tmp``) older than :data:`STALE_TEMP_SECONDS`
    are removed: a younger one may belong to a save in progress in another process.
    """
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[A-Za-z0-9_]{{8}}\.tmp")
    cutoff = time.time() - STALE_TEMP_SECONDS
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        if not pattern.fullmatch(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                logger.info("removed %s, left by an interrupted save", entry.path)
        except OSError as exc:
            logger.debug("could not remove %s: %s", entry.path, exc)


def _file_mode(target: Path) -> int:
    """Keep an existing file's permissions; give a new one the umask's default."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def dumps_json(doc: Any, path: str | os.PathLike = "<document>") -> str:
    """``doc`` as indented JSON text; NaN and Infinity are refused (JSON has neither).

    Raises
    ------
    FileWriteError
        Naming ``path`` and the place of the first non-finite number.
    """
    try:
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"
    except ValueError:
        where = _non_finite_place(doc) or "a number"
        raise FileWriteError(
            str(path),
            f"{where} is not a finite number, which JSON cannot hold",
            "nothing was written; this is a bug, please report it",
        ) from None


def write_json(doc: Any, path: str | os.PathLike) -> None:
    """Write ``doc`` as JSON to ``path`` atomically (see :func:`dumps_json`)."""
    atomic_write_text(path, dumps_json(doc, path))


def _non_finite_place(doc: Any) -> str | None:
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, place = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"'{place}' ({value})" if place else str(value)
        if isinstance(value, dict):
            stack.extend((v, f"{place}.{k}" if place else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{place}[{i}]") for i, v in enumerate(value))
    return None


def save_graph(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``graph`` to ``path`` atomically."""
    write_json(graph_to_dict(graph), path)


# ----- schedules ---------------------------------------------------------------------------------
def schedule_from_dict(doc: Any, graph: Graph, path: str | os.PathLike | None = None) -> Schedule:
    """Build a :class:`Schedule` for ``graph`` from a parsed schedule document.

    Only names are checked here (known nodes and devices, well-formed fields); whether the
    schedule obeys the execution rules is the simulator's job.
    """
    try:
        return _schedule_from_dict(doc, graph)
    except GraphFormatError as exc:
        err = ScheduleFormatError(exc.what, where=exc.where, fix=exc.fix)
        raise err.with_path(str(path)) if path is not None else err from None


def _schedule_from_dict(doc: Any, graph: Graph) -> Schedule:
    doc = _object(doc, "top level")
    if doc.get("format") != SCHEDULE_FORMAT:
        raise _fail(
            f"'format' is {doc.get('format')!r}",
            "top level",
            f'a schedule file says "{SCHEDULE_FORMAT}"',
        )
    budgets = {}
    for name, value in _object(doc.get("budgets", {}), "field 'budgets'").items():
        _known_device(graph, name, "field 'budgets'")
        budgets[name] = _size(value, f"budgets, device '{name}'")
    stages = tuple(
        _stage(raw, t, graph) for t, raw in enumerate(_get(doc, "stages", "top level", list))
    )
    solver = _solver_info(doc["solver"]) if "solver" in doc else None
    return Schedule(_get(doc, "graph", "top level", str, graph.name), budgets, stages, solver)


def _known_device(graph: Graph, name: Any, where: str) -> str:
    if not isinstance(name, str):
        raise _fail(f"{_short(name)} is not a device name", where, "write a device name")
    if name not in graph.device_index:
        raise _fail(
            f"unknown device {_short(name)}",
            where,
            f"devices are: {', '.join(graph.device_index)}",
        )
    return name


def _known_node(graph: Graph, node: Any, where: str) -> str:
    if not isinstance(node, str):
        raise _fail(f"{_short(node)} is not a node id", where, "write a node id (a string)")
    if node not in graph.index:
        raise _fail(f"unknown node {_short(node)}", where, "use a node id of the graph")
    return node


def _stage(raw: Any, t: int, graph: Graph) -> Stage:
    where = f"stage {t}"
    raw = _object(raw, where)
    ops = []
    for j, op in enumerate(_get(raw, "ops", where, list)):
        op = _object(op, f"{where}, ops[{j}]")
        node = _known_node(graph, _get(op, "node", f"{where}, ops[{j}]", str), f"{where}")
        device = _known_device(graph, _get(op, "device", f"{where}, ops[{j}]", str), where)
        inputs = _object(op.get("inputs", {}), f"{where}, node '{node}', 'inputs'")
        for source, src_device in inputs.items():
            _known_node(graph, source, f"{where}, node '{node}', 'inputs'")
            _known_device(graph, src_device, f"{where}, node '{node}', input '{source}'")
        ops.append(Operation(node, device, dict(inputs)))
    keep, copies = {}, {}
    for device, ids in _object(raw.get("keep", {}), f"{where}, 'keep'").items():
        _known_device(graph, device, f"{where}, 'keep'")
        if not isinstance(ids, list):
            raise _fail(
                "keep lists must be lists of node ids",
                f"{where}, keep '{device}'",
                'write e.g. "keep": {"gpu": ["fc1"]}',
            )
        place = f"{where}, keep '{device}'"
        kept, copied = set(), {}
        for x in ids:
            if isinstance(x, Mapping):
                node, source = _offload_entry(graph, x, place)
                copied[node] = source
            else:
                kept.add(_known_node(graph, x, place))
        keep[device], copies[device] = frozenset(kept), copied
    return Stage(tuple(ops), keep, copies)


def _offload_entry(graph: Graph, raw: Mapping, where: str) -> tuple[str, str]:
    """A keep entry ``{"id": NODE, "from": DEVICE}``: NODE copied from DEVICE and kept here
    (offloading, docs/spec-notes.md)."""
    fix = 'write an offloaded tensor as {"id": "fc1", "from": "gpu"}'
    unknown = sorted(set(raw) - {"id", "from"})
    if unknown or "id" not in raw or "from" not in raw:
        what = f"unknown key {_short(unknown[0])}" if unknown else "needs both 'id' and 'from'"
        raise _fail(f"an offloading entry {what}", where, fix)
    node = _known_node(graph, raw["id"], where)
    return node, _known_device(graph, raw["from"], f"{where}, '{node}'")


def _solver_info(raw: Any) -> SolverInfo:
    raw = _object(raw, "field 'solver'")
    status_text = raw.get("status", "optimal")
    try:
        status = SolveStatus(status_text)
    except (ValueError, TypeError):
        names = ", ".join(s.value for s in SolveStatus)
        raise _fail(
            f"unknown status {_short(status_text)}", "field 'solver'", f"use {names}"
        ) from None

    def num(key: str) -> float | None:
        value = raw.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return _number(value, f"field 'solver', '{key}'", "a finite number >= 0, or null")

    def count(key: str) -> int:
        value = num(key) or 0.0
        if value > MAX_SIZE or value != int(value):
            raise _fail(f"{value!r} is not a count", f"field 'solver', '{key}'", "a whole number")
        return int(value)

    bound, objective = raw.get("bound"), raw.get("objective")
    return SolverInfo(
        method=str(raw.get("method", ""))[:200],
        backend=str(raw.get("backend", ""))[:200],
        status=status,
        objective=_signed(objective, "objective"),
        bound=_signed(bound, "bound"),
        gap=_signed(raw.get("gap"), "gap"),
        seconds=num("seconds") or 0.0,
        variables=count("variables"),
        constraints=count("constraints"),
    )


def _signed(value: Any, key: str) -> float | None:
    """An objective or bound: any finite number (a bound may be negative), or None."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    where = f"field 'solver', '{key}'"
    try:
        number = float(value)
    except OverflowError:
        raise _fail("the number is too large for a float", where, "a finite number") from None
    if not math.isfinite(number):
        raise _fail(f"{number!r} is not a finite number", where, "a finite number, or null")
    return number


def schedule_to_dict(schedule: Schedule, summary: Mapping[str, Any] | None = None) -> dict:
    """The schedule as a document; ``summary`` (derived numbers) is written but never read."""
    stages = []
    devices = sorted({op.device for _, op in schedule.operations} | set(schedule.budgets))
    for stage in schedule.stages:
        ops = []
        for op in stage.ops:
            entry: dict[str, Any] = {"node": op.node, "device": op.device}
            remote = {k: v for k, v in op.inputs.items() if v != op.device}
            if remote:
                entry["inputs"] = remote
            ops.append(entry)
        keep_devices = sorted(set(devices) | set(stage.keep))
        keep: dict[str, list] = {}
        for d in keep_devices:
            copied = stage.copied_to(d)
            keep[d] = sorted(stage.kept_on(d) - set(copied))
            keep[d] += [{"id": x, "from": copied[x]} for x in sorted(copied)]
        stages.append({"ops": ops, "keep": keep})
    doc: dict[str, Any] = {
        "format": SCHEDULE_FORMAT,
        "version": 1,
        "graph": schedule.graph,
        "budgets": dict(schedule.budgets),
    }
    if schedule.solver is not None:
        doc["solver"] = _solver_to_dict(schedule.solver)
    doc["stages"] = stages
    if summary is not None:
        doc["summary"] = _finite_tree(dict(summary))
    return doc


def _solver_to_dict(info: SolverInfo) -> dict[str, Any]:
    return {
        "method": info.method,
        "backend": info.backend,
        "status": info.status.value,
        "objective": _finite_or_none(info.objective),
        "bound": _finite_or_none(info.bound),
        "gap": _finite_or_none(info.gap),
        "seconds": round(info.seconds, 3) if math.isfinite(info.seconds) else None,
        "variables": info.variables,
        "constraints": info.constraints,
    }


def _finite_or_none(value: float | None) -> float | None:
    """An infinite gap (a bound of 0) or a missing bound is written as null, never NaN."""
    return value if value is not None and math.isfinite(value) else None


def _finite_tree(value: Any) -> Any:
    """``value`` with non-finite floats as None: the summary is derived, never read back, and
    a sum of costs near 1e308 overflows; the schedule itself must still be saved."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_tree(v) for v in value]
    return value


def load_schedule(path: str | os.PathLike, graph: Graph) -> Schedule:
    """Read a ``*.schedule.json`` file for ``graph``."""
    return schedule_from_dict(read_json(path, ScheduleFormatError), graph, path)


def save_schedule(
    schedule: Schedule, path: str | os.PathLike, summary: Mapping[str, Any] | None = None
) -> None:
    """Write ``schedule`` to ``path`` atomically."""
    write_json(schedule_to_dict(schedule, summary), path)

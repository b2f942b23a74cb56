"""Schedule documents (``*.schedule.json``, docs/formats.md) for a given graph: read and write.

Reading checks names only (known nodes and devices, well-formed fields) and raises
:class:`ScheduleFormatError`; whether a schedule obeys the execution rules is the simulator's job.
The ``summary`` written beside a schedule is derived, never read back, and holds no NaN.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from solver.document.fields import (
    field_error,
    get_field,
    number_field,
    object_field,
    short_repr,
    size_field,
)
from solver.document.graph import Graph
from solver.document.json_io import read_json, write_json
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.document.units import MAX_SIZE
from solver.errors import GraphFormatError, ScheduleFormatError
from solver.status import SolveStatus

__all__ = [
    "SCHEDULE_FORMAT",
    "load_schedule",
    "save_schedule",
    "schedule_from_dict",
    "schedule_to_dict",
]

SCHEDULE_FORMAT = "remat-schedule"


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
    doc = object_field(doc, "top level")
    if doc.get("format") != SCHEDULE_FORMAT:
        raise field_error(
            f"'format' is {doc.get('format')!r}",
            "top level",
            f'a schedule file says "{SCHEDULE_FORMAT}"',
        )
    budgets = {}
    for name, value in object_field(doc.get("budgets", {}), "field 'budgets'").items():
        _known_device(graph, name, "field 'budgets'")
        budgets[name] = size_field(value, f"budgets, device '{name}'")
    stages = tuple(
        _stage(raw, t, graph) for t, raw in enumerate(get_field(doc, "stages", "top level", list))
    )
    solver = _solver_info(doc["solver"]) if "solver" in doc else None
    return Schedule(get_field(doc, "graph", "top level", str, graph.name), budgets, stages, solver)


def _known_device(graph: Graph, name: Any, where: str) -> str:
    if not isinstance(name, str):
        raise field_error(f"{short_repr(name)} is not a device name", where, "write a device name")
    if name not in graph.device_index:
        raise field_error(
            f"unknown device {short_repr(name)}",
            where,
            f"devices are: {', '.join(graph.device_index)}",
        )
    return name


def _known_node(graph: Graph, node: Any, where: str) -> str:
    if not isinstance(node, str):
        raise field_error(
            f"{short_repr(node)} is not a node id", where, "write a node id (a string)"
        )
    if node not in graph.index:
        raise field_error(f"unknown node {short_repr(node)}", where, "use a node id of the graph")
    return node


def _stage(raw: Any, t: int, graph: Graph) -> Stage:
    where = f"stage {t}"
    raw = object_field(raw, where)
    ops = []
    for j, op in enumerate(get_field(raw, "ops", where, list)):
        op = object_field(op, f"{where}, ops[{j}]")
        node = _known_node(graph, get_field(op, "node", f"{where}, ops[{j}]", str), f"{where}")
        device = _known_device(graph, get_field(op, "device", f"{where}, ops[{j}]", str), where)
        inputs = object_field(op.get("inputs", {}), f"{where}, node '{node}', 'inputs'")
        for source, src_device in inputs.items():
            _known_node(graph, source, f"{where}, node '{node}', 'inputs'")
            _known_device(graph, src_device, f"{where}, node '{node}', input '{source}'")
        ops.append(Operation(node, device, dict(inputs)))
    keep, copies = {}, {}
    for device, ids in object_field(raw.get("keep", {}), f"{where}, 'keep'").items():
        _known_device(graph, device, f"{where}, 'keep'")
        if not isinstance(ids, list):
            raise field_error(
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
        what = f"unknown key {short_repr(unknown[0])}" if unknown else "needs both 'id' and 'from'"
        raise field_error(f"an offloading entry {what}", where, fix)
    node = _known_node(graph, raw["id"], where)
    return node, _known_device(graph, raw["from"], f"{where}, '{node}'")


def _solver_info(raw: Any) -> SolverInfo:
    raw = object_field(raw, "field 'solver'")
    status_text = raw.get("status", "optimal")
    try:
        status = SolveStatus(status_text)
    except (ValueError, TypeError):
        names = ", ".join(s.value for s in SolveStatus)
        raise field_error(
            f"unknown status {short_repr(status_text)}", "field 'solver'", f"use {names}"
        ) from None

    def num(key: str) -> float | None:
        value = raw.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return number_field(value, f"field 'solver', '{key}'", "a finite number >= 0, or null")

    def count(key: str) -> int:
        value = num(key) or 0.0
        if value > MAX_SIZE or value != int(value):
            raise field_error(
                f"{value!r} is not a count", f"field 'solver', '{key}'", "a whole number"
            )
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
        raise field_error("the number is too large for a float", where, "a finite number") from None
    if not math.isfinite(number):
        raise field_error(f"{number!r} is not a finite number", where, "a finite number, or null")
    return number


def schedule_to_dict(schedule: Schedule, summary: Mapping[str, Any] | None = None) -> dict:
    """The schedule as a document; ``summary`` (derived numbers) is written but never read."""
    stages = []
    devices = sorted({op.device for _, op in schedule.operations} | set(schedule.memory_limits))
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
        "budgets": dict(schedule.memory_limits),
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

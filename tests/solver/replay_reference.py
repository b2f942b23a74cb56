"""An independent replay of a schedule, written from docs/model.md §2 alone (issue 22).

It never calls the simulator. It works on plain graph and schedule documents (sizes in bytes, as
:func:`~solver.document.graph_io.graph_to_dict` and ``schedule_to_dict`` write them) and keeps
the set of tensors resident on each device; for each operation it adds what that operation
holds while it runs (its output, its copied inputs, its workspace; docs/spec-notes.md,
"Workspace memory"), and the end-of-stage offloading phase of docs/spec-notes.md,
"Offloading". Memory in use only grows by an operation or an offloading copy, so a device's
peak is the largest of those states: the replay needs no clock, and a zero-cost operation is
no different from any other. The property tests (``test_peaks_replay.py``) and the
hostile-input kit (``bench/hostile.py``) judge the simulator by it.
"""

from __future__ import annotations

import math

__all__ = ["Invalid", "replay"]


class Invalid(Exception):
    """The independent replay found a broken rule."""


# ----- the independent replay ----------------------------------------------------------------
def replay(graph_doc: dict, schedule_doc: dict) -> tuple[bool, dict[str, int], float, list[int]]:
    """(valid, peak bytes per device, total ms, memory of each operation) by model.md §2.

    Examples
    --------
    >>> graph = {"devices": [{"name": "cpu", "memory": 1000}], "nodes": [
    ...     {"id": "a", "memory": 100, "cost": {"cpu": 1}},
    ...     {"id": "b", "memory": 100, "cost": {"cpu": 0}, "inputs": ["a"]},
    ...     {"id": "c", "memory": 1, "cost": {"cpu": 1}, "inputs": ["b"]}]}
    >>> schedule = {"stages": [
    ...     {"ops": [{"node": "a", "device": "cpu"}], "keep": {"cpu": ["a"]}},
    ...     {"ops": [{"node": "b", "device": "cpu"}], "keep": {"cpu": ["b"]}},
    ...     {"ops": [{"node": "c", "device": "cpu"}]}]}
    >>> replay(graph, schedule)
    (True, {'cpu': 200}, 2.0, [100, 200, 101])
    """
    peaks = {d["name"]: 0 for d in graph_doc["devices"]}
    memories: list[int] = []
    try:
        total = _replay(graph_doc, schedule_doc, peaks, memories)
    except Invalid:
        return False, peaks, math.nan, memories
    return True, peaks, total, memories


def _replay(graph_doc: dict, schedule_doc: dict, peaks: dict, memories: list) -> float:
    nodes = graph_doc["nodes"]
    order = {node["id"]: k for k, node in enumerate(nodes)}
    size = {node["id"]: node["memory"] for node in nodes}
    work = {node["id"]: node.get("workspace", 0) for node in nodes}
    inputs = {node["id"]: node.get("inputs", []) for node in nodes}
    devices = [d["name"] for d in graph_doc["devices"]]
    limits = {d["name"]: d["memory"] for d in graph_doc["devices"]}
    limits.update(schedule_doc.get("budgets", {}))
    fixed = {d["name"]: d.get("fixed_memory", 0) for d in graph_doc["devices"]}
    budget = {d: max(limits[d] - fixed[d], 0) for d in devices}  # the activation budget
    links = {(x["from"], x["to"]): x for x in graph_doc.get("links", [])}
    overrides = {(e["from"], e["to"]): e["transfer_ms"] for e in graph_doc.get("edges", [])}
    live: dict[str, set[str]] = {d: set() for d in devices}
    total = 0.0
    stages = schedule_doc["stages"]
    if len(stages) != len(nodes):
        raise Invalid("one stage per node")
    for t, stage in enumerate(stages):
        ops = stage["ops"]
        keys = [(order[op["node"]], devices.index(op["device"])) for op in ops]
        if keys != sorted(set(keys)) or any(k > t for k, _ in keys):
            raise Invalid("order or frontier")
        if sum(k == t for k, _ in keys) != 1:
            raise Invalid("frontier once")
        keep, copies = {d: set() for d in devices}, []
        for device, entries in stage.get("keep", {}).items():
            for entry in entries:
                if isinstance(entry, dict):
                    copies.append((entry["id"], entry["from"], device))
                    entry = entry["id"]
                keep[device].add(entry)
        hold = {d: keep[d] | {i for i, s, _ in copies if s == d} for d in devices}
        last = {}
        for p, op in enumerate(ops):
            if op["device"] not in nodes[order[op["node"]]]["cost"]:
                raise Invalid("no cost on the device")
            if set(op.get("inputs", {})) - set(inputs[op["node"]]):
                raise Invalid("reads a non-input")
            for i in inputs[op["node"]]:
                last[op.get("inputs", {}).get(i, op["device"]), i] = p
        start = {d: set(live[d]) for d in devices}
        computed = {d: set() for d in devices}
        for p, op in enumerate(ops):
            k, d = op["node"], op["device"]
            copied = 0
            for i in inputs[k]:
                source = op.get("inputs", {}).get(i, d)
                if i not in live[source]:
                    raise Invalid("input not resident")
                if source != d:
                    override = overrides.get((i, k), {}).get(f"{source}->{d}")
                    if i in live[d] or (override is None and (source, d) not in links):
                        raise Invalid("needless or impossible transfer")
                    copied += size[i]
                    link_ms = _link_ms(links[source, d], size[i]) if override is None else 0.0
                    total += override if override is not None else link_ms
            used = sum(size[x] for x in live[d]) + size[k] + copied + work[k]
            memories.append(used)
            if used > budget[d]:
                raise Invalid("memory")
            peaks[d] = max(peaks[d], used)
            total += nodes[order[k]]["cost"][d]
            live[d].add(k)
            computed[d].add(k)
            for i in inputs[k]:
                source = op.get("inputs", {}).get(i, d)
                if last[source, i] == p and i not in hold[source]:
                    live[source].discard(i)
        arriving = {(i, d) for i, _, d in copies}
        for d in devices:
            for i in keep[d]:
                here = i in start[d] or i in computed[d]
                if here == ((i, d) in arriving):
                    raise Invalid("keep without a way in, or a needless copy")
        if copies:
            for d in devices:
                live[d] &= hold[d]
            for i, s, d in sorted(copies, key=lambda c: (order[c[0]], devices.index(c[2]))):
                if s == d or i not in live[s] or (s, d) not in links:
                    raise Invalid("offload")
                live[d].add(i)
                used = sum(size[x] for x in live[d])
                if used > budget[d]:
                    raise Invalid("memory during the copies")
                peaks[d] = max(peaks[d], used)
                total += _link_ms(links[s, d], size[i])
        live = {d: set(keep[d]) for d in devices}
    return total


def _link_ms(link: dict, num_bytes: int) -> float:
    return link.get("latency_ms", 0.0) + 1000.0 * num_bytes / link["bandwidth"]

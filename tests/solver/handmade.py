"""Small hand-checkable graphs for the core tests, built through the public API."""

from __future__ import annotations

import copy

from solver.document.graph import Device, Edge, Graph, Link, Node, make_graph
from solver.document.schedule import Operation, Schedule, Stage

SPEC_EXAMPLE = {
    "format": "remat-graph",
    "version": 1,
    "name": "two-layer chain",
    "devices": [
        {"name": "cpu", "kind": "cpu", "memory": "16 GiB"},
        {"name": "gpu", "kind": "gpu", "memory": 4000000},
    ],
    "links": [
        {"from": "cpu", "to": "gpu", "bandwidth": "12 GB/s", "latency_ms": 0.01},
        {"from": "gpu", "to": "cpu", "bandwidth": "12 GB/s", "latency_ms": 0.01},
    ],
    "nodes": [
        {
            "id": "fc1",
            "op": "Gemm",
            "kind": "forward",
            "memory": 1000000,
            "cost": {"cpu": 1.0, "gpu": 10.0},
        },
        {
            "id": "fc2",
            "op": "Gemm",
            "kind": "forward",
            "memory": "4 MB",
            "cost": {"cpu": 10.0, "gpu": 1.0},
            "inputs": ["fc1"],
        },
    ],
    "edges": [{"from": "fc1", "to": "fc2", "transfer_ms": {"cpu->gpu": 3, "gpu->cpu": 8}}],
}
"""The example graph of the file format's specification, as a document."""


def broken_spec_example(edit) -> dict:
    """A copy of :data:`SPEC_EXAMPLE` after ``edit(doc)``."""
    doc = copy.deepcopy(SPEC_EXAMPLE)
    edit(doc)
    return doc


GRAPH_ERRORS = [
    (lambda d: d["nodes"][1].update(memory="-4 MiB"), r"node 'fc2', field 'memory'.*negative"),
    (lambda d: d["nodes"][1].update(inputs=["fc2"]), "self-loop"),
    (lambda d: d["nodes"][0].update(inputs=["fc2"]), "cycle: fc1 -> fc2 -> fc1"),
    (lambda d: d["nodes"][1].update(inputs=["nope"]), "unknown node 'nope'"),
    (lambda d: d["nodes"][0].update(cost={"tpu": 1}), r"node 'fc1', field 'cost'.*'tpu'"),
    (lambda d: d["nodes"][0].update(cost={"cpu": -1}), "negative"),
    (lambda d: d["nodes"][1].update(id="fc1"), "duplicate node id"),
    (lambda d: d["devices"].append({"name": "cpu", "memory": 1}), "duplicate device"),
    (lambda d: d["links"].append({"from": "cpu", "to": "npu", "bandwidth": 1}), "'npu'"),
    (lambda d: d["devices"][1].update(memory="lots"), "not a size"),
    (lambda d: d["edges"][0]["transfer_ms"].update({"cpu->cpu": 1}), "bad transfer key"),
    (lambda d: d.update(format="other"), "'format'"),
    (lambda d: d.update(nodes=[]), "no nodes"),
    (lambda d: d["nodes"][0].pop("memory"), "missing field 'memory'"),
    (lambda d: d["nodes"][0].update(kind="sideways"), "unknown kind"),
]
"""Edits of the spec example, each with words its error message must contain."""


def two_node_graph(cpu_to_gpu_ms: float | None = 3.0, budget: int = 10**6) -> Graph:
    """``a -> b``; ``a`` is cheap on the CPU (1 vs 10 ms), ``b`` on the GPU (10 vs 1 ms)."""
    devices = [Device("cpu", "cpu", budget), Device("gpu", "gpu", budget)]
    overrides = {"cpu->gpu": cpu_to_gpu_ms, "gpu->cpu": 8.0} if cpu_to_gpu_ms is not None else {}
    nodes = [Node("a", 100, {"cpu": 1.0, "gpu": 10.0}), Node("b", 100, {"cpu": 10.0, "gpu": 1.0})]
    return make_graph("two", devices, nodes, [Edge("a", "b", overrides)])


def fan_in_graph(gpu_budget: int, link: bool = True) -> Graph:
    """``a`` and ``b`` feed ``c``; every node costs 10 ms on the CPU and 1 ms on the GPU; each
    tensor is 1 byte and every copy 1 ms. With a GPU budget of 2, ``c`` (3 bytes with its
    inputs) cannot run on the GPU."""
    devices = [Device("cpu", "cpu", 100), Device("gpu", "gpu", gpu_budget)]
    links = [Link("cpu", "gpu", 1000.0, 0.0), Link("gpu", "cpu", 1000.0, 0.0)] if link else []
    nodes = [Node(x, 1, {"cpu": 10.0, "gpu": 1.0}) for x in "abc"]
    return make_graph("fan-in", devices, nodes, [Edge("a", "c"), Edge("b", "c")], links)


def offload_chain(link_ms: float, gpu_budget: int = 3, cpu_runs: bool = False) -> Graph:
    """``a -> b -> c -> d`` and ``a -> d``; sizes 1, 2, 1, 1 bytes; GPU costs 10, 1, 1, 1 ms.

    At a GPU budget of 3, ``a`` cannot stay on the GPU through stage ``c`` (a + b + c = 4
    bytes), so ``d`` needs ``a`` back: recompute it (10 ms, total 23) or offload it to the
    host and copy it back (two copies of 1 byte, ``link_ms`` each: total 13 + 2 link_ms).
    The host cannot run anything unless ``cpu_runs`` (then at 100 ms per node).
    """
    cpu = {"cpu": 100.0} if cpu_runs else {}
    nodes = [
        Node("a", 1, {"gpu": 10.0, **cpu}),
        Node("b", 2, {"gpu": 1.0, **cpu}),
        Node("c", 1, {"gpu": 1.0, **cpu}),
        Node("d", 1, {"gpu": 1.0, **cpu}),
    ]
    edges = [Edge("a", "b"), Edge("b", "c"), Edge("c", "d"), Edge("a", "d")]
    bandwidth = 1000.0 / link_ms  # bytes per second: 1 byte takes link_ms
    links = [Link("gpu", "cpu", bandwidth), Link("cpu", "gpu", bandwidth)]
    devices = [Device("cpu", "cpu", 100), Device("gpu", "gpu", gpu_budget)]
    return make_graph("offload chain", devices, nodes, edges, links)


def offloading_schedule() -> Schedule:
    """``a`` offloaded at the end of stage 1, copied back and kept at the end of stage 2."""
    keep = {"gpu": frozenset({"a"})}
    return Schedule(
        "offload chain",
        {},
        (
            Stage((Operation("a", "gpu"),), keep),
            Stage((Operation("b", "gpu"),), {"gpu": frozenset({"b"})}, {"cpu": {"a": "gpu"}}),
            Stage((Operation("c", "gpu"),), {"gpu": frozenset({"c"})}, {"gpu": {"a": "cpu"}}),
            Stage((Operation("d", "gpu"),)),
        ),
    )

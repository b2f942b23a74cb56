"""The bundled teaching graphs: a chain, a chain with skip connections, a diamond.

Small enough to solve in a second and to follow step by step, with a CPU that has room for
everything and a fast GPU whose memory is too small, so that the interesting trade-off
(recompute on the GPU, or move work and tensors to the CPU) shows at once. Regenerate with
``python -m solver.optimize.teaching --out resources/graphs``.

They are data, but they live on this floor and not in :mod:`solver.document`: each GPU's
memory is placed between the lower bound and the no-rematerialization peak of
:mod:`solver.optimize.bounds`, and the document imports nothing above it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from solver.document.generators import cpu_gpu_devices
from solver.document.graph import Edge, Graph, Node, make_graph
from solver.document.graph_io import save_graph
from solver.document.training import build_training_graph
from solver.optimize.bounds import lower_bound, no_remat_peak

__all__ = ["teaching_graphs", "main"]

MB = 1_000_000


def _forward(
    name: str,
    layers: list[tuple[str, str, int, float]],
    edges: list[tuple[str, str]],
    gpu_fraction: float,
) -> Graph:
    """Build a training graph from ``(id, op, MB, cpu ms)`` layers; the GPU runs 8x faster."""
    devices, links = cpu_gpu_devices(16 * 1024**3, 1)
    nodes = [
        Node(node_id, mb * MB, {"cpu": cpu_ms, "gpu": round(cpu_ms / 8, 3)}, op=op)
        for node_id, op, mb, cpu_ms in layers
    ]
    forward = make_graph(name, devices, nodes, [Edge(a, b) for a, b in edges], links)
    relu_like = {"Relu", "Sigmoid"}
    train = build_training_graph(forward, saves_output=lambda n: n.op in relu_like)
    low, peak = lower_bound(train, "gpu"), no_remat_peak(train)
    gpu = int(low + gpu_fraction * (peak - low))
    train = train.with_memory_limits({"gpu": gpu})
    meta = {
        "source": "solver/optimize/teaching.py (hand-made teaching graph)",
        "costs": "CPU ms chosen by hand; GPU = CPU / 8; backward = 2x forward",
        "gpu_memory": (
            f"lower bound {gpu_fraction:+.0%} of the gap to the no-rematerialization peak"
            + (" (the GPU alone cannot run every node)" if gpu_fraction < 0 else "")
        ),
    }
    return make_graph(name, train.devices, train.nodes, train.edges, train.links, meta)


def teaching_graphs() -> dict[str, Graph]:
    """The teaching graphs by file stem."""
    chain = _forward(
        "chain",
        [
            ("fc1", "Gemm", 8, 4.0),
            ("relu1", "Relu", 8, 0.5),
            ("fc2", "Gemm", 8, 4.0),
            ("relu2", "Relu", 8, 0.5),
            ("fc3", "Gemm", 2, 2.0),
        ],
        [("fc1", "relu1"), ("relu1", "fc2"), ("fc2", "relu2"), ("relu2", "fc3")],
        -0.3,
    )
    skip = _forward(
        "skip connections",
        [
            ("conv1", "Conv", 16, 6.0),
            ("conv2", "Conv", 8, 6.0),
            ("add1", "Add", 16, 0.5),
            ("conv3", "Conv", 8, 6.0),
            ("add2", "Add", 16, 0.5),
            ("fc", "Gemm", 1, 1.0),
        ],
        [
            ("conv1", "conv2"),
            ("conv1", "add1"),
            ("conv2", "add1"),
            ("add1", "conv3"),
            ("add1", "add2"),
            ("conv3", "add2"),
            ("add2", "fc"),
        ],
        0.3,
    )
    diamond = _forward(
        "diamond",
        [
            ("input", "Conv", 4, 2.0),
            ("left", "Conv", 12, 5.0),
            ("right", "Conv", 12, 5.0),
            ("join", "Concat", 8, 1.0),
        ],
        [("input", "left"), ("input", "right"), ("left", "join"), ("right", "join")],
        -0.3,
    )
    return {"chain": chain, "skip": skip, "diamond": diamond}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="resources/graphs", help="output folder")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stem, graph in teaching_graphs().items():
        save_graph(graph, out / f"{stem}.graph.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

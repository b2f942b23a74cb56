"""Benchmark the MIQP: model size, build and solve time, CBC and HiGHS side by side.

For the teaching graphs and layer-level VGG16 (or the bundled graphs named; ``all`` for every
one) and Checkmate's unit chains of 10, 20 and 40 layers, at budgets of 100%, 60% and 40% of
the no-rematerialization peak, with one device (the GPU, or the only one) and with two. On a
bundled CPU + GPU graph the budget limits the GPU (the host keeps its memory, as in XEngine's
experiments); on a unit chain it limits every device. Prints a table; takes minutes.

    .venv/bin/python bench/solve.py [--time-limit 120] [--graphs chain vgg16 | all] [--chains 10 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solver.document.examples import bundled_graphs  # noqa: E402
from solver.document.formats import load_graph  # noqa: E402
from solver.document.generators import unit_chain  # noqa: E402
from solver.document.graph import Device, Graph, Link  # noqa: E402
from solver.optimize.backends import available_backends  # noqa: E402
from solver.optimize.bounds import no_remat_peak  # noqa: E402
from solver.optimize.solve import SolveOptions, solve_xengine  # noqa: E402

COLUMNS = (
    "graph",
    "nodes",
    "dev",
    "budget",
    "backend",
    "vars",
    "cons",
    "build s",
    "solve s",
    "status",
    "objective",
    "gap",
)


def _chain(layers: int, two_devices: bool) -> Graph:
    if not two_devices:
        return unit_chain(layers)
    devices = [Device("cpu", "cpu", 10**6), Device("gpu", "gpu", 10**6)]
    graph = unit_chain(layers, devices=devices)
    from dataclasses import replace

    nodes = tuple(replace(n, cost={"cpu": 1.0, "gpu": 0.25}) for n in graph.nodes)
    links = (Link("cpu", "gpu", 4000.0, 0.0), Link("gpu", "cpu", 4000.0, 0.0))  # 0.25 ms/unit
    return replace(graph, nodes=nodes, links=links)


def _cases(args) -> list[tuple[str, Graph, str, list[str]]]:
    cases = []
    for name, path in bundled_graphs().items():
        if "all" not in args.graphs and name not in args.graphs:
            continue
        graph = load_graph(path)
        alone = "gpu" if "gpu" in graph.device_index else graph.devices[0].name
        limited = [d.name for d in graph.devices if d.kind != "cpu"] or [alone]
        cases.append((name, graph.with_devices([alone]), "1", [alone]))
        if graph.num_devices > 1:
            cases.append((name, graph, str(graph.num_devices), limited))
    for layers in args.chains:
        cases.append((f"unit chain {layers}", _chain(layers, False), "1", ["cpu"]))
        cases.append((f"unit chain {layers}", _chain(layers, True), "2", ["cpu", "gpu"]))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument(
        "--graphs",
        nargs="*",
        default=["chain", "skip", "diamond", "vgg16"],
        help="bundled graph names, or 'all'",
    )
    parser.add_argument("--chains", nargs="*", type=int, default=[10, 20, 40])
    parser.add_argument("--budgets", nargs="*", type=float, default=[100, 60, 40])
    args = parser.parse_args(argv)
    print(" | ".join(COLUMNS))
    print(" | ".join("---" for _ in COLUMNS))
    for name, graph, devices, limited in _cases(args):
        peak = no_remat_peak(graph)
        for percent in args.budgets:
            budgeted = graph.with_budgets(
                {d: graph.device(d).fixed_memory + int(percent / 100 * peak) for d in limited}
            )
            for backend in available_backends():
                _row(name, budgeted, devices, percent, backend, args.time_limit)
    return 0


def _row(name, graph, devices, percent, backend, time_limit) -> None:
    options = SolveOptions(backend=backend, time_limit_s=time_limit)
    started = time.perf_counter()
    result = solve_xengine(graph, options)
    wall = time.perf_counter() - started
    objective = f"{result.timeline.total_ms:.4g}" if result.ok else "-"
    gap = f"{result.gap:.1%}" if result.gap is not None and result.ok else "-"
    cells = (
        name,
        graph.n,
        devices,
        f"{percent:.0f}%",
        backend,
        result.variables,
        result.constraints,
        f"{result.build_seconds:.2f}",
        f"{wall - result.build_seconds:.2f}",
        result.status.value,
        objective,
        gap,
    )
    print(" | ".join(str(c) for c in cells), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())

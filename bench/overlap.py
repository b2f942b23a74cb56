"""Benchmark issue 12: serial optimum, its concurrent estimate, the overlap-optimized makespan,
the offloading optimum and the best single device, at GPU 60 % and 40 % of the no-remat peak.

Per graph and budget (the GPU limited, the host keeping its memory, as in bench/solve.py):

- ``serial``: the cheapest serial schedule among XEngine's MIQP with HiGHS within
  ``--time-limit`` (``optimal`` = proven; ``feasible`` = the limit hit, not proven), the greedy
  heterogeneous heuristic and the best single device (a time-limited MIQP can lose to it); the
  column names which one it is;
- ``conc.``: the concurrent makespan of that same schedule (solver/execution/concurrent.py);
- ``overlap``: the best concurrent makespan of solver/optimize/overlap.py's local search started
  from the serial schedule and from each other valid one above (``--overlap-time`` seconds
  each), with that schedule's own serial cost and the start it came from: a heuristic, never proven;
- ``miqp``: XEngine's MIQP alone (the paper's model), serial cost and status;
- ``offload``: XEngine's MIQP with offloading (``SolveOptions(offload=True)``,
  solver/optimize/offload.py; same solver and limit, with its neighbourhood search as the
  paper's model has, started from ``miqp``'s schedule instead of solving the paper's model
  first, so never dearer than it), its serial cost, status and number of offloading copies;
- ``ovl+off``: the overlap local search (``--overlap-time`` seconds) started from ``offload``'s
  schedule, which it may change with its offloading moves (copies retargeted, dropped or
  added), its makespan and serial cost;
- ``single``: the best single device, serial = concurrent: the best of Checkmate's model (HiGHS,
  same limit; ``optimal`` when proven), checkpoint-all and Chen's greedy on each device.

    .venv/bin/python bench/overlap.py [--time-limit 60] [--overlap-time 15] [--graphs vgg16 unet]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solver.cli.output import stdout_to_stderr
from solver.document.examples import bundled_graphs
from solver.document.graph import Graph
from solver.document.graph_io import load_graph
from solver.execution.concurrent import concurrent_makespan
from solver.optimize.backends import available_backends
from solver.optimize.bounds import no_remat_peak
from solver.optimize.methods import solve
from solver.optimize.overlap import optimize_overlap
from solver.optimize.solve import (
    SolveOptions,
    SolveResult,
    solve_offload,
)

GRAPHS = ("vgg16", "resnet18", "unet", "transformer")
SHARES = (0.6, 0.4)


def _budgeted(graph: Graph, share: float) -> Graph:
    """``gpu=60%`` as solver.cli.parse_budget reads it: fixed memory + share of the peak."""
    gpu = graph.device("gpu")
    return graph.with_memory_limits({"gpu": gpu.fixed_memory + int(share * no_remat_peak(graph))})


def _serial(graph: Graph, options: SolveOptions) -> tuple[SolveResult, SolveResult]:
    """The MIQP's result and greedy's; the first valid of the better is the serial figure."""
    return solve(graph, "xengine", options), solve(graph, "greedy")


def _single(graph: Graph, options: SolveOptions) -> SolveResult | None:
    results = []
    for device in graph.devices:
        for method in ("checkmate", "checkpoint-all", "chen-greedy"):
            result = solve(graph, f"{method}:{device.name}", options)
            if result.ok:
                results.append(result)
    return min(results, key=lambda r: r.timeline.total_ms, default=None)


def _offload(graph: Graph, options: SolveOptions, miqp: SolveResult) -> SolveResult:
    """The offloading model, started from the paper's model's result (never dearer than it)."""
    start = (miqp.schedule, miqp.timeline) if miqp.ok else None
    return solve_offload(graph, replace(options, offload=True), start=start)


def _offload_text(result: SolveResult) -> str:
    if not result.ok:
        return f"none ({result.status.value})"
    copies = sum(tr.offload for tr in result.timeline.transfers)
    return f"{result.timeline.total_ms:.2f} ({result.status.value}, {copies} copies)"


def _overlap_offload(graph: Graph, offload: SolveResult, args) -> str:
    """The overlap search from the offloading schedule: its makespan, serial cost, copies."""
    if not offload.ok:
        return "-"
    limit, seed = args.overlap_time, args.seed
    found = optimize_overlap(graph, offload.schedule, time_limit_s=limit, seed=seed)
    copies = sum(tr.offload for tr in found.layout.serial.transfers)
    return f"{found.makespan_ms:.2f} (serial {found.layout.serial_ms:.2f}, {copies} copies)"


def _label(result: SolveResult) -> str:
    if result.backend == "heuristic":
        return f"{result.method} (heuristic)"
    return f"{result.method} {result.status.value}"


def run_case(name: str, share: float, args) -> dict:
    graph = _budgeted(load_graph(bundled_graphs()[name]), share)
    options = SolveOptions(backend=args.solver, time_limit_s=args.time_limit)
    started = time.perf_counter()
    miqp, greedy = _serial(graph, options)
    single = _single(graph, options)
    valid = [r for r in (miqp, greedy, single) if r is not None and r.ok]
    row = {"graph": name, "budget": f"{share:.0%}"}
    if not valid:
        return {**row, "serial": f"none ({miqp.message or miqp.status.value})"}
    serial = min(valid, key=lambda r: r.timeline.total_ms)
    row["serial"] = f"{serial.timeline.total_ms:.2f} ({_label(serial)})"
    row["conc"] = f"{concurrent_makespan(graph, serial.schedule, serial.timeline):.2f}"
    runs = [
        optimize_overlap(graph, r.schedule, time_limit_s=args.overlap_time, seed=args.seed)
        for r in valid
    ]
    best = min(runs, key=lambda r: (r.makespan_ms, r.layout.serial_ms))
    start = valid[runs.index(best)].method
    row["overlap"] = f"{best.makespan_ms:.2f} (serial {best.layout.serial_ms:.2f}, from {start})"
    row["miqp"] = f"{miqp.timeline.total_ms:.2f} ({miqp.status.value})" if miqp.ok else "-"
    offload = _offload(graph, options, miqp)
    row["offload"] = _offload_text(offload)
    row["ovl+off"] = _overlap_offload(graph, offload, args)
    if single is None:
        row["single"] = "none fits"
    else:
        row["single"] = f"{single.timeline.total_ms:.2f} ({_label(single)})"
        row["speedup"] = (
            f"{single.timeline.total_ms / serial.timeline.total_ms:.2f}x / "
            f"{single.timeline.total_ms / best.makespan_ms:.2f}x"
        )
    row["seconds"] = f"{time.perf_counter() - started:.0f}"
    return row


COLUMNS = (
    "graph",
    "budget",
    "serial",
    "conc",
    "overlap",
    "miqp",
    "offload",
    "ovl+off",
    "single",
    "speedup",
    "seconds",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS))
    parser.add_argument("--time-limit", type=float, default=60.0, help="per MIQP solve (s)")
    parser.add_argument("--overlap-time", type=float, default=15.0, help="per local search (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--solver", default="highs" if "highs" in available_backends() else "cbc")
    args = parser.parse_args()
    print(
        f"serial: the cheapest of MIQP ({args.solver}, {args.time_limit:.0f} s), greedy and "
        "the best single device; miqp: XEngine's MIQP alone; offload: the MIQP with offloading "
        "(same solver and limit, started from miqp); ovl+off: overlap from offload's schedule; "
        f"overlap: local search, {args.overlap_time:.0f} s per start, seed {args.seed}; "
        "times in ms; speedup = best single device / serial, and / overlap makespan"
    )
    print(" | ".join(COLUMNS))
    for name in args.graphs:
        for share in SHARES:
            with stdout_to_stderr():  # HiGHS's banner stays out of the table
                row = run_case(name, share, args)
            print(" | ".join(row.get(c, "-") for c in COLUMNS), flush=True)


if __name__ == "__main__":
    main()

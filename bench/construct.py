"""Benchmark "a schedule always, at once" (issue 18) over many random graphs, not one seed.

``bench/scale.py --suite random`` solves one seed per size for a minute each; whether the
construction (:func:`solver.optimize.construct.construct_best`, what a solve shows before any
model is built) finds a schedule depends on the graph, so this bench runs only the
construction, on ``--seeds`` seeds of each size (Moccasin-like random layered graphs, mean layer
width 0.3 sqrt(n), one device) at each budget (a share of the schedule order's peak), with a
deadline of ``--deadline`` seconds (the issue's 10 s), and prints a table: how many got a
schedule, the slowest first schedule (what a solve shows first), the median cost of the
first schedules and of the construction's answer (the first placement repaired again by a
wider greed where that ends within the deadline; a 60 s solve allows it 18 s), the seeds
proven to have none (the backward search of :mod:`solver.optimize.fit_search` ran out of
states) and the seeds left without an answer.

    .venv/bin/python bench/construct.py                      # 100-1,000 nodes, 10 seeds (~3 min)
    .venv/bin/python bench/construct.py --sizes 100 --seeds 20 --budgets 80
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solver.cli import parse_budget  # noqa: E402
from solver.document.random_graphs import random_layered  # noqa: E402
from solver.optimize.construct import construct_best  # noqa: E402

RANDOM_WIDTH = 0.3
"""Mean layer width over sqrt(n), as in bench/scale.py's random suite."""


def run(n: int, seeds: int, percent: int, deadline: float) -> list[str]:
    """One table row: ``n`` nodes at ``percent`` % over ``seeds`` seeds."""
    firsts: list[float] = []
    costs: list[float] = []
    missing: list[str] = []
    proven: list[str] = []
    slowest = 0.0
    for seed in range(seeds):
        graph = random_layered(n, seed=seed, width=RANDOM_WIDTH * n**0.5)
        name, budget = parse_budget(graph, f"{graph.devices[0].name}={percent}%")
        graph = graph.with_memory_limits({name: budget})
        started = time.perf_counter()
        heard: list[tuple[float, float]] = []  # (seconds, ms) of the first schedule

        def first(built, started=started, heard=heard) -> None:
            heard.append((time.perf_counter() - started, built.timeline.total_ms))

        found = construct_best(
            graph,
            deadline=time.monotonic() + deadline,
            widen_until=time.monotonic() + deadline,
            on_schedule=first,
        )
        if found.timeline is not None:
            seconds, ms = heard[0] if heard else (time.perf_counter() - started, None)
            slowest = max(slowest, seconds)
            firsts.append(found.timeline.total_ms if ms is None else ms)
            costs.append(found.timeline.total_ms)
        elif found.infeasible:
            proven.append(str(seed))
        else:
            missing.append(str(seed))
    return [
        str(n),
        f"{percent}%",
        f"{len(costs)} of {seeds}",
        f"{slowest:.2f}",
        f"{statistics.median(firsts):,.0f}" if firsts else "-",
        f"{statistics.median(costs):,.0f}" if costs else "-",
        ", ".join(proven) or "-",
        ", ".join(missing) or "-",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 250, 500, 1000])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budgets", type=int, nargs="*", default=[80, 90])
    parser.add_argument("--deadline", type=float, default=10.0)
    args = parser.parse_args(argv)
    columns = [
        "nodes",
        "budget",
        "with a schedule",
        "slowest first s",
        "median ms, first",
        "median ms",
        "proven none",
        "unknown",
    ]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for n in args.sizes:
        for percent in args.budgets:
            print("| " + " | ".join(run(n, args.seeds, percent, args.deadline)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How far CP-SAT gets on the covering model (docs/solver.md, "Covering runs") by itself.

For each 100-node random layered graph of ``bench/scale.py``'s random suite, the covering run
counts for the best schedule cost known (``UPPER``: the incumbents ``bench/scale.py --suite
random --only 100: --time-limit 60`` ends with; any schedule's cost gives a valid model), the
model's size, and what CP-SAT, alone and without a hint, proves on it within the time limit.

    .venv/bin/python bench/covering.py                 # 60 s per graph, 2 threads (~4 min)
    .venv/bin/python bench/covering.py --time-limit 20 --only 2:90
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

UPPER = {
    (0, 80): 50725.0,
    (0, 90): 47495.0,
    (1, 80): 59407.0,
    (1, 90): 55252.0,
    (2, 80): 44350.0,
    (2, 90): 43702.0,
}
"""(seed, percent of the peak) -> the cost of a schedule found by the solver for it."""


def main() -> None:
    from scale import Case, load_case_graph

    from solver.optimize.backends.cpsat import run_cpsat
    from solver.optimize.covering import covering_runs, serve_pairs
    from solver.optimize.intervals import able_devices, build_interval_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="seed:percent, e.g. 0:80")
    args = parser.parse_args()
    print("| graph | U | instances | serving pairs | build s | CP-SAT | bound | s |")
    print("|---|---|---|---|---|---|---|---|")
    for (seed, percent), upper in UPPER.items():
        if args.only and f"{seed}:{percent}" not in args.only:
            continue
        graph = load_case_graph(Case(f"random:100:{seed}", percent, args.time_limit))
        counts = covering_runs(graph, upper, able_devices(graph))
        began = time.perf_counter()
        model = build_interval_model(graph, counts, covers=upper)
        built = time.perf_counter() - began
        began = time.perf_counter()
        outcome = run_cpsat(model.model, args.time_limit, threads=args.threads)
        solved = time.perf_counter() - began
        bound = "-" if outcome.bound is None else f"{min(outcome.bound / model.scale, upper):,.0f}"
        print(
            f"| 100:{seed} {percent}% | {upper:,.0f} | {int(counts.sum()):,} | "
            f"{serve_pairs(graph, counts):,} | {built:.1f} | {outcome.status.value} | {bound} | "
            f"{solved:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

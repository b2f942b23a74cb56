"""Benchmark sweeps: one worker against several, then the same sweep again from the store.

Sweeps the GPU budget of three networks (default: the teaching graphs chain, skip, diamond) in
8 steps from 100% to 10% of the no-rematerialization peak with XEngine, first with one worker
(in this process, no store), then with ``--jobs`` workers (no store: the speed-up compares like
with like), then into a fresh result store, then once more from that store. Prints the wall
time of each, the speed-up, and whether every point of every run equals the serial one (status
and schedule time). On a shared machine the speed-up is only as good as the free cores: time
the whole command several times, e.g. each
configuration alone (``--single``) with ``/usr/bin/time`` or a benchmark harness.

A solve may keep more than one core busy (the solver's neighbourhood search runs a second
backend beside the full model when ``SolveOptions.improve`` is on); ``--no-improve`` turns it
off, so that one solve is one core and the workers' scaling shows by itself.

    .venv/bin/python bench/sweep.py [--graphs chain skip diamond] [--steps 8] [--jobs 2]
                                    [--no-improve] [--single]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solver.document.examples import bundled_graphs
from solver.document.graph_io import load_graph
from solver.optimize.solve import SolveOptions
from solver.results.store import ResultStore
from solver.sweeps.sweep import SweepPoint, budget_steps, run_sweep, sweep_tasks


def _tasks(names: list[str], steps: int, options: SolveOptions) -> list:
    tasks: list = []
    for name in names:
        graph = load_graph(bundled_graphs()[name])
        fractions = budget_steps(1.0, 0.1, steps)
        tasks += sweep_tasks(graph, "gpu", fractions, ["xengine"], options, name, len(tasks))
    return tasks


def _answers(points: list[SweepPoint]) -> list[tuple]:
    return [(p.graph, p.fraction, p.result.status.value, p.total_ms) for p in points]


def _timed(label: str, run) -> tuple[list[SweepPoint], float]:
    started = time.perf_counter()
    points = run()
    seconds = time.perf_counter() - started
    stored = sum(p.from_store for p in points)
    print(f"{label:<28} {seconds:>8.2f} s  {len(points):>3} points  {stored:>3} from the store")
    return points, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=["chain", "skip", "diamond"])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--no-improve", action="store_true", help="one core per solve")
    parser.add_argument("--single", action="store_true", help="only one sweep, --jobs, no store")
    args = parser.parse_args()
    options = SolveOptions(time_limit_s=args.time_limit)
    if args.no_improve and "improve" in SolveOptions.__dataclass_fields__:
        options = replace(options, improve=False)
    tasks = _tasks(args.graphs, args.steps, options)
    print(f"{len(args.graphs)} networks x {args.steps} budgets = {len(tasks)} XEngine solves")
    if args.single:
        _timed(f"--jobs {args.jobs} (no store)", lambda: run_sweep(tasks, jobs=args.jobs))
        return 0
    serial, one = _timed("--jobs 1 (no store)", lambda: run_sweep(tasks, jobs=1))
    label = f"--jobs {args.jobs} (no store)"
    parallel, many = _timed(label, lambda: run_sweep(tasks, jobs=args.jobs))
    with tempfile.TemporaryDirectory() as folder:
        store = ResultStore(Path(folder) / "results.sqlite3")
        label = f"--jobs {args.jobs} (into a new store)"
        stored, _ = _timed(label, lambda: run_sweep(tasks, args.jobs, store))
        again, _ = _timed("again, from the store", lambda: run_sweep(tasks, args.jobs, store))
    solves = [p.result.seconds + p.result.build_seconds for p in serial]
    bound = sum(solves) / max(max(solves), sum(solves) / args.jobs)
    print(
        f"serial solves sum to {sum(solves):.2f} s, the longest {max(solves):.2f} s: "
        f"{args.jobs} workers can at best be {bound:.2f}x faster"
    )
    same = _answers(parallel) == _answers(serial) == _answers(stored) == _answers(again)
    print(f"speed-up {one / many:.2f}x; identical answers: {'yes' if same else 'NO'}")
    if not same:
        for a, b in zip(_answers(serial), _answers(parallel), strict=True):
            if a != b:
                print(f"  differs: {a} vs {b}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

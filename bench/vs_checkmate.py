"""Our solver against a plain PuLP/CBC Checkmate model, on one-device graphs: time to proof.

Checkmate (MLSys 2020) is the single-device MILP that XEngine extends. The plain model is the
paper's, written with PuLP's expression objects and solved by PuLP's own CBC call
(``tests/solver/checkmate_reference.py``, frontier-advancing, with the hazard rows); ours is
``solve_xengine`` with its default options (CBC on our formulation, the construction, the
relaxation bound, CP-SAT's search beside it where installed). Both get the same time limit
and one graph each at a time. For each case: the seconds to a *proven* optimum (``-`` if not
within the limit), both objectives, and the speed-up (plain seconds over ours; where only we
prove, at least the limit over ours).

Graphs: the bundled zoo networks on their GPU alone at 80 % and 60 % of the peak (Checkmate's
own networks are Keras models of the same families), and Moccasin-like random layered graphs.

    .venv/bin/python bench/vs_checkmate.py --time-limit 120
    .venv/bin/python bench/vs_checkmate.py --graphs vgg16 unet --budgets 80 --time-limit 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "solver"))

GRAPHS = ("vgg16", "vgg19", "resnet18", "unet", "mobilenetv2", "transformer", "random100")
BUDGETS = (80, 60)


def load(name: str, percent: int):
    from solver.cli import parse_budget
    from solver.document.examples import bundled_graphs
    from solver.document.graph_io import load_graph
    from solver.document.random_graphs import random_layered

    if name.startswith("random"):
        graph = random_layered(int(name[6:]), seed=0)
    else:
        graph = load_graph(bundled_graphs()[name])
        device = "gpu" if "gpu" in graph.device_index else graph.devices[0].name
        graph = graph.with_devices([device])
    device = graph.devices[0].name
    _, budget = parse_budget(graph, f"{device}={percent}%")
    return graph.with_memory_limits({device: budget})


def run(name: str, percent: int, who: str, limit: float) -> dict:
    """One solve in this process: status, objective and seconds."""
    graph = load(name, percent)
    if who == "plain":
        from checkmate_reference import checkmate_solve

        status, objective, seconds = checkmate_solve(
            graph, graph.devices[0].activation_budget, limit
        )
        return {"status": status, "objective": objective, "seconds": seconds}
    from solver.optimize.solve import SolveOptions, solve_xengine

    started = time.perf_counter()
    result = solve_xengine(graph, SolveOptions(time_limit_s=limit))
    return {
        "status": result.status.value,
        "objective": result.timeline.total_ms if result.ok else None,
        "seconds": time.perf_counter() - started,
    }


def child(name: str, percent: int, who: str, limit: float) -> dict:
    command = [sys.executable, __file__, "--run", json.dumps([name, percent, who, limit])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=limit * 3 + 120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "error: " + tail[:60], "objective": None, "seconds": limit}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="*", default=list(GRAPHS))
    parser.add_argument("--budgets", nargs="*", type=int, default=list(BUDGETS))
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        print(json.dumps(run(*json.loads(args.run))))
        return 0
    print("| graph | budget | plain s | plain ms | ours s | ours ms | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ratios, missed = [], []
    for name in args.graphs:
        for percent in args.budgets:
            plain = child(name, percent, "plain", args.time_limit)
            ours = child(name, percent, "ours", args.time_limit)
            p_ok, o_ok = plain["status"] == "optimal", ours["status"] == "optimal"
            ratio = None
            if p_ok and o_ok:
                ratio = plain["seconds"] / ours["seconds"]
            elif o_ok:
                ratio = args.time_limit / ours["seconds"]  # at least this
            if p_ok and not o_ok:
                missed.append(f"{name} {percent}%")
            if ratio is not None:
                ratios.append(ratio)

            def cells(record: dict, ok: bool) -> tuple[str, str]:
                ms = "-" if record["objective"] is None else f"{record['objective']:.3f}"
                return (f"{record['seconds']:.1f}" if ok else record["status"]), ms

            ps, pms = cells(plain, p_ok)
            os_, oms = cells(ours, o_ok)
            shown = "-" if ratio is None else f"{ratio:.1f}x" + ("" if p_ok else " (at least)")
            print(f"| {name} | {percent}% | {ps} | {pms} | {os_} | {oms} | {shown} |", flush=True)
    if ratios:
        print(f"\nmedian speed-up {statistics.median(ratios):.1f}x over {len(ratios)} cases")
    print("plain optima we did not prove: " + (", ".join(missed) if missed else "none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark the XEngine solver on the bundled networks: how fast it gets close, and what it proves.

For each case (a bundled graph, the GPU's memory at P% of the no-rematerialization peak as in
``--budget gpu=P%``, a backend) prints the model build time and the case's peak RSS, the time
to a schedule within 5% and 1% of the best known objective (``bench/best_known.json``), and
the final objective, proven bound, gap and status; with ``--root``, the LP relaxation of the
solved model (its root bound before cuts). Each case runs in a child process of its
own, so its RSS is its own and a crash stays contained.

    .venv/bin/python bench/solve.py              # the issue's target cases, CBC, 60 s (~5 min)
    .venv/bin/python bench/solve.py --full       # 8 graphs x GPU 100/80/60/40% x CBC and HiGHS
    .venv/bin/python bench/solve.py --graphs vgg16 resnet50 --budgets 60 40 --backends cbc \\
        --time-limit 30 [--no-improve] [--update-best] [--json results.jsonl]

The one-device Checkmate case (``vgg16`` on the GPU alone at 90%) is in both sets. Times are
wall-clock on this machine; compare runs with ``farm-bench`` when the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BEST_KNOWN = Path(__file__).with_name("best_known.json")
FULL_GRAPHS = (
    "chain",
    "vgg16",
    "vgg19",
    "resnet18",
    "resnet50",
    "unet",
    "vgg16-op",
    "resnet18-op",
)
FULL_BUDGETS = (100, 80, 60, 40)
TARGETS = (
    ("vgg16", 60, "cbc", ""),
    ("vgg16", 40, "cbc", ""),
    ("resnet50", 60, "cbc", ""),
    ("vgg16-op", 60, "cbc", ""),
    ("resnet18-op", 60, "cbc", ""),
    ("vgg16", 90, "cbc", "gpu"),
)
"""(graph, GPU %, backend, only device): the cases issue 8's targets are stated on."""

COLUMNS = (
    ("case", 22),
    ("nodes", 5),
    ("backend", 7),
    ("build s", 7),
    ("RSS MB", 6),
    ("to 5% s", 7),
    ("to 1% s", 7),
    ("objective", 10),
    ("bound", 10),
    ("root LP", 10),
    ("gap", 6),
    ("status", 10),
    ("wall s", 6),
)


@dataclass(frozen=True)
class Case:
    graph: str
    percent: int
    backend: str
    only: str = ""  # solve on this device alone (Checkmate's one-device model)

    @property
    def key(self) -> str:
        alone = f"/{self.only}" if self.only else ""
        return f"{self.graph}{alone}@{self.percent}"

    @property
    def label(self) -> str:
        alone = f" {self.only} only" if self.only else ""
        return f"{self.graph}{alone} {self.percent}%"


def root_lp(graph, time_limit: float) -> float | None:
    """The solved model's LP relaxation (integrality dropped), by CBC: how strong the
    formulation is before any cut or branch."""
    from dataclasses import replace as with_fields

    import numpy as np

    from solver.optimize.backends import BackendOptions, run_backend
    from solver.optimize.miqp import build_array_model
    from solver.status import SolveStatus

    model = build_array_model(graph)
    relaxed = with_fields(model.program, integer=np.zeros(model.num_variables, dtype=bool))
    outcome = run_backend(relaxed, BackendOptions(backend="cbc", time_limit_s=time_limit))
    return outcome.objective if outcome.status is SolveStatus.OPTIMAL else None


def run_case(case: Case, time_limit: float, improve: bool, root: bool = False) -> dict:
    """Solve one case in this process; the record the table is printed from."""
    from solver.cli import parse_budget
    from solver.document.examples import bundled_graphs
    from solver.document.graph_io import load_graph
    from solver.optimize.solve import SolveOptions, solve_xengine

    graph = load_graph(bundled_graphs()[case.graph])
    if case.only:
        graph = graph.with_devices([case.only])
    device = "gpu" if "gpu" in graph.device_index else graph.devices[0].name
    name, budget = parse_budget(graph, f"{device}={case.percent}%")
    graph = graph.with_memory_limits({name: budget})
    events: list[tuple[float, float]] = []
    started = time.perf_counter()

    def on_progress(progress) -> None:
        value = progress.incumbent
        if value is not None and (not events or value < events[-1][1] - 1e-9):
            events.append((time.perf_counter() - started, value))

    options = replace(
        SolveOptions(), backend=case.backend, time_limit_s=time_limit, improve=improve
    )
    result = solve_xengine(graph, options, on_progress=on_progress)
    wall = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    objective = result.timeline.total_ms if result.ok else None
    if objective is not None and (not events or objective < events[-1][1] - 1e-9):
        events.append((wall, objective))
    return {
        "key": case.key,
        "label": case.label,
        "nodes": graph.n,
        "backend": case.backend,
        "build_s": result.build_seconds,
        "rss_mb": rss,
        "root_lp": root_lp(graph, time_limit) if root else None,
        "objective": objective,
        "bound": result.bound,
        "status": result.status.value,
        "wall_s": wall,
        "events": events,
        "message": result.message,
    }


def run_child(case: Case, time_limit: float, improve: bool, root: bool) -> dict:
    """Run a case in a child process (its own RSS, a crash contained)."""
    command = [sys.executable, __file__, "--case", json.dumps(case.__dict__)]
    command += ["--time-limit", str(time_limit)] + ([] if improve else ["--no-improve"])
    command += ["--root"] if root else []
    done = subprocess.run(command, capture_output=True, text=True, timeout=time_limit * 3 + 120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"key": case.key, "label": case.label, "backend": case.backend, "error": tail}
    return json.loads(lines[-1])


def first_within(events: list, best: float | None, fraction: float) -> float | None:
    if best is None:
        return None
    for seconds, value in events:
        if value <= best * (1 + fraction) + 1e-9:
            return seconds
    return None


def _cell(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table_row(record: dict, best: float | None) -> list[str]:
    if "error" in record:
        return [record["label"], "", record["backend"], "error: " + record["error"][:60]]
    objective, bound = record["objective"], record["bound"]
    gap = None
    if objective is not None and bound is not None and objective > 0:
        gap = f"{max(0.0, (objective - bound) / objective):.1%}"
    return [
        record["label"],
        str(record["nodes"]),
        record["backend"],
        _cell(record["build_s"]),
        _cell(record["rss_mb"], 0),
        _cell(first_within(record["events"], best, 0.05), 1),
        _cell(first_within(record["events"], best, 0.01), 1),
        _cell(objective),
        _cell(bound),
        _cell(record.get("root_lp")),
        gap or "-",
        record["status"],
        _cell(record["wall_s"], 1),
    ]


def print_row(cells: list[str]) -> None:
    widths = [w for _, w in COLUMNS]
    print(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        )
    )


def cases_from(args: argparse.Namespace) -> list[Case]:
    if not (args.full or args.graphs):
        return [Case(g, p, b, only) for g, p, b, only in TARGETS]
    graphs = args.graphs or FULL_GRAPHS
    budgets = args.budgets or FULL_BUDGETS
    backends = args.backends or ("cbc", "highs")
    cases = [Case(g, p, b) for g in graphs for p in budgets for b in backends]
    if args.full:
        cases += [Case("vgg16", 90, b, "gpu") for b in backends]
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="every graph, budget and backend")
    parser.add_argument("--graphs", nargs="*", help=f"of {', '.join(FULL_GRAPHS)}, or others")
    parser.add_argument("--budgets", nargs="*", type=int, help="GPU %% of the no-remat peak")
    parser.add_argument("--backends", nargs="*", choices=("cbc", "highs"))
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--no-improve", action="store_true", help="no neighbourhood search")
    parser.add_argument("--update-best", action="store_true", help="record new best objectives")
    parser.add_argument("--json", help="append every record to this JSON-lines file")
    parser.add_argument(
        "--root", action="store_true", help="also solve each model's LP relaxation (slower)"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    improve = not args.no_improve
    if args.case:
        case = Case(**json.loads(args.case))
        print(json.dumps(run_case(case, args.time_limit, improve, args.root)))
        return 0

    known_file = json.loads(BEST_KNOWN.read_text()) if BEST_KNOWN.exists() else {}
    best = {key: entry["objective"] for key, entry in known_file.items()}
    cases = cases_from(args)
    print(
        f"{len(cases)} cases, {args.time_limit:g} s each at most, neighbourhood search "
        f"{'on' if improve else 'off'}; 'to 5%/1%': seconds to a schedule within that of "
        f"the best known objective ({BEST_KNOWN.name}, else the best of this run so far)"
    )
    print_row([name for name, _ in COLUMNS])
    improved = False
    for case in cases:
        record = run_child(case, args.time_limit, improve, args.root)
        known = best.get(record["key"])
        found = record.get("objective")
        if found is not None and (known is None or found < known - 1e-6):
            note = "new best" if known is None else f"new best, was {known:.2f}"
            record["message"] = f"{note}; {record.get('message', '')}"
            best[record["key"]] = found
            proven = record["status"] == "optimal"
            how = f"{case.backend} {args.time_limit:g} s, bench/solve.py"
            known_file[record["key"]] = {"objective": round(found, 4), "proven": proven, "by": how}
            improved = True
        print_row(table_row(record, best.get(record["key"])))
        sys.stdout.flush()
        if args.json:
            with open(args.json, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
    if improved and args.update_best:
        BEST_KNOWN.write_text(json.dumps(dict(sorted(known_file.items())), indent=1) + "\n")
        print(f"updated {BEST_KNOWN}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

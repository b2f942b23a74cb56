"""Benchmark the solver at the scale of real models (issue 18): schedules, bounds and gaps.

Suites (``--suite``, default ``small layer random``):

- ``small``: the bundled VGG16 at GPU 60 % and 40 %, ResNet-50 at 60 % (30 s): nothing slower
  than before on the graphs the solver has always proven.
- ``layer``: torchvision models imported as a user imports them (``import-torch``, ATen
  capture, layer level, batch 8 at 224 x 224: SqueezeNet, GoogLeNet, ConvNeXt-T,
  EfficientNet-B0, DenseNet-121, FCN-ResNet50) and the bundled ResNet-50, GPU at 60 % and 40 %.
- ``op``: op-level imports of 1,000-5,000 operations (torchvision's DenseNet-121 and
  ResNet-152 at ``--level op``, and a residual tower of 60/150/300 blocks), GPU at 60 %.
- ``random``: Moccasin-like random layered graphs (solver/document/random_graphs.py, mean
  layer width 0.3 sqrt(n)) of 100 (seeds 0-2), 250, 500 and 1,000 nodes at 0.8 and 0.9 of
  their schedule order's peak, one device.

Each case runs in a child process of its own (its peak RSS is its own) with the default
options (CBC, the plan the solve chooses), and the table gives: seconds to the first schedule,
to a *proven* gap of 5 % and 1 % (incumbent against the valid bound at that moment), the final
objective, the valid bound, the gap and status, what was proven under the interval model's
restriction, the best heuristic's cost (the construction and every baseline, for "better than
every heuristic"), and the peak RSS. Imported graphs are cached in ``bench/.cache``.

    .venv/bin/python bench/scale.py                         # small, layer, random (~30 min)
    .venv/bin/python bench/scale.py --suite op --time-limit 60
    .venv/bin/python bench/scale.py --suite random --time-limit 60 --markdown
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CACHE = Path(__file__).with_name(".cache")

TORCHVISION_LAYER = (
    "squeezenet1_0",
    "googlenet",
    "convnext_tiny",
    "efficientnet_b0",
    "densenet121",
)
TOWER_MODULE = '''
import torch
from torch import nn


def _block(c):
    return nn.Sequential(
        nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
        nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c),
    )


class Tower(nn.Module):
    """A plain residual tower: conv stem, BLOCKS residual blocks, linear head."""

    def __init__(self, blocks=60, channels=32):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList(_block(channels) for _ in range(blocks))
        self.head = nn.Linear(channels, 10)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = torch.relu(x + block(x))
        return self.head(x.mean((2, 3)))


class Tower60(Tower):
    def __init__(self):
        super().__init__(60, 32)


class Tower150(Tower):
    def __init__(self):
        super().__init__(150, 32)


class Tower300(Tower):
    def __init__(self):
        super().__init__(300, 16)


def fcn_resnet50():
    """torchvision's FCN-ResNet50 without downloading the backbone's weights."""
    from solver.importers.torchvision_models import import_torchvision

    segmentation = import_torchvision("torchvision.models.segmentation")
    return segmentation.fcn_resnet50(weights=None, weights_backbone=None)
'''


@dataclass(frozen=True)
class Case:
    """One benchmark case: where its graph comes from, and the budget."""

    source: str
    """``bundled:NAME``, ``torchvision:MODEL[:op]``, ``tower:CLASS`` or ``random:N:SEED``."""
    percent: int
    """The budgeted device's memory as a percentage of the no-rematerialization peak."""
    time_limit: float
    solver: str = "cbc"
    """The backend asked for (``--solver``): CBC runs the plan, CP-SAT the interval model alone."""

    @property
    def label(self) -> str:
        return f"{self.source.split(':', 1)[1]} {self.percent}%"


def suite(name: str, limit: float) -> list[Case]:
    if name == "small":
        return [
            Case("bundled:vgg16", 60, limit),
            Case("bundled:vgg16", 40, limit),
            Case("bundled:resnet50", 60, 30.0),
        ]
    if name == "layer":
        models = [f"torchvision:{m}" for m in TORCHVISION_LAYER]
        models += ["tower:fcn_resnet50", "bundled:resnet50"]
        return [Case(m, p, limit) for m in models for p in (60, 40)]
    if name == "op":
        sources = ["torchvision:densenet121:op", "torchvision:resnet152:op"]
        sources += ["tower:Tower60:op", "tower:Tower150:op", "tower:Tower300:op"]
        return [Case(s, 60, limit) for s in sources]
    if name == "random":
        seeds = {100: (0, 1, 2), 250: (0,), 500: (0,), 1000: (0,)}
        return [
            Case(f"random:{n}:{seed}", p, limit)
            for n, of_n in seeds.items()
            for seed in of_n
            for p in (80, 90)
        ]
    raise SystemExit(f"unknown suite {name!r}; choose small, layer, op or random")


RANDOM_WIDTH = 0.3
"""Mean layer width over sqrt(n) of the random suite: issue 18's "width ~0.3 n^0.5" (3 at 100
nodes, 9.5 at 1,000; the generator's own default is 0.5)."""


def load_case_graph(case: Case):
    """The case's graph with its budget applied (imports cached in bench/.cache)."""
    from solver.cli import parse_budget
    from solver.document.examples import bundled_graphs
    from solver.document.graph_io import load_graph
    from solver.document.random_graphs import random_layered

    kind, _, rest = case.source.partition(":")
    if kind == "bundled":
        graph = load_graph(bundled_graphs()[rest])
    elif kind == "random":
        n, seed = (int(x) for x in rest.split(":"))
        graph = random_layered(n, seed=seed, width=RANDOM_WIDTH * n**0.5)
    else:
        graph = load_graph(_imported(kind, rest))
    device = "gpu" if "gpu" in graph.device_index else graph.devices[0].name
    name, budget = parse_budget(graph, f"{device}={case.percent}%")
    return graph.with_memory_limits({name: budget})


def _imported(kind: str, rest: str) -> Path:
    CACHE.mkdir(exist_ok=True)
    model, _, level = rest.partition(":")
    out = CACHE / f"{kind}-{model}-{level or 'layer'}.graph.json"
    if out.exists():
        return out
    if kind == "torchvision":
        package, _, builder = model.rpartition(".")
        spec = f"torchvision.models{'.' + package if package else ''}:{builder}"
        shape = "8x3x224x224" if not level else "4x3x224x224"
        env = None
    else:
        (CACHE / "towers.py").write_text(TOWER_MODULE)
        spec, shape = f"towers:{model}", "8x3x64x64"
        env = {**__import__("os").environ, "PYTHONPATH": f"{CACHE}:{ROOT}"}
    command = [sys.executable, str(ROOT / "main.py"), "import-torch", spec, "--input", shape]
    command += ["--level", "op"] if level else []
    command += ["-o", str(out)]
    print(f"importing {spec} ({level or 'layer'} level) ...", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, env=env, cwd=ROOT)
    return out


def run_case(case: Case) -> dict:
    """Solve one case in this process; the record its table row is printed from."""
    from solver.optimize.construct import construct_best
    from solver.optimize.solve import SolveOptions, best_baseline, solve_xengine

    graph = load_case_graph(case)
    events: list[tuple[float, float | None, float | None]] = []
    started = time.perf_counter()

    def on_progress(progress) -> None:
        events.append((time.perf_counter() - started, progress.incumbent, progress.bound))

    options = SolveOptions(time_limit_s=case.time_limit, backend=case.solver)
    result = solve_xengine(graph, options, on_progress=on_progress)
    wall = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    heuristics = []
    built = construct_best(graph)
    if built.timeline is not None:
        heuristics.append(built.timeline.total_ms)
    baseline = best_baseline(graph, deadline=time.monotonic() + 120)
    if baseline is not None:
        heuristics.append(baseline[1].total_ms)
    restricted = result.restricted
    return {
        "case": asdict(case),
        "label": case.label,
        "nodes": graph.n,
        "devices": graph.num_devices,
        "objective": result.timeline.total_ms if result.ok else None,
        "bound": result.bound,
        "status": result.status.value,
        "formulation": result.formulation,
        "restricted_proven": bool(restricted and restricted.proven),
        "heuristic": min(heuristics) if heuristics else None,
        "wall_s": wall,
        "rss_mb": rss,
        "events": events,
        "advice": result.advice,
    }


def _first(events: list, test) -> float | None:
    for seconds, incumbent, bound in events:
        if test(incumbent, bound):
            return seconds
    return None


def _proven_within(fraction: float):
    def test(incumbent, bound) -> bool:
        if incumbent is None or bound is None or incumbent <= 0:
            return False
        return (incumbent - bound) / incumbent <= fraction + 1e-12

    return test


COLUMNS = (
    "case",
    "nodes",
    "first s",
    "gap 5% s",
    "gap 1% s",
    "objective",
    "bound",
    "gap",
    "status",
    "under C",
    "heuristic",
    "RSS MB",
)


def row(record: dict) -> list[str]:
    if "error" in record:
        return [record["label"], "error: " + record["error"][:80]]
    events = record["events"]
    objective, bound = record["objective"], record["bound"]
    gap = None if objective is None or bound is None else max(0.0, 1 - bound / objective)

    def cell(value, digits=1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    return [
        record["label"],
        str(record["nodes"]),
        cell(_first(events, lambda inc, _: inc is not None)),
        cell(_first(events, _proven_within(0.05))),
        cell(_first(events, _proven_within(0.01))),
        cell(objective, 3),
        cell(bound, 3),
        "-" if gap is None else f"{gap:.1%}",
        record["status"],
        "proven" if record["restricted_proven"] else "-",
        cell(record["heuristic"], 3),
        cell(record["rss_mb"], 0),
    ]


def run_child(case: Case) -> dict:
    command = [sys.executable, __file__, "--case", json.dumps(asdict(case))]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=case.time_limit * 4 + 600
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"label": case.label, "error": tail}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", nargs="*", default=["small", "layer", "random"])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--solver", default="cbc", choices=("cbc", "highs", "cpsat"))
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", help="append every record to this JSON-lines file")
    parser.add_argument("--only", nargs="*", help="only cases whose label contains one of these")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(Case(**json.loads(args.case)))))
        return 0
    cases = [c for name in args.suite for c in suite(name, args.time_limit)]
    cases = [replace(c, solver=args.solver) for c in cases]
    if args.only:
        cases = [c for c in cases if any(part in c.label for part in args.only)]
    for case in cases:  # imports first, outside the timed runs
        if not case.source.startswith(("bundled", "random")):
            load_case_graph(case)
    if args.markdown:
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
    else:
        print("  ".join(COLUMNS))
    for case in cases:
        record = run_child(case)
        cells = row(record)
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells), flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The cases of the hostile-input kit (``bench/hostile.py``), one generator per surface.

Every generator takes a seeded :class:`random.Random` and ``quick`` (a small subset for the
test suite) and returns :class:`Case` objects: an argument list with ``{dir}`` for the case's
own folder, the files to write there, an optional setup, and an optional check of what the
command must have done beyond the general contract (exit 0/1/2, one line, no traceback, no
hang), such as "this ONNX model must be refused, naming its operator and node". Nothing here
imports the project: the cases are plain data, built from the repository's files and the
formats' text, so the same kit judges an older checkout too (``--root``).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import random
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KIT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hostile_onnx  # noqa: E402

__all__ = ["Case", "Run", "SURFACES", "cases"]

MAX_SIZE = 2**53


@dataclass
class Run:
    """What one command did: its exit status (``None``: still running at its timeout)."""

    code: int | None
    out: str
    err: str
    seconds: float
    folder: Path


@dataclass
class Case:
    surface: str
    name: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    setup: Callable[[Path, Callable[[list[str]], Run]], Any] | None = None
    """``setup(folder, run)``: makes FIFOs, stores, locks; may return a teardown callable."""
    check: Callable[[Run], str | None] | None = None
    """What the command must have done: ``None``, or why its answer is wrong."""
    timeout: float = 60.0
    store: str = "{dir}/results.sqlite3"
    subprocess_only: bool = False
    """Needs a real process (timing, memory caps, the program's own start)."""
    memory_gib: float = 8.0
    """The address-space cap of the process (an older checkout read /dev/zero into memory)."""

    def path(self, folder: Path) -> list[str]:
        return [a.replace("{dir}", str(folder)) for a in self.argv]


# ----- documents -------------------------------------------------------------------------------
SPEC_GRAPH = {
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
        {"id": "fc1", "op": "Gemm", "kind": "forward", "memory": 1000000,
         "cost": {"cpu": 1.0, "gpu": 10.0}, "workspace": "1 MB"},
        {"id": "fc2", "op": "Gemm", "kind": "forward", "memory": "4 MB",
         "cost": {"cpu": 10.0, "gpu": 1.0}, "inputs": ["fc1"]},
    ],
    "edges": [{"from": "fc1", "to": "fc2", "transfer_ms": {"cpu->gpu": 3, "gpu->cpu": 8}}],
}  # fmt: skip
"""formats.md's example graph, with a workspace."""

HOSTILE_VALUES: list[Any] = [
    float("nan"), float("inf"), -1, 0, 0.5, 2**53, 2**53 + 1, 2**63, 10**400, "1e99999999 B",
    "1e-99999999 B", "-4 MiB", "12 GB/s", "1" * 100, "", "a\nb\x1b[31m", "\u202eevil",
    "=cmd|' /C calc'!A0", [], {}, [["fc1"]], ["cpu"], None, True, "x" * 5000, "4 MiB",
    {"id": "fc1", "from": "gpu"}, {"id": "fc1"}, {"id": "fc1", "from": "npu"},
    {"id": 3, "from": "cpu"}, {"id": "fc1", "from": "cpu", "x": 1},
]  # fmt: skip
HOSTILE_IDS = ["", "a\nb", "\x1b[2J", "fc1", "fc2", "cpu", "gpu", "=1+1", "é" * 3, "x" * 300]


def bundled(name: str, root: Path = KIT_ROOT) -> dict:
    return json.loads((root / "resources" / "graphs" / f"{name}.graph.json").read_text())


def random_graph(rng: random.Random, devices: int | None = None, nodes: int | None = None) -> dict:
    """A small graph with zero-cost nodes, workspaces, several devices and links."""
    names = [f"d{j}" for j in range(devices or rng.randint(1, 3))]
    doc_nodes = []
    for k in range(nodes or rng.randint(2, 7)):
        able = rng.sample(names, rng.randint(1, len(names)))
        node: dict[str, Any] = {
            "id": f"n{k}",
            "memory": rng.randint(0, 120),
            "cost": {d: rng.choice([0, 0, 0.5, 1, 3]) for d in able},
            "inputs": [f"n{i}" for i in sorted(rng.sample(range(k), min(k, rng.randint(0, 3))))],
        }
        if rng.random() < 0.3:
            node["workspace"] = rng.choice([7, 40])
        doc_nodes.append(node)
    links = [
        {"from": a, "to": b, "bandwidth": rng.choice([1e3, 1e6]), "latency_ms": rng.choice([0, 0.25])}
        for a in names for b in names if a != b and rng.random() < 0.75
    ]  # fmt: skip
    return {
        "format": "remat-graph",
        "version": 1,
        "name": "random",
        "devices": [
            {"name": d, "memory": rng.choice([150, 300, 600, 10**6, 10**6])} for d in names
        ],
        "links": links,
        "nodes": doc_nodes,
    }


def random_schedule(rng: random.Random, graph: dict) -> dict:
    """A schedule that follows the availability rules, with random devices, sources,
    recomputations, keeps and offloading copies (memory is not planned: some break a budget)."""
    nodes = graph["nodes"]
    devices = [d["name"] for d in graph["devices"]]
    links = {(x["from"], x["to"]) for x in graph.get("links", [])}
    able = [sorted(n["cost"]) for n in nodes]
    index = {n["id"]: k for k, n in enumerate(nodes)}
    live: dict[str, set[int]] = {d: set() for d in devices}
    stages = []
    for t in range(len(nodes)):
        planned = {(t, rng.choice(able[t]))}
        for _ in range(rng.randint(0, 2)):
            k = rng.randint(0, t)
            planned.add((k, rng.choice(able[k])))
        todo = list(planned)
        while todo:
            k, d = todo.pop()
            for i in (index[x] for x in nodes[k].get("inputs", [])):
                if not any(i in live[x] for x in devices) and not any(j == i for j, _ in planned):
                    where = d if d in able[i] else rng.choice(able[i])
                    planned.add((i, where))
                    todo.append((i, where))
        ops, computed = [], {d: set() for d in devices}
        for k, d in sorted(planned, key=lambda o: (o[0], devices.index(o[1]))):
            sources = {}
            for i in (index[x] for x in nodes[k].get("inputs", [])):
                have = [x for x in devices if i in live[x] or i in computed[x]]
                if d not in have and have:
                    linked = [x for x in have if (x, d) in links] or have
                    sources[nodes[i]["id"]] = rng.choice(linked)
            op: dict[str, Any] = {"node": nodes[k]["id"], "device": d}
            if sources:
                op["inputs"] = sources
            ops.append(op)
            computed[d].add(k)
        keep: dict[str, list] = {}
        kept: dict[str, set[int]] = {}
        for d in devices:
            held = sorted(live[d] | computed[d])
            kept[d] = {i for i in held if rng.random() < 0.6}
            keep[d] = [nodes[i]["id"] for i in sorted(kept[d])]
        for d in devices:
            for i in range(t + 1):
                sources = [s for s in devices if i in live[s] | computed[s] and (s, d) in links]
                if i in live[d] | computed[d] or not sources or rng.random() < 0.85:
                    continue
                keep[d].append({"id": nodes[i]["id"], "from": rng.choice(sources)})
                kept[d].add(i)
        stages.append({"ops": ops, "keep": keep})
        live = kept
    return {"format": "remat-schedule", "version": 1, "graph": graph["name"], "stages": stages}


def reference_replay():
    """The independent replay of ``tests/solver/replay_reference.py`` (never the simulator)."""
    path = KIT_ROOT / "tests" / "solver" / "replay_reference.py"
    spec = importlib.util.spec_from_file_location("replay_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.replay


# ----- mutations -------------------------------------------------------------------------------
def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += _paths(value, (*prefix, i))
    return found


def _parent(doc: Any, path: tuple) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def mutate(doc: Any, rng: random.Random, prefer: str | None = None) -> Any:
    """One to three structure-aware edits; ``prefer`` picks paths whose last key is it."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)[1:] or [()]
        preferred = [p for p in paths if p and p[-1] == prefer]
        path = rng.choice(preferred if preferred and rng.random() < 0.7 else paths)
        if not path:
            continue
        parent, kind = _parent(doc, path), rng.random()
        if kind < 0.6:
            parent[path[-1]] = copy.deepcopy(rng.choice(HOSTILE_VALUES))
        elif kind < 0.75:
            parent[path[-1]] = rng.choice(HOSTILE_IDS)
        elif kind < 0.85:
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif isinstance(parent, list) and parent:
                parent.pop(path[-1])
        elif kind < 0.92:
            parent[path[-1]] = json.loads("[" * 70 + "]" * 70)
        elif isinstance(parent, list) and parent:
            parent.append(copy.deepcopy(rng.choice(parent)))
    return doc


def to_bytes(doc: Any, rng: random.Random) -> bytes:
    """JSON text, now and then cut short, with a byte changed, or with NaN/1e400 tokens."""
    text = json.dumps(doc, allow_nan=True)
    if rng.random() < 0.05:
        text = text.replace("0.5", "1e400", 1)
    data = text.encode("utf-8")
    roll = rng.random()
    if roll < 0.08 and data:
        data = data[: rng.randrange(len(data))]
    elif roll < 0.14 and data:
        at = rng.randrange(len(data))
        data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    return data


# ----- checks ----------------------------------------------------------------------------------
def expect_exit(*codes: int) -> Callable[[Run], str | None]:
    def check(run: Run) -> str | None:
        return None if run.code in codes else f"exit {run.code}, expected {codes}"

    return check


def expect_file(name: str, *, rows: int = 0, under: int = 64 * 2**20) -> Callable:
    """Exit 0 and ``name`` written (a CSV with at least ``rows`` rows), loadable in size."""

    def check(run: Run) -> str | None:
        path = run.folder / name
        if run.code != 0:
            return f"exit {run.code}: expected success with {name} written"
        if not path.exists():
            return f"{name} was not written"
        if path.stat().st_size > under:
            return f"{name} is {path.stat().st_size} bytes, more than the loaders read"
        if rows and path.read_text().count("\n") < rows + 1:
            return f"{name} has fewer than {rows} rows"
        return None

    return check


def graph_within_limits(name: str) -> Callable:
    """If the import succeeded, its graph must be one our loader reads (sizes <= 2^53)."""

    def check(run: Run) -> str | None:
        path = run.folder / name
        if run.code != 0 or not path.exists():
            return None
        doc = json.loads(path.read_text())
        sizes = [n.get("memory", 0) for n in doc["nodes"]] + [
            n.get("workspace", 0) for n in doc["nodes"]
        ]
        if (
            any(isinstance(s, int) and s > MAX_SIZE for s in sizes)
            or sum(s for s in sizes if isinstance(s, int)) > MAX_SIZE
        ):
            return "wrote a graph with sizes past 2^53 bytes, which the loader refuses"
        return None

    return check


def refused_naming(*words: str | None) -> Callable:
    def check(run: Run) -> str | None:
        if run.code != 2:
            return f"exit {run.code}: a model it cannot model must be refused (exit 2)"
        missing = [w for w in words if w and w not in run.err]
        return f"the error does not name {missing}" if missing else None

    return check


def faster_than(seconds: float, then: Callable | None = None) -> Callable:
    def check(run: Run) -> str | None:
        if run.seconds > seconds:
            return f"took {run.seconds:.1f} s, more than {seconds:g} s"
        return then(run) if then else None

    return check


def no_progress_before_error(run: Run) -> str | None:
    if run.code != 2:
        return f"exit {run.code}: expected a usage error"
    if "progress" in run.err or run.out.strip():
        return "printed rows or progress before its error"
    return None


def both(*checks: Callable) -> Callable:
    def check(run: Run) -> str | None:
        for one in checks:
            reason = one(run)
            if reason:
                return reason
        return None

    return check


# ----- surfaces --------------------------------------------------------------------------------
def _base_pairs(rng: random.Random, replay) -> list[tuple[str, dict, dict]]:
    """(name, graph, valid schedule) for a few small graphs, the schedules drawn at random
    until the independent replay accepts one."""
    pairs = []
    docs = {"spec": SPEC_GRAPH, "chain": bundled("chain"), "diamond": bundled("diamond")}
    docs["random"] = random_graph(random.Random(5), devices=2, nodes=6)
    for name, doc in docs.items():
        plain = _plain(doc)
        for _ in range(400):
            schedule = random_schedule(rng, plain)
            if replay(plain, schedule)[0]:
                pairs.append((name, doc, schedule))
                break
    return pairs


def _plain(doc: dict) -> dict:
    """Sizes and budgets as integers (the bundled and spec graphs write units), for the
    independent replay and the schedule generator."""
    units = {"B": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3, "KiB": 1024, "MiB": 1024**2,
             "GiB": 1024**3}  # fmt: skip

    def size(value):
        if isinstance(value, str):
            number, _, unit = value.partition(" ")
            return int(float(number) * units[unit or "B"])
        return value

    doc = copy.deepcopy(doc)
    for device in doc["devices"]:
        device["memory"] = size(device["memory"])
        device["fixed_memory"] = size(device.get("fixed_memory", 0))
    for node in doc["nodes"]:
        node["memory"], node["workspace"] = size(node["memory"]), size(node.get("workspace", 0))
    bandwidth = {"12 GB/s": 12e9}
    for link in doc.get("links", []):
        link["bandwidth"] = bandwidth.get(link["bandwidth"], link["bandwidth"])
    by_id = {node["id"]: node for node in doc["nodes"]}
    overrides = []
    for edge in doc.pop("edges", []):  # every edge as an input; overrides kept for the times
        source, target = (
            (edge[0], edge[1]) if isinstance(edge, list) else (edge["from"], edge["to"])
        )
        inputs = by_id[target].setdefault("inputs", [])
        if source not in inputs:
            inputs.append(source)
        if isinstance(edge, dict) and edge.get("transfer_ms"):
            overrides.append({"from": source, "to": target, "transfer_ms": edge["transfer_ms"]})
    if overrides:
        doc["edges"] = overrides
    return doc


def graph_files(rng: random.Random, quick: bool) -> list[Case]:
    replay = reference_replay()
    pairs = _base_pairs(rng, replay)
    found = []
    for j in range(40 if quick else 700):
        name, doc, schedule = rng.choice(pairs)
        surface = "workspaces" if j % 4 == 0 else "graph-files"
        bad = mutate(doc, rng, "workspace" if surface == "workspaces" else None)
        files = {
            "g.graph.json": to_bytes(bad, rng),
            "s.schedule.json": json.dumps(schedule).encode(),
        }
        found.append(
            Case(
                surface,
                f"{name}-{j}",
                ["check", "{dir}/g.graph.json", "{dir}/s.schedule.json"],
                files,
            )
        )
        if j % 3 == 0:
            method = rng.choice(["checkpoint-all", "greedy", "checkpoint-all:cpu", "chen-greedy"])
            argv = ["solve", "{dir}/g.graph.json", "--method", method, "--no-store"]
            found.append(Case(surface, f"{name}-{j}-solve", argv, files))
    return found


def schedule_files(rng: random.Random, quick: bool) -> list[Case]:
    replay = reference_replay()
    found = []
    for j in range(60 if quick else 1000):
        graph = random_graph(rng)
        schedule = random_schedule(rng, graph)
        offloads = any(
            isinstance(e, dict) for s in schedule["stages"] for es in s["keep"].values() for e in es
        )
        surface = "offload-keeps" if offloads else "schedule-files"
        files = {"g.graph.json": json.dumps(graph).encode()}
        if j % 3:  # well-formed: the verdict and the figures must be the replay's
            files["s.schedule.json"] = json.dumps(schedule).encode()
            check = _agrees_with(replay, graph, schedule)
        else:
            files["s.schedule.json"] = to_bytes(mutate(schedule, rng, "keep"), rng)
            check = None
        argv = ["check", "{dir}/g.graph.json", "{dir}/s.schedule.json", "--json"]
        found.append(Case(surface, f"random-{j}", argv, files, check=check))
    return found


def _agrees_with(replay, graph: dict, schedule: dict) -> Callable:
    valid, peaks, total, _ = replay(graph, schedule)

    def check(run: Run) -> str | None:
        if run.code != (0 if valid else 1):
            return f"exit {run.code}, but the independent replay says {'valid' if valid else 'invalid'}"
        if valid:
            summary = json.loads(run.out)
            if summary["peak_bytes"] != peaks:
                return f"peaks {summary['peak_bytes']}, the replay's {peaks}"
            if abs(summary["total_ms"] - total) > 1e-6 * max(1.0, total):
                return f"total {summary['total_ms']} ms, the replay's {total}"
        return None

    return check


def _fifo(name: str):
    def setup(folder: Path, run) -> None:
        os.mkfifo(folder / name)

    return setup


HOSTILE_PATHS = {
    "fifo": "{dir}/pipe",
    "dev-zero": "/dev/zero",
    "dev-null": "/dev/null",
    "folder": "{dir}",
    "missing": "{dir}/missing.json",
    "missing-folder": "{dir}/no/such/x.json",
    "empty": "",
    "control": "{dir}/a\nb\x1b[2J.json",
    "long": "{dir}/" + "x" * 5000,
    "loop": "{dir}/loop",
}


def _path_setup(folder: Path, run) -> None:
    os.mkfifo(folder / "pipe")
    os.symlink(folder / "loop", folder / "loop")


def paths(rng: random.Random, quick: bool) -> list[Case]:
    good = {"g.graph.json": json.dumps(SPEC_GRAPH).encode()}
    commands = [
        lambda p: ["solve", p, "--method", "checkpoint-all", "--no-store"],
        lambda p: ["check", p, "{dir}/g.graph.json"],
        lambda p: ["check", "{dir}/g.graph.json", p],
        lambda p: ["sweep", p, "--device", "gpu", "--steps", "2", "--method", "checkpoint-all", "--no-store"],
        lambda p: ["import-onnx", p],
        lambda p: ["solve", "{dir}/g.graph.json", "--method", "checkpoint-all", "-o", p, "--no-store"],
        lambda p: ["sweep", "{dir}/g.graph.json", "--device", "gpu", "--steps", "2", "--method", "checkpoint-all", "-o", p, "--no-store", "--jobs", "1"],
        lambda p: ["results", "--store", p, "list"],
        lambda p: ["results", "export", "-o", p],
        lambda p: ["solve", "{dir}/g.graph.json", "--method", "greedy", "--store-path-env", p],
    ]  # fmt: skip
    found = []
    for c, command in enumerate(commands):
        for label, path in HOSTILE_PATHS.items():
            if quick and rng.random() < 0.6:
                continue
            argv = command(path)
            store = "{dir}/results.sqlite3"
            if "--store-path-env" in argv:
                argv = argv[: argv.index("--store-path-env")]
                store = path
            found.append(
                Case(
                    "paths",
                    f"command{c}-{label}",
                    argv,
                    good,
                    setup=_path_setup,
                    store=store,
                    timeout=30,
                    subprocess_only=label == "dev-zero",  # was read into memory: a process
                )
            )
    return found


FLAG_VALUES = {
    "--time-limit": ["nan", "inf", "-1", "0", "1e309", "", "abc", "1e-300", "5", "1e8"],
    "--gap": ["-1", "nan", "inf", "0", "0.5", "1e400", "x"],
    "--threads": ["0", "-1", "1", "2", "10" * 20, "1.5", "", "257"],
    "--budget": ["gpu=inf%", "gpu=nan%", "gpu=-5%", "gpu=1e400%", "gpu=1e99999999 B",
                 "gpu=1e-99999999 B", "cpu=9223372036854775808", "gpu=" + "9" * 5000, "=", "gpu",
                 "npu=1GB", "gpu=60%", "cpu=\x1b[2J", "gpu=0", "gpu=1"],
    "--method": ["checkpoint-all", "greedy", "checkpoint-all:npu", "magic", "\x1b[31m", "chen-greedy",
                 "checkmate:gpu:cpu", ""],
}  # fmt: skip
SWEEP_VALUES = {
    "--steps": ["0", "2", "99999999", "x", "-3", "1e3", "10001"],
    "--jobs": ["0", "-1", "1", "2", "100000", "x", "99999999999999999999"],
    "--from": ["100%", "nan%", "inf%", "1e99999999 B", "5 MB", "-1%", "%", "abc"],
    "--to": ["10%", "0%", "1000000%", "1e-99999999 B"],
    "--device": ["gpu", "npu", "\x1b", ""],
}
ONNX_VALUES = {
    "--input": ["99999999999999999999x16", "99999999999999999999x3x8x8", "0x3x8x8", "2x3x8x8",
                "2x3x8", "-1x3x8x8", "x", "", "2x3x8x8x", "9007199254740993x3x8x8",
                "100000x3x100000x100000", "1x1x1x1"],
    "--level": ["op", "layer", "node", ""],
    "--cpu": ["ryzen-9-7950x", "nosuch", ""],
    "--gpu": ["rtx-3090", "\x1b[2J", ""],
    "--link": ["pcie4-x16", "carrier-pigeon"],
    "--name": ["x" * 5000, "a\nb", ""],
}  # fmt: skip
RESULTS_VALUES = [
    ["show", "99999999999999999999999"], ["show", "-1"], ["show", "0"], ["show", "abc"],
    ["show", "9223372036854775807"], ["show", "9223372036854775808"], ["show", "1e3"],
    ["prune", "--older-than", "nan"], ["prune", "--older-than", "inf"],
    ["prune", "--older-than", "-1"], ["prune", "--older-than", "1e309"], ["prune"],
    ["list", "--method", "\x1b[2J"], ["list", "--graph", "/dev/zero"], ["export", "-o", "{dir}/x.txt"],
]  # fmt: skip


def arguments(rng: random.Random, quick: bool) -> list[Case]:
    found = []
    files = {
        "g.graph.json": json.dumps(SPEC_GRAPH).encode(),
        "m.onnx": hostile_onnx.build("conv-relu"),
    }
    for j in range(40 if quick else 500):
        command = rng.choice(["solve", "solve", "check", "sweep", "import-onnx", "results"])
        if command == "results":
            argv = ["results", *rng.choice(RESULTS_VALUES)]
        elif command == "import-onnx":
            argv = ["import-onnx", "{dir}/m.onnx"]
            for flag in rng.sample(sorted(ONNX_VALUES), rng.randint(1, 3)):
                argv += [flag, rng.choice(ONNX_VALUES[flag])]
        else:
            argv = [command, "{dir}/g.graph.json"] + (
                ["{dir}/g.graph.json"] if command == "check" else []
            )
            for flag in rng.sample(sorted(FLAG_VALUES), rng.randint(1, 3)):
                if command == "check" and flag != "--budget":
                    continue
                argv += [flag, rng.choice(FLAG_VALUES[flag])]
            if command != "check" and "--method" not in argv:
                argv += ["--method", "checkpoint-all"]
            if command == "sweep":
                for flag in rng.sample(sorted(SWEEP_VALUES), rng.randint(1, 3)):
                    argv += [flag, rng.choice(SWEEP_VALUES[flag])]
                if "--device" not in argv:
                    argv += ["--device", "gpu"]
                if "--jobs" not in argv:
                    argv += ["--jobs", "1"]
                if "--steps" not in argv:
                    argv += ["--steps", "2"]
            if command != "check":
                argv.append("--no-store")
        found.append(Case("arguments", f"{command}-{j}", argv, files, timeout=60))
    return found


def import_onnx(rng: random.Random, quick: bool) -> list[Case]:
    found = []
    for name in hostile_onnx.BUILDERS:
        files = {"m.onnx": hostile_onnx.build(name)}
        argv = ["import-onnx", "{dir}/m.onnx", "-o", "{dir}/out.graph.json"]
        if name in hostile_onnx.BAD:
            op, node = hostile_onnx.BAD[name]
            check = (
                refused_naming(op, node)
                if op
                else both(expect_exit(2), graph_within_limits("out.graph.json"))
            )
        elif name == "symbolic-batch":
            check = expect_exit(2)
            found.append(
                Case(
                    "import-onnx",
                    f"{name}-with-input",
                    [*argv, "--input", "4x3x8x8"],
                    files,
                    check=expect_file("out.graph.json"),
                )
            )
        else:
            check = both(expect_file("out.graph.json"), graph_within_limits("out.graph.json"))
        found.append(Case("import-onnx", name, argv, files, check=check))
        for level in ("op",) if not quick else ():
            found.append(
                Case("import-onnx", f"{name}-op", [*argv, "--level", level], files, check=check)
            )
    for j in range(6 if quick else 60):
        data = (
            hostile_onnx.damaged_bytes(rng)
            if j % 2
            else bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
        )
        found.append(
            Case("import-onnx", f"damaged-{j}", ["import-onnx", "{dir}/m.onnx"], {"m.onnx": data})
        )
    found.append(
        Case(
            "import-onnx",
            "dev-zero",
            ["import-onnx", "/dev/zero"],
            check=expect_exit(2),
            timeout=20,
            subprocess_only=True,
        )
    )
    found.append(
        Case(
            "import-onnx",
            "fifo",
            ["import-onnx", "{dir}/pipe"],
            setup=_fifo("pipe"),
            check=expect_exit(2),
            timeout=20,
        )
    )
    good = {"m.onnx": hostile_onnx.build("conv-relu")}
    for shape in ["99999999999999999999x16", "99999999999999999999x3x8x8", "4194304x3x16384x16384"]:
        found.append(
            Case(
                "import-onnx",
                f"input-{shape[:12]}",
                ["import-onnx", "{dir}/m.onnx", "--input", shape, "-o", "{dir}/o.json"],
                good,
                check=both(expect_exit(2), graph_within_limits("o.json")),
            )
        )
    return found


# ----- the result store ------------------------------------------------------------------------
STORE_DAMAGE = {
    "budgets-garbage": "UPDATE results SET budgets = '{garbage' WHERE id = ?",
    "budgets-list": "UPDATE results SET budgets = '[1, 2]' WHERE id = ?",
    "budgets-text-size": "UPDATE results SET budgets = '{\"gpu\": \"big\"}' WHERE id = ?",
    "schedule-garbage": "UPDATE results SET schedule = 'not json' WHERE id = ?",
    "schedule-list": "UPDATE results SET schedule = '[1, 2, 3]' WHERE id = ?",
    "schedule-wrong": "UPDATE results SET schedule = '{\"format\": \"remat-schedule\", \"stages\": []}' WHERE id = ?",
    "variables-text": "UPDATE results SET variables = 'many' WHERE id = ?",
    "constraints-huge": "UPDATE results SET constraints = 9223372036854775807 WHERE id = ?",
    "threads-text": "UPDATE results SET threads = 'four' WHERE id = ?",
    "seconds-text": "UPDATE results SET seconds = 'slow' WHERE id = ?",
    "created-text": "UPDATE results SET created = 'yesterday' WHERE id = ?",
    "created-huge": "UPDATE results SET created = 1e300 WHERE id = ?",
    "total-text": "UPDATE results SET total_ms = 'fast' WHERE id = ?",
    "status-bogus": "UPDATE results SET status = 'bogus' WHERE id = ?",
    "method-blob": "UPDATE results SET method = x'00ff' WHERE id = ?",
    "limit-null": "UPDATE results SET time_limit_s = NULL WHERE id = ?",
    "key-integer": "UPDATE results SET key = 42 WHERE id = ?",
    "message-number": "UPDATE results SET message = 3.5 WHERE id = ?",
}  # fmt: skip
SWEEP = [
    "sweep",
    "chain",
    "--device",
    "gpu",
    "--steps",
    "3",
    "--method",
    "checkpoint-all",
    "--jobs",
    "1",
]
STORE_COMMANDS = [
    (["results", "list"], None),
    (["results", "list", "--method", "checkpoint-all:gpu"], None),
    (["results", "show", "1"], None),
    (["results", "show", "2", "--json"], None),
    (["results", "show", "3", "-o", "{dir}/shown.json"], None),
    (["results", "export", "-o", "{dir}/all.csv"], expect_file("all.csv")),
    (["results", "export", "-o", "{dir}/all.json"], expect_file("all.json")),
    (["results", "prune", "--older-than", "1000"], None),
    (["solve", "chain", "--method", "checkpoint-all", "-o", "{dir}/c.schedule.json"], expect_file("c.schedule.json")),
    (["solve", "chain", "--method", "greedy", "-o", "{dir}/g.schedule.json"], expect_file("g.schedule.json")),
    ([*SWEEP, "-o", "{dir}/sweep.csv"], expect_file("sweep.csv", rows=3)),
    (["results", "show", "99999999999999999999999"], expect_exit(2)),
]  # fmt: skip


def _populated_store(run, folder: Path) -> None:
    for argv in (
        ["solve", "chain", "--method", "checkpoint-all"],
        ["solve", "chain", "--method", "greedy"],
        ["solve", "diamond", "--method", "checkpoint-all"],
        SWEEP,
    ):
        run(argv)


def _damaged(kinds: list[str]):
    def setup(folder: Path, run) -> None:
        _populated_store(run, folder)
        with sqlite3.connect(folder / "results.sqlite3") as db:
            ids = [r[0] for r in db.execute("SELECT id FROM results ORDER BY id")]
            for n, kind in enumerate(kinds):
                db.execute(STORE_DAMAGE[kind], (ids[n % len(ids)],))

    return setup


def _locked(folder: Path, run):
    _populated_store(run, folder)
    holder = sqlite3.connect(
        folder / "results.sqlite3", isolation_level=None, check_same_thread=False
    )
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("SELECT count(*) FROM results").fetchall()

    def release() -> None:
        holder.execute("ROLLBACK")
        holder.close()

    return release


def result_store(rng: random.Random, quick: bool) -> list[Case]:
    found = []
    kinds = sorted(STORE_DAMAGE)
    for _ in range(6 if quick else 60):
        damage = rng.sample(kinds, rng.randint(1, 3))
        for argv, check in STORE_COMMANDS if not quick else rng.sample(STORE_COMMANDS, 4):
            name = f"{'+'.join(damage)}: {' '.join(argv[:3])}"
            found.append(
                Case(
                    "result-store",
                    name,
                    list(argv),
                    setup=_damaged(damage),
                    check=check,
                    timeout=90,
                )
            )
    for argv, limit in (
        (["solve", "chain", "--method", "checkpoint-all"], 8.0),
        ([*SWEEP, "-o", "{dir}/s.csv"], 10.0),
        (["results", "list"], 8.0),
    ):
        found.append(
            Case(
                "result-store",
                f"locked: {' '.join(argv[:3])}",
                argv,
                setup=_locked,
                check=faster_than(limit),
                subprocess_only=True,
                timeout=120,
            )
        )
    for label, store in (
        ("folder", "{dir}"),
        ("fifo", "{dir}/pipe"),
        ("dev-zero", "/dev/zero"),
        ("text", "{dir}/g.graph.json"),
        ("under-a-file", "{dir}/g.graph.json/x.sqlite3"),
    ):
        files = {"g.graph.json": json.dumps(SPEC_GRAPH).encode()}
        for argv, check in (
            (
                ["solve", "{dir}/g.graph.json", "--method", "checkpoint-all", "-o", "{dir}/s.json"],
                expect_file("s.json"),
            ),
            (["results", "list"], None),
        ):
            found.append(
                Case(
                    "result-store",
                    f"store-{label}: {argv[0]}",
                    argv,
                    files,
                    setup=_fifo("pipe"),
                    store=store,
                    check=check,
                    timeout=30,
                )
            )
    return found


# ----- files we write, limits at scale -------------------------------------------------------------
def _fan_in(n: int) -> bytes:
    nodes = [
        {"id": f"n{k}", "memory": 8, "cost": {"cpu": 1}, "inputs": [f"n{k - 1}"] if k else []}
        for k in range(n)
    ]
    nodes[-1]["inputs"] = [f"n{k}" for k in range(n - 1)]
    return json.dumps(
        {
            "format": "remat-graph",
            "version": 1,
            "name": "fan-in",
            "devices": [{"name": "cpu", "memory": "1 GiB"}],
            "nodes": nodes,
        }
    ).encode()


def _many_devices(count: int, n: int) -> bytes:
    devices = [{"name": f"d{j}", "memory": 10**6} for j in range(count)]
    links = [{"from": "d0", "to": f"d{j}", "bandwidth": 1e9} for j in range(1, count)]
    links += [{"from": f"d{j}", "to": "d0", "bandwidth": 1e9} for j in range(1, count)]
    nodes = [
        {
            "id": f"n{k}",
            "memory": 1000,
            "cost": {f"d{j}": 1 + (j + k) % 7 for j in range(count)},
            "inputs": [f"n{k - 1}"] if k else [],
        }
        for k in range(n)
    ]
    return json.dumps(
        {
            "format": "remat-graph",
            "version": 1,
            "name": "many-devices",
            "devices": devices,
            "links": links,
            "nodes": nodes,
        }
    ).encode()


def _long_edges(n: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    nodes = []
    for k in range(n):
        inputs = sorted({rng.randrange(k) for _ in range(min(k, 2))}) if k else []
        nodes.append(
            {
                "id": f"n{k}",
                "memory": rng.randint(1, 1000),
                "cost": {"cpu": 1.0, "gpu": 0.5},
                "inputs": [f"n{i}" for i in inputs],
            }
        )
    return json.dumps(
        {
            "format": "remat-graph",
            "version": 1,
            "name": f"long{n}",
            "devices": [{"name": "cpu", "memory": "64 GiB"}, {"name": "gpu", "memory": "8 GiB"}],
            "links": [
                {"from": "cpu", "to": "gpu", "bandwidth": "12 GB/s"},
                {"from": "gpu", "to": "cpu", "bandwidth": "12 GB/s"},
            ],
            "nodes": nodes,
        }
    ).encode()


def _solved_within(seconds: float) -> Callable:
    def check(run: Run) -> str | None:
        for line in run.out.splitlines():
            if line.startswith("solved in"):
                took = float(line.split()[2])
                return f"solved in {took} s for a 1 s limit" if took > seconds else None
        return None if run.code in (0, 1) else f"exit {run.code}"

    return check


def files_and_scale(rng: random.Random, quick: bool) -> list[Case]:
    # the quick subset (the test suite) judges no time: on a loaded machine it is no finding
    found = [
        Case("limits", "sweep -o into a missing folder", ["sweep", "chain", "--device", "gpu", "--steps", "3", "--method", "checkpoint-all", "-o", "{dir}/no/such/s.csv", "--no-store"], check=no_progress_before_error),
        Case("limits", "1000 devices, --time-limit 1", ["solve", "{dir}/d.graph.json", "--time-limit", "1", "--no-store"], {"d.graph.json": _many_devices(1000, 10)}, check=None if quick else _solved_within(3.0), timeout=120),
        Case("limits", "--jobs 100000", ["sweep", "chain", "--device", "gpu", "--steps", "3", "--method", "checkpoint-all", "--jobs", "100000", "--no-store"], timeout=120),
        Case("files-we-write", "import-onnx past 2^53 bytes", ["import-onnx", "{dir}/m.onnx", "-o", "{dir}/o.graph.json"], {"m.onnx": hostile_onnx.build("huge-sizes")}, check=graph_within_limits("o.graph.json")),
    ]  # fmt: skip
    if not quick:
        found += [
            Case("limits", "1000 devices x 40 nodes, --time-limit 1", ["solve", "{dir}/d.graph.json", "--time-limit", "1", "--no-store"], {"d.graph.json": _many_devices(1000, 40)}, check=_solved_within(3.0), subprocess_only=True, timeout=180),
            Case("limits", "greedy, 10,000 nodes, long edges", ["solve", "{dir}/l.graph.json", "--method", "greedy", "--no-store"], {"l.graph.json": _long_edges(10_000)}, subprocess_only=True, timeout=1800, memory_gib=10),
            Case("files-we-write", "a 100 MiB schedule", ["solve", "{dir}/f.graph.json", "--method", "checkpoint-all", "--no-store", "-o", "{dir}/f.schedule.json"], {"f.graph.json": _fan_in(4000)}, check=lambda run: graph_size_ok(run), subprocess_only=True, timeout=600),
            Case("limits", "--steps 10000", ["sweep", "chain", "--device", "gpu", "--steps", "10000", "--method", "checkpoint-all", "--no-store", "--jobs", "2", "-o", "{dir}/s.csv"], subprocess_only=True, timeout=1800),
        ]  # fmt: skip
    return found


def graph_size_ok(run: Run) -> str | None:
    path = run.folder / "f.schedule.json"
    if path.exists() and path.stat().st_size > 64 * 2**20:
        return f"wrote a {path.stat().st_size} byte schedule, more than check reads"
    return None


SURFACES: dict[str, Callable[[random.Random, bool], list[Case]]] = {
    "graph-files": graph_files,
    "schedule-files": schedule_files,
    "paths": paths,
    "arguments": arguments,
    "import-onnx": import_onnx,
    "result-store": result_store,
    "files-and-scale": files_and_scale,
}


def cases(seed: int, quick: bool, only: list[str] | None = None) -> list[Case]:
    """Every case of the chosen generators, in a fixed order for ``seed``."""
    found = []
    for name, make in SURFACES.items():
        if only and name not in only:
            continue
        found += make(random.Random(f"{seed}-{name}"), quick)
    return found

"""Fuzzing the loaders and the command line with hostile input (issue 11).

A seeded generator mutates valid graph and schedule documents (hostile numbers, sizes, ids,
types, nesting, raw bytes) and argument lists (non-finite and out-of-range flags, huge size
exponents, non-regular paths), then runs ``solver.cli.main`` in process, plus a few real
``python main.py`` runs. The contract asserted on every run:

- the exit status is 0, 1 or 2;
- an error (status 2) is exactly one line on stderr (after any ``note:`` lines), starting with
  ``error: `` or ``main.py ...: error: ``, with no control characters, and never the CLI's
  last-resort "internal error" (every class of bad input has its own message);
- no traceback, and no hang: every in-process run is bounded by an interval timer, every
  subprocess by a timeout;
- ``check`` agrees with the simulator: exit 0 exactly when the replay is valid, and
  ``check --json`` reports the simulator's numbers.

Seeds are fixed, so a failure names its case and reproduces.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from handmade import SPEC_EXAMPLE

from solver.cli import main
from solver.document.examples import bundled_graphs
from solver.document.graph_io import graph_from_dict
from solver.document.json_io import read_json
from solver.document.schedule_io import schedule_from_dict, schedule_to_dict
from solver.errors import XEngineError
from solver.execution.simulate import effective_graph, simulate
from solver.optimize.methods import solve

ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 10.0
"""An in-process run longer than this is a hang (the slowest honest one takes well under 1 s)."""

HOSTILE_VALUES: list[Any] = [
    float("nan"),
    float("inf"),
    -float("inf"),
    "NaN-TOKEN-1e400",  # replaced by the text 1e400 when written
    -1,
    0,
    0.5,
    2**53,
    2**63,
    10**400,
    "1e99999999 B",
    "1e-99999999 B",
    "-4 MiB",
    "12 GB/s",
    "1" * 100,
    "",
    "a\nb\x1b[31m",
    "\u202eevil",
    "=cmd|' /C calc'!A0",
    [],
    {},
    [["fc1"]],
    ["cpu"],
    None,
    True,
    "x" * 5000,
]
HOSTILE_IDS = ["", "a\nb", "\x1b[2J", "fc1", "fc2", "cpu", "gpu", "=1+1", "é" * 3, "x" * 300]
ERROR_PREFIXES = ("error: ", "main.py solve: error: ", "main.py check: error: ")
ERROR_PREFIXES += ("main.py sweep: error: ", "main.py: error: ")


class Hang(BaseException):
    """Raised by the interval timer; a BaseException so the CLI's safety net cannot catch it."""


@contextlib.contextmanager
def bounded(seconds: float = RUN_SECONDS):
    """Fail with :class:`Hang` if the block runs longer than ``seconds``."""

    def on_alarm(*_: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run the CLI in process and assert the contract; returns (status, stdout, stderr)."""
    capsys.readouterr()
    with bounded():
        code = main(argv)
    out, err = capsys.readouterr()
    case = f"argv={argv!r}"
    assert code in (0, 1, 2), case
    assert "Traceback" not in err and "Traceback" not in out, case
    assert "internal error" not in err, f"{case}: {err}"
    lines = [line for line in err.splitlines() if not line.startswith("note: ")]
    if code == 2:
        assert len(lines) == 1 and err.endswith("\n"), f"{case}: {err!r}"
        assert lines[0].startswith(ERROR_PREFIXES), f"{case}: {err!r}"
    assert all(line.isprintable() for line in err.splitlines()), f"{case}: {err!r}"
    return code, out, err


# ----- mutations ---------------------------------------------------------------------------------
def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) to a value inside ``doc``."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += _paths(value, (*prefix, i))
    return found


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def mutate(doc: Any, rng: random.Random) -> Any:
    """One to three structure-aware edits of ``doc`` (a deep copy)."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)
        path = rng.choice(paths[1:] or paths)
        kind = rng.random()
        if kind < 0.55:
            doc = _set(doc, path, copy.deepcopy(rng.choice(HOSTILE_VALUES)))
        elif kind < 0.7:
            doc = _set(doc, path, rng.choice(HOSTILE_IDS))
        elif kind < 0.8 and path:
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif isinstance(parent, list) and parent:
                parent.pop(path[-1])
        elif kind < 0.9:
            depth = rng.choice([10, 70, 3000])
            doc = _set(doc, path, json.loads("[" * depth + "]" * depth) if depth < 900 else "DEEP")
        else:
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, list) and parent:
                parent.append(copy.deepcopy(rng.choice(parent)))
    return doc


def mutate_schedule(doc: dict, rng: random.Random, graph_doc: dict) -> dict:
    """One well-formed edit that may break a rule: drop or move an op, change its device,
    drop or add a kept tensor, shrink a budget."""
    doc = copy.deepcopy(doc)
    stages = doc["stages"]
    devices = [d["name"] for d in graph_doc["devices"]]
    t = rng.randrange(len(stages))
    stage = stages[t]
    kind = rng.randrange(6)
    if kind == 0 and stage["ops"]:
        stage["ops"].pop(rng.randrange(len(stage["ops"])))
    elif kind == 1 and stage["ops"]:
        rng.choice(stage["ops"])["device"] = rng.choice(devices)
    elif kind == 2 and stage["keep"]:
        kept = stage["keep"][rng.choice(sorted(stage["keep"]))]
        if kept:
            kept.pop(rng.randrange(len(kept)))
    elif kind == 3:
        ids = [n["id"] for n in graph_doc["nodes"]]
        stage["keep"].setdefault(rng.choice(devices), []).append(rng.choice(ids))
    elif kind == 4 and stage["ops"] and t + 1 < len(stages):
        stages[t + 1]["ops"].insert(0, stage["ops"].pop())
    else:
        doc["budgets"] = {rng.choice(devices): rng.choice([0, 1000, 10**6, 10**7])}
    return doc


def to_text(doc: Any, rng: random.Random) -> bytes:
    """The document as JSON bytes, sometimes broken at the byte level."""
    text = json.dumps(doc, allow_nan=True).replace('"NaN-TOKEN-1e400"', "1e400")
    text = text.replace('"DEEP"', "[" * 3000 + "]" * 3000)
    data = text.encode("utf-8")
    roll = rng.random()
    if roll < 0.08:
        data = data[: rng.randrange(len(data))]
    elif roll < 0.14:
        at = rng.randrange(len(data))
        data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    return data


# ----- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bases() -> dict[str, tuple[dict, dict]]:
    """(graph document, valid schedule document) for a few small graphs."""
    docs = {"spec": SPEC_EXAMPLE}
    for name in ("chain", "diamond"):
        docs[name] = read_json(bundled_graphs()[name])
    found = {}
    for name, doc in docs.items():
        graph = graph_from_dict(doc)
        result = solve(graph, "greedy" if name != "spec" else "checkpoint-all:cpu")
        assert result.ok, name
        found[name] = (doc, schedule_to_dict(result.schedule))
    return found


# ----- the loaders and check ---------------------------------------------------------------------
def test_fuzz_graph_files_through_check_and_solve(bases, tmp_path, capsys):
    rng = random.Random(11)
    statuses = {0: 0, 1: 0, 2: 0}
    for case in range(240):
        name = rng.choice(sorted(bases))
        graph_doc, schedule_doc = bases[name]
        graph_path = tmp_path / f"g{case}.graph.json"
        graph_path.write_bytes(to_text(mutate(graph_doc, rng), rng))
        schedule_path = tmp_path / f"s{case}.schedule.json"
        schedule_path.write_text(json.dumps(schedule_doc))
        code, _, _ = run_cli(["check", str(graph_path), str(schedule_path)], capsys)
        statuses[code] += 1
        if case % 4 == 0:
            method = rng.choice(["checkpoint-all", "greedy", "checkpoint-all:cpu"])
            run_cli(["solve", str(graph_path), "--method", method, "--no-store"], capsys)
    assert statuses[2] > 100 and statuses[0] + statuses[1] > 10, statuses  # both kinds covered


def test_fuzz_schedule_files_check_agrees_with_the_simulator(bases, tmp_path, capsys):
    rng = random.Random(12)
    verdicts = {True: 0, False: 0, "refused": 0}
    for case in range(300):
        name = rng.choice(sorted(bases))
        graph_doc, schedule_doc = bases[name]
        graph_path = tmp_path / f"{name}.graph.json"
        if not graph_path.exists():
            graph_path.write_text(json.dumps(graph_doc))
        if case % 5 < 2:  # well-formed: valid or breaking a rule
            doc = mutate_schedule(schedule_doc, rng, graph_doc) if case % 5 else schedule_doc
            data = json.dumps(doc).encode()
        else:
            data = to_text(mutate(schedule_doc, rng), rng)
        path = tmp_path / f"s{case}.schedule.json"
        path.write_bytes(data)
        code, out, _ = run_cli(["check", str(graph_path), str(path), "--json"], capsys)
        expected = _simulator_verdict(graph_path, path)
        if expected is None:
            assert code == 2, f"case {case}: the loaders refuse it, check must too"
            verdicts["refused"] += 1
            continue
        valid, total_ms = expected
        assert code == (0 if valid else 1), f"case {case}: check says {code}, simulator {valid}"
        summary = json.loads(out)
        assert summary["valid"] is valid
        if valid:
            assert summary["total_ms"] == pytest.approx(total_ms)
        verdicts[valid] += 1
    assert min(verdicts.values()) >= 10, verdicts  # valid, invalid and refused all exercised


def _simulator_verdict(graph_path: Path, schedule_path: Path) -> tuple[bool, float] | None:
    """The simulator's verdict on the files, computed without the CLI; None if unreadable."""
    try:
        graph = graph_from_dict(read_json(graph_path), graph_path)
        schedule = schedule_from_dict(read_json(schedule_path), graph, schedule_path)
    except XEngineError:
        return None
    timeline = simulate(effective_graph(graph, schedule, {}), schedule)
    total = timeline.total_ms if timeline.valid else math.nan
    return timeline.valid, total


# ----- arguments ---------------------------------------------------------------------------------
FLAG_VALUES = {
    "--time-limit": ["nan", "inf", "-inf", "-1", "0", "1e309", "", "abc", "1e-300", "5", "1e8"],
    "--gap": ["-1", "nan", "inf", "0", "0.5", "1e400", "x"],
    "--threads": ["0", "-1", "1", "2", "10" * 20, "1.5", ""],
    "--budget": [
        "gpu=inf%",
        "gpu=nan%",
        "gpu=-5%",
        "gpu=1e400%",
        "gpu=1e99999999 B",
        "gpu=1e-99999999 B",
        "cpu=9223372036854775808",
        "gpu=" + "9" * 5000,
        "=",
        "gpu",
        "npu=1GB",
        "gpu=60%",
        "cpu=\x1b[2J",
    ],
    "--method": ["checkpoint-all", "greedy", "checkpoint-all:npu", "magic", "\x1b[31m", "chen"],
}


def test_fuzz_argument_lists(tmp_path, capsys):
    rng = random.Random(13)
    fifo = tmp_path / "pipe.graph.json"
    os.mkfifo(fifo)
    graphs = ["chain", "diamond", "/dev/zero", str(fifo), str(tmp_path), "missing.json", ""]
    graphs.append("a\nb\x1b[2J.json")
    for _ in range(150):
        command = rng.choice(["solve", "solve", "check", "sweep"])
        argv = [command, rng.choice(graphs)]
        if command == "check":
            argv.append(rng.choice(graphs))
        for flag in rng.sample(sorted(FLAG_VALUES), rng.randint(1, 3)):
            if command == "check" and flag != "--budget":
                continue
            argv += [flag, rng.choice(FLAG_VALUES[flag])]
        if command != "check" and "--method" not in argv:
            argv += ["--method", "checkpoint-all"]  # fast: no MIQP in the fuzz
        if command == "sweep":
            argv += ["--device", rng.choice(["gpu", "npu", "\x1b"]), "--steps"]
            argv += [rng.choice(["0", "2", "99999999", "x"]), "--jobs", "1"]
            argv += ["--from", rng.choice(["100%", "nan%", "inf%", "1e99999999 B", "5 MB"])]
        if command != "check":
            argv.append("--no-store")
        run_cli(argv, capsys)


# ----- real programs -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["check", "chain", "FIFO"],
        ["solve", "DEEP"],
        ["solve", "chain", "--budget", "gpu=1e99999999 B"],
        ["solve", "chain", "--time-limit", "nan"],
        ["solve"],
    ],
)
def test_fuzz_real_runs_exit_2_with_one_line(argv, tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.graph.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    argv = [{"FIFO": str(fifo), "DEEP": str(deep)}.get(a, a) for a in argv]
    done = subprocess.run(
        [sys.executable, "main.py", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(ERROR_PREFIXES), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""

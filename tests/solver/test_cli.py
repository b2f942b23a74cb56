"""The command line: exit codes, one-line errors, JSON output and files it writes."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_formats import SPEC_EXAMPLE

from solver.cli import main
from solver.formats import load_graph, load_schedule
from solver.simulate import check_schedule

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path, doc, name="g.graph.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(path)


def test_solve_json_prints_solver_block_and_summary(tmp_path, capsys):
    out = tmp_path / "s.schedule.json"
    code = main(["solve", "chain", "--json", "-o", str(out), "--time-limit", "30"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["status"] == "optimal"
    assert report["summary"]["valid"] is True
    assert report["summary"]["total_ms"] == pytest.approx(report["objective"], abs=1e-6)
    graph = load_graph(ROOT / "resources/graphs/chain.graph.json")
    replay = check_schedule(graph, load_schedule(out, graph))
    assert replay.total_ms == pytest.approx(report["objective"], abs=1e-6)


def test_budget_percentage_and_units(tmp_path, capsys):
    path = _write(tmp_path, SPEC_EXAMPLE)
    assert main(["solve", path, "--budget", "gpu=100%", "--budget", "cpu=5MB", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["objective"] == pytest.approx(5.0)  # fc1 on cpu, copy 3 ms, fc2 on gpu
    assert report["summary"]["budget_bytes"] == {"cpu": 5_000_000, "gpu": 5_000_000}


def test_infeasible_budget_exits_1_with_explanation(capsys):
    code = main(["solve", "chain", "--budget", "gpu=1MB", "--budget", "cpu=1MB"])
    out = capsys.readouterr().out
    assert code == 1
    assert "no schedule can exist" in out and "relu" in out


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ("{not json", "line 1, column 2"),
        ({**SPEC_EXAMPLE, "nodes": [{**SPEC_EXAMPLE["nodes"][0], "memory": -4}]}, "negative"),
        ({**SPEC_EXAMPLE, "devices": [{"name": "cpu", "memory": 1}]}, "unknown device 'gpu'"),
    ],
)
def test_bad_graph_files_exit_2_with_one_line(tmp_path, capsys, doc, words):
    code = main(["solve", _write(tmp_path, doc)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and words in err
    assert err.count("\n") == 1


def test_cycle_is_named(tmp_path, capsys):
    doc = copy.deepcopy(SPEC_EXAMPLE)
    doc["nodes"][0]["inputs"] = ["fc2"]
    assert main(["check", _write(tmp_path, doc), "whatever.json"]) == 2
    assert "cycle: fc1 -> fc2 -> fc1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["solve", "chain", "--budget", "gpu"],
        ["solve", "chain", "--budget", "npu=1GB"],
        ["solve", "chain", "--method", "magic"],
        ["solve", "chain", "--time-limit", "0"],
        ["solve", "no-such-file.json"],
        ["sweep", "chain", "--device", "npu"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(("error: ", "main.py solve: error: ")) and err.count("\n") == 1, err


def test_check_reports_violation_and_exits_1(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["solve", "chain", "--method", "checkpoint-all:cpu", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["check", "chain", str(out)]) == 0
    assert "valid:" in capsys.readouterr().out
    assert main(["check", "chain", str(out), "--budget", "cpu=1MB"]) == 1
    assert "invalid: stage 0:" in capsys.readouterr().err


def test_sweep_writes_csv(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    code = main(
        [
            "sweep",
            "diamond",
            "--device",
            "gpu",
            "--from",
            "100%",
            "--to",
            "80%",
            "--steps",
            "2",
            "--method",
            "checkpoint-all",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    rows = out.read_text().splitlines()
    assert rows[0].startswith("device,fraction,budget_bytes,method,status,total_ms")
    assert len(rows) == 3
    assert "gpu,1.0," in rows[1]


def test_examples_lists_bundled_graphs(capsys):
    assert main(["examples"]) == 0
    out = capsys.readouterr().out
    assert "chain" in out and "diamond" in out and "skip" in out


def test_main_py_runs_as_a_program():
    done = subprocess.run(
        [sys.executable, "main.py", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "chain" in done.stdout


def test_every_kind_of_graph_error_exits_2_with_one_line(tmp_path, capsys):
    from test_formats import GRAPH_ERRORS, _broken

    for j, (edit, words) in enumerate(GRAPH_ERRORS):
        path = _write(tmp_path, _broken(edit), f"bad{j}.graph.json")
        assert main(["solve", path]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: ") and err.count("\n") == 1, err
        assert re.search(words, err), (words, err)


def test_solve_json_stdout_is_pure_json_with_highs():
    pytest.importorskip("highspy")
    done = subprocess.run(
        [sys.executable, "main.py", "solve", "chain", "--solver", "highs", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "optimal"  # HiGHS's banner went to stderr

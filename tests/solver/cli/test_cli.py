"""The command line: exit codes, one-line errors, JSON output and files it writes."""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from handmade import GRAPH_ERRORS, SPEC_EXAMPLE, broken_spec_example

from solver.cli import main
from solver.document.graph_io import load_graph
from solver.document.schedule_io import load_schedule
from solver.execution.simulate import check_schedule

ROOT = Path(__file__).resolve().parents[3]


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
    # nothing was solved: the first line must not call it a heuristic's answer
    assert out.startswith("method     xengine (no solver run: proven before any model was built)")


def test_a_budget_no_order_fits_is_proven_with_the_memory_that_has_one(tmp_path, capsys):
    # every node fits the budget with its inputs (d: 1 + 4 + 6 <= 12), so the necessary
    # condition sees nothing; but c (6) is made beside its input a (4), and b (4) is held
    # then (14 B) or remade from a after it, beside c (14 B again): nothing fits, and the
    # construction's backward search proves it; the checkpoint-all peak (14 B) has room
    nodes = [
        {"id": "a", "memory": 4, "cost": {"cpu": 1.0}},
        {"id": "b", "memory": 4, "cost": {"cpu": 1.0}, "inputs": ["a"]},
        {"id": "c", "memory": 6, "cost": {"cpu": 1.0}, "inputs": ["a"]},
        {"id": "d", "memory": 1, "cost": {"cpu": 1.0}, "inputs": ["b", "c"]},
    ]
    doc = {"format": "remat-graph", "version": 1, "devices": [{"name": "cpu", "memory": 12}]}
    doc["nodes"] = nodes
    code = main(["solve", _write(tmp_path, doc), "--no-store", "--time-limit", "10"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("method     xengine (no solver run: proven before any model was built)")
    assert "why        no schedule fits 12 B on cpu: a search of every order" in out
    assert "advice     the construction finds a schedule with cpu at " in out


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


def test_main_py_sends_every_registered_command_to_the_command_line(capsys):
    import main as program
    from solver.cli import COMMANDS

    names = {command.name for command in COMMANDS}
    assert program.COMMANDS == names | {"-h", "--help"}
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert all(f"    {name} " in listing for name in names), listing


def test_every_command_is_a_subcommand_with_its_own_help(capsys):
    from solver.cli import COMMANDS

    for command in COMMANDS:
        assert main([command.name, "--help"]) == 0
        assert capsys.readouterr().out.startswith(f"usage: main.py {command.name} ")
    assert main(["import-torch", "m:C"]) == 2
    assert capsys.readouterr().err == (
        "main.py import-torch: error: the following arguments are required: --input; "
        "see main.py import-torch --help\n"
    )


def test_every_kind_of_graph_error_exits_2_with_one_line(tmp_path, capsys):
    for j, (edit, words) in enumerate(GRAPH_ERRORS):
        path = _write(tmp_path, broken_spec_example(edit), f"bad{j}.graph.json")
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


# ----- hostile input (issue 11): exit 2, one line, never a traceback ---------------------------
@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["solve", "chain", "--time-limit", "nan"],
            "main.py solve: error: argument --time-limit: 'nan' is not a finite number; "
            "see main.py solve --help",
        ),
        (
            ["solve", "chain", "--time-limit", "inf"],
            "main.py solve: error: argument --time-limit: 'inf' is not a finite number; "
            "see main.py solve --help",
        ),
        (
            ["solve", "chain", "--gap", "-1"],
            "main.py solve: error: argument --gap: '-1' must be >= 0 (e.g. 0.01 for 1%); "
            "see main.py solve --help",
        ),
        (
            ["solve", "chain", "--threads", "0"],
            "main.py solve: error: argument --threads: 0 must be from 1 to 256; "
            "see main.py solve --help",
        ),
        (
            ["solve", "chain", "--budget", "gpu=inf%"],
            "error: --budget 'gpu=inf%': a percentage must be a number from 0 to 1000000",
        ),
        (
            ["solve", "chain", "--budget", "gpu=nan%"],
            "error: --budget 'gpu=nan%': a percentage must be a number from 0 to 1000000",
        ),
        (
            ["solve", "chain", "--budget", "gpu=1e99999999 B"],
            "error: --budget 'gpu=1e99999999 B': '1e99999999 B' is too large; "
            "sizes must be at most 9007199254740992 bytes",
        ),
        (
            ["solve"],
            "main.py solve: error: the following arguments are required: graph; "
            "see main.py solve --help",
        ),
        (
            ["solve", "chain", "--bogus", "a\nb"],
            "main.py solve: error: unrecognized arguments: --bogus a\\nb; see main.py solve --help",
        ),
        (
            ["sweep", "chain", "--device", "gpu", "--from", "nan%"],
            "error: --from/--to: a percentage must be a number from 0 to 1000000",
        ),
        (
            ["check", "chain", "/dev/zero"],
            "error: /dev/zero: not a regular file (a folder, device or pipe); give a JSON file",
        ),
    ],
)
def test_hostile_arguments_exit_2_with_one_line(argv, line, capsys):
    import time

    start = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - start < 5
    assert capsys.readouterr().err == line + "\n"


def test_ids_with_newlines_and_ansi_escapes_are_echoed_escaped(tmp_path, capsys):
    doc = copy.deepcopy(SPEC_EXAMPLE)
    doc["nodes"][1]["inputs"] = ["evil\n\x1b[2Jid"]
    assert main(["check", _write(tmp_path, doc), "s.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err
    assert "edge evil\\n\\x1b[2Jid -> fc2: unknown node 'evil\\n\\x1b[2Jid'" in err


def test_usage_error_inside_a_subcommand_is_one_line_on_a_real_run():
    done = subprocess.run(
        [sys.executable, "main.py", "solve", "chain", "--solver", "gurobi"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "main.py solve: error: argument --solver: invalid choice: 'gurobi' (choose from "
        "'cbc', 'highs', 'cpsat'); see main.py solve --help\n"
    )


# ----- signals: SIGTERM and SIGHUP cancel like Ctrl-C ---------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signals_cancel_the_solve_and_keep_the_incumbent(sig, monkeypatch, capsys):
    import os
    from dataclasses import replace

    import solver.results.cached as cached
    from solver.optimize.methods import solve
    from solver.status import SolveStatus

    seen: list[bool] = []

    def fake_solve_cached(graph, method, options, store, on_progress=None, cancel=None, **_):
        os.kill(os.getpid(), sig)  # as `kill -TERM` or closing the terminal would
        seen.append(cancel.wait(5))
        incumbent = solve(graph, "checkpoint-all:cpu")
        return cached.CachedSolve(replace(incumbent, status=SolveStatus.CANCELLED))

    monkeypatch.setattr(cached, "solve_cached", fake_solve_cached)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    assert main(["solve", "chain", "--no-store"]) == 1
    assert seen == [True]
    out = capsys.readouterr().out
    assert "status     cancelled" in out and "memory     cpu: peak" in out
    after = {s: signal.getsignal(s) for s in before}
    assert after == before  # the handlers are put back after the command


def _children(pid: int) -> list[tuple[int, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if int(rest.split()[1]) == pid:
            found.append((int(entry), name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find CBC")
def test_sigterm_stops_cbc_and_keeps_the_incumbent_in_a_real_run():
    import time

    proc = subprocess.Popen(
        [sys.executable, "main.py", "solve", "vgg16", "--budget", "gpu=60%"]
        + ["--time-limit", "120", "--no-store"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(n == "cbc" for _, n in _children(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, "CBC never started"
            time.sleep(0.05)
        cbc = [p for p, n in _children(proc.pid) if n == "cbc"]
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert time.monotonic() - started < 15
    assert "status     cancelled" in out and "memory     gpu: peak" in out, out
    assert "Traceback" not in err
    assert not [p for p in cbc if Path(f"/proc/{p}").exists()], "CBC left running"


# ----- CSV cells -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        ("\t=1", "'\t=1"),
        ("-3.5", "-3.5"),
        ("+1e-3", "+1e-3"),
        ("gpu", "gpu"),
        ("", ""),
    ],
)
def test_neutralise_csv_cell(cell, written):
    from solver.document.csvsafe import neutralise_csv_cell

    assert neutralise_csv_cell(cell) == written


def test_sweep_csv_neutralises_names_from_the_graph(tmp_path, capsys):
    text = json.dumps(SPEC_EXAMPLE).replace('"gpu"', '"=gpu"').replace("gpu->", "=gpu->")
    text = text.replace("->gpu", "->=gpu")
    out = tmp_path / "sweep.csv"
    argv = ["sweep", _write(tmp_path, text), "--device", "=gpu", "--from", "100%", "--to"]
    argv += ["100%", "--steps", "1", "--method", "checkpoint-all", "--no-store", "--jobs", "1"]
    assert main([*argv, "-o", str(out)]) == 0, capsys.readouterr().err
    rows = list(csv.reader(out.read_text().splitlines()))
    assert rows[1][0] == "'=gpu" and rows[1][1] == "1.0"


def test_the_size_line_says_when_no_model_was_built(capsys):
    from dataclasses import replace

    from solver.cli.output import print_result
    from solver.document.generators import unit_chain
    from solver.optimize.methods import solve

    heuristic = solve(unit_chain(4, budget=100), "checkpoint-all")
    stopped = replace(heuristic, formulation="retention intervals (C=2)")
    built = replace(stopped, variables=12, constraints=34)
    for result in (heuristic, stopped, built):
        print_result(result)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("solved in")]
    assert [ln.split("(", 1)[1] for ln in lines] == [
        "no model)",
        "the retention intervals (C=2) model was not built)",
        "12 variables, 34 constraints, retention intervals (C=2))",
    ]


def test_a_solve_closed_before_the_backend_built_its_model_says_who_proved_it(capsys):
    # the exact search can prove a one-device schedule before CBC has a model; the first
    # line then must not read as if CBC had solved it, and the proof names the search
    from dataclasses import replace

    from solver.cli.output import print_result
    from solver.optimize.incumbents import MEETS_A_BOUND
    from solver.optimize.solve import SolveOptions, solve_xengine

    solved = solve_xengine(load_graph(ROOT / "resources/graphs/chain.graph.json"), SolveOptions())
    why = f"{MEETS_A_BOUND}: no schedule costs less than 9 ms (found by the exact search beside"
    closed = replace(solved, backend="CBC", variables=0, constraints=0, formulation="")
    print_result(replace(closed, message=why))
    out = capsys.readouterr().out
    assert out.startswith("method     xengine (CBC stopped before it built a model: proven beside")
    assert f"proof      {why}" in out
    print_result(replace(solved, backend="CBC", message=""))  # CBC's own proof: as before
    out = capsys.readouterr().out
    assert out.startswith("method     xengine (CBC)\n") and "proof" not in out

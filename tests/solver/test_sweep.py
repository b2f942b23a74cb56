"""Sweeps: parallel workers give the serial answers, the store answers repeats, cancels keep
what finished, and the command streams rows and survives SIGINT/SIGTERM."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from solver.cli import main
from solver.cli.sweep_output import ProgressLine
from solver.document.examples import bundled_graphs
from solver.document.graph_io import load_graph
from solver.optimize.solve import SolveOptions
from solver.results.store import ResultStore
from solver.status import SolveStatus
from solver.sweeps.sweep import SweepPoint, run_sweep, sweep_tasks

ROOT = Path(__file__).resolve().parents[2]
FAST = SolveOptions(time_limit_s=20)


@pytest.fixture
def diamond():
    return load_graph(bundled_graphs()["diamond"])


@pytest.fixture
def tasks(diamond):
    # quick budgets: no remat needed, and below the GPU's lower bound (moves to the CPU)
    return sweep_tasks(diamond, "gpu", [1.0, 0.3, 0.1], ["xengine", "checkmate"], FAST, "diamond")


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite3")


def _times(points: list[SweepPoint]) -> list[tuple]:
    return [(p.graph, p.fraction, p.method, p.result.status, p.total_ms) for p in points]


def test_pool_gives_the_serial_answers_in_task_order(tasks, store):
    serial = run_sweep(tasks, jobs=1)
    arrivals: list[SweepPoint] = []
    parallel = run_sweep(tasks, jobs=2, store=store, on_point=arrivals.append)
    assert _times(parallel) == _times(serial)
    assert sorted(_times(arrivals), key=_times(parallel).index) == _times(parallel)
    # by hand: at 100 % nothing is recomputed; the sum of the diamond's costs is 5 ms
    assert parallel[0].total_ms == pytest.approx(5.0)
    assert all(p.result.timeline.valid for p in parallel)
    assert not any(p.from_store for p in parallel)
    assert len(store.rows()) == len(tasks)  # each worker stored its result


def test_repeated_sweep_is_served_from_the_store_at_once(tasks, store, monkeypatch):
    first = run_sweep(tasks, jobs=2, store=store)

    def no_solving(*args, **kwargs):
        raise AssertionError("a stored point was solved again")

    # "at once": no worker pool is started and nothing is solved (a wall-clock bound was
    # noise on two shared cores)
    monkeypatch.setattr("solver.sweeps.sweep._run_in_pool", no_solving)
    monkeypatch.setattr("solver.sweeps.sweep.solve", no_solving)
    again = run_sweep(tasks, jobs=2, store=store)
    assert all(p.from_store for p in again)
    assert _times(again) == _times(first)


def test_shorter_limit_in_the_store_is_reported_and_solved_again(tasks, store, diamond):
    short = sweep_tasks(diamond, "gpu", [1.0], ["xengine"], SolveOptions(time_limit_s=2))
    from dataclasses import replace

    (point,) = run_sweep(short, store=store)
    # pretend it ran out of time: FEASIBLE under a 2 s limit is not reusable for 20 s
    store.put(short[0].graph, "xengine", short[0].options, point.result)
    with __import__("sqlite3").connect(store.path) as db:
        db.execute("UPDATE results SET status = 'feasible'")
    told = []
    (again,) = run_sweep(
        [replace(short[0], options=FAST)], store=store, on_stored=lambda t, s: told.append(s)
    )
    assert [s.time_limit_s for s in told] == [2.0]
    assert not again.from_store and again.result.status is SolveStatus.OPTIMAL


@pytest.mark.parametrize("jobs", [1, 2])
def test_cancel_keeps_every_finished_point_and_its_stored_row(tasks, store, jobs):
    cancel = threading.Event()
    points = run_sweep(
        tasks, jobs=jobs, store=store, on_point=lambda p: cancel.set(), cancel=cancel
    )
    assert 1 <= len(points) < len(tasks)
    finished = [p for p in points if p.result.status is not SolveStatus.CANCELLED]
    assert finished
    stored = {(r.method, r.budgets["gpu"]) for r in store.rows()}
    for p in finished:
        assert (p.method, tasks[0].graph.device("gpu").fixed_memory + p.budget) in stored


def test_cancel_before_start_solves_nothing(tasks):
    cancel = threading.Event()
    cancel.set()
    assert run_sweep(tasks, jobs=2, cancel=cancel) == []


def test_sweep_command_streams_rows_and_writes_a_sorted_csv(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    args = ["sweep", "diamond", "chain", "--device", "gpu", "--from", "100%", "--to", "10%"]
    args += ["--steps", "2", "--method", "xengine", "--jobs", "2", "-o", str(out)]
    assert main(args) == 0
    captured = capsys.readouterr()
    rows = out.read_text().splitlines()
    assert rows[0] == (
        "device,fraction,budget_bytes,method,status,total_ms,seconds,graph,from_store,offload"
    )
    assert [(r.split(",")[7], r.split(",")[1]) for r in rows[1:]] == [
        ("diamond", "1.0"),
        ("diamond", "0.1"),
        ("chain", "1.0"),
        ("chain", "0.1"),
    ]
    assert captured.err.count("progress: [") == 4  # not a terminal: plain lines
    assert "4/4 solves (0 from the store)" in captured.err
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "4/4 solves (4 from the store)" in captured.err
    assert [r.split(",")[8:] for r in out.read_text().splitlines()[1:]] == [["yes", "no"]] * 4


def test_progress_line_redraws_in_place_on_a_terminal(tasks):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress = ProgressLine(4, stream)
    progress.advance(SweepPoint("gpu", 1.0, 1, "xengine", None, "g", from_store=True))
    assert stream.getvalue().startswith("\r\x1b[K[######..................] 1/4 solves (1 from")
    assert "\n" not in stream.getvalue()


def _sweep_process(tmp_path: Path, jobs: int) -> subprocess.Popen:
    # diamond is quick; VGG16 at 60 % runs into its time limit: the sweep is surely running
    # when the signal comes. Its own session, so that a signal can go to its whole group (as a
    # terminal's hang-up does); its own TMPDIR, to find any CBC it leaves behind.
    command = [sys.executable, "main.py", "sweep", "diamond", "vgg16", "--device", "gpu"]
    command += ["--from", "100%", "--to", "60%", "--steps", "2", "--method", "xengine"]
    command += ["--time-limit", "120", "--jobs", str(jobs), "-o", str(tmp_path / "out.csv")]
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, XENGINE_STORE=str(tmp_path / "results.sqlite3"))
    env["TMPDIR"] = str(tmp_path / "tmp")
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _left_running(marker: str) -> list[str]:
    """``PID ARGS`` of each process whose command line holds ``marker``, read from /proc (as
    ``ps -eo pid,args`` would print them: a bare Debian has no procps)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        line = args.replace(b"\0", b" ").decode(errors="replace").strip()
        if marker in line:
            found.append(f"{entry.name} {line}")
    return found


@pytest.mark.parametrize(
    ("sig", "to_group"),
    [(signal.SIGINT, False), (signal.SIGTERM, True), (signal.SIGHUP, True), (signal.SIGHUP, False)],
)
def test_killed_sweep_keeps_every_finished_result(tmp_path, sig, to_group):
    """Ctrl-C, SIGTERM or SIGHUP, to the sweep or to its whole process group (workers too, as
    a closed terminal or ``kill -TERM -PGID`` do): every finished solve is kept, the running
    ones stop with their best schedule, and nothing is left running."""
    process = _sweep_process(tmp_path, 2)
    try:
        header = process.stdout.readline()
        assert header.startswith("network")
        first = process.stdout.readline()
        assert first.startswith(("diamond", "vgg16"))
        if to_group:
            os.killpg(process.pid, sig)
        else:
            process.send_signal(sig)
        rest, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    left = _left_running(str(tmp_path))
    for line in left:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert left == []  # no worker, no CBC
    rows = [first, *rest.splitlines()]
    finished = [r for r in rows if " optimal " in r or " feasible " in r]
    assert process.returncode == 1
    assert "Traceback" not in err and not [r for r in rows if " error " in r]
    assert f"cancelled: {len(finished)} of 4 solves finished (they are in the result store)" in err
    # VGG16 at 60 % was running: stopped, with the schedule it had (the warm start at least)
    (running,) = [r for r in rows if r.startswith("vgg16") and " 60% " in r]
    assert " cancelled " in running and running.split()[-2] == "ms"
    stored = ResultStore(tmp_path / "results.sqlite3").rows()
    assert len(stored) == len(finished) >= 1
    csv_rows = (tmp_path / "out.csv").read_text().splitlines()[1:]
    assert len(csv_rows) == len([r for r in rows if r.startswith(("diamond", "vgg16"))])


def test_pool_starts_the_hardest_looking_tasks_first(diamond):
    from solver.sweeps.sweep import _hardest_first

    chain = load_graph(bundled_graphs()["chain"])  # 11 nodes: a bigger model than the diamond's 9
    tasks = sweep_tasks(diamond, "gpu", [1.0, 0.5], ["checkpoint-all", "xengine"], FAST, "d")
    tasks += sweep_tasks(chain, "gpu", [1.0, 0.5], ["xengine"], FAST, "c", len(tasks))
    order = [(t.label, t.fraction, t.method) for t in _hardest_first(tasks)]
    assert order == [
        ("c", 0.5, "xengine"),  # a model to solve, the bigger one, a budget below the peak
        ("c", 1.0, "xengine"),
        ("d", 0.5, "xengine"),
        ("d", 1.0, "xengine"),
        ("d", 0.5, "checkpoint-all"),  # heuristics last
        ("d", 1.0, "checkpoint-all"),
    ]


def test_pool_forks_only_when_no_other_thread_runs():
    from solver.sweeps.sweep import _pool_context

    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        pytest.skip("fork is chosen on Linux, from a process with one Python thread")
    assert _pool_context().get_start_method() == "fork"
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert _pool_context().get_start_method() == "forkserver"
    finally:
        release.set()
        other.join()

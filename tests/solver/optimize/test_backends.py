"""Tests for solver.optimize.backends: real CBC and HiGHS solves, cancel, time limits and progress.

The hard model is a market split instance (Cornuejols-Dawande): 30 binaries, 4 equality rows
with slack. Both solvers find an incumbent at once and then search for well over 20 s, which
makes cancel and time-limit behaviour observable within a second. Fake ``cbc`` scripts stand
in for a CBC that hangs, ignores SIGINT or crashes.
"""

from __future__ import annotations

import importlib
import os
import stat
import threading
import time
from pathlib import Path

import numpy as np
import pulp
import pytest

from solver.errors import XEngineError
from solver.optimize.backends import (
    BackendOptions,
    BackendResult,
    _common,
    available_backends,
    cbc,
    registry,
    run_backend,
)
from solver.status import Progress, SolveStatus

BACKENDS = [
    "cbc",
    pytest.param(
        "highs",
        marks=pytest.mark.skipif(
            "highs" not in available_backends(), reason="highspy is not installed"
        ),
    ),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def make_knapsack() -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
    """Items (value, weight) A(10,5) B(13,6) C(7,4) D(8,3) E(4,2), capacity 10.

    By hand: A+D+E = 22 (weight 10) beats B+D = 21 and B+C = 20; as a minimisation of
    ``100 - value`` the optimum is 78 with x = (1, 0, 0, 1, 1). The constant checks that
    objective and bound include it.
    """
    values, weights = [10, 13, 7, 8, 4], [5, 6, 4, 3, 2]
    prob = pulp.LpProblem("knapsack", pulp.LpMinimize)
    x = [prob.add_variable(f"x_{i}", 0, 1, cat="Binary") for i in range(5)]
    prob += 100 - pulp.lpSum(v * xi for v, xi in zip(values, x, strict=True))
    prob += pulp.lpSum(w * xi for w, xi in zip(weights, x, strict=True)) <= 10, "capacity"
    return prob, x


def make_infeasible() -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
    """2 (y0 + y1 + y2) = 3 has no integer solution, although its LP relaxation does."""
    prob = pulp.LpProblem("odd", pulp.LpMinimize)
    y = [prob.add_variable(f"y_{i}", 0, 1, cat="Binary") for i in range(3)]
    prob += pulp.lpSum(y)
    prob += pulp.lpSum(2 * yi for yi in y) == 3, "odd"
    return prob, y


def market_split_data(seed: int, rows: int = 4, cols: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Seeded market split weights ``a`` and row targets (half of each row's sum)."""
    a = np.random.default_rng(seed).integers(0, 100, size=(rows, cols))
    return a, a.sum(axis=1) // 2


def make_market_split(seed: int = 0) -> pulp.LpProblem:
    """A market split instance: hard for branch and bound, feasible from x = 0."""
    a, target = market_split_data(seed)
    rows, cols = a.shape
    prob = pulp.LpProblem("market_split", pulp.LpMinimize)
    x = [prob.add_variable(f"x_{j}", 0, 1, cat="Binary") for j in range(cols)]
    over = [prob.add_variable(f"over_{i}", 0, None) for i in range(rows)]
    under = [prob.add_variable(f"under_{i}", 0, None) for i in range(rows)]
    prob += pulp.lpSum(over) + pulp.lpSum(under)
    for i in range(rows):
        row = pulp.lpSum(int(a[i, j]) * x[j] for j in range(cols))
        prob += row + under[i] - over[i] == int(target[i]), f"split_{i}"
    return prob


def cbc_children() -> list[int]:
    """Our child processes named cbc, zombies included (a zombie was never reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
        if comm == "cbc" and int(rest.split()[1]) == os.getpid():
            found.append(int(entry.name))
    return found


def fake_cbc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Point the CBC backend at a shell script ``body`` (it receives CBC's arguments)."""
    script = tmp_path / "cbc"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(pulp.PULP_CBC_CMD, "pulp_cbc_path", str(script))


def solve_in_thread(
    prob: pulp.LpProblem, options: BackendOptions
) -> tuple[threading.Thread, threading.Event, threading.Event, dict[str, BackendResult]]:
    """Start ``run_backend`` on a thread; return it, the cancel Event, a first-incumbent
    Event and the dict that receives the result."""
    cancel, has_incumbent, out = threading.Event(), threading.Event(), {}

    def on_progress(progress: Progress) -> None:
        if progress.incumbent is not None:
            has_incumbent.set()

    def target() -> None:
        out["result"] = run_backend(prob, options, on_progress, cancel)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, cancel, has_incumbent, out


# --------------------------------------------------------------------------- both backends


def test_run_backend_finds_known_knapsack_optimum(backend: str) -> None:
    prob, x = make_knapsack()

    result = run_backend(prob, BackendOptions(backend=backend, time_limit_s=20))

    assert result.status is SolveStatus.OPTIMAL
    assert result.has_solution
    assert result.objective == pytest.approx(78.0)
    assert result.bound == pytest.approx(78.0)
    assert result.gap == pytest.approx(0.0, abs=1e-6)
    assert [round(xi.varValue) for xi in x] == [1, 0, 0, 1, 1]
    assert (prob.status, prob.sol_status) == (pulp.LpStatusOptimal, pulp.LpSolutionOptimal)
    assert result.log_tail


def test_run_backend_reports_infeasible(backend: str) -> None:
    prob, y = make_infeasible()

    result = run_backend(prob, BackendOptions(backend=backend, time_limit_s=20))

    assert result.status is SolveStatus.INFEASIBLE
    assert not result.has_solution
    assert (result.objective, result.bound, result.gap) == (None, None, None)
    assert [yi.varValue for yi in y] == [None, None, None]  # left untouched
    assert prob.status == pulp.LpStatusInfeasible


def test_run_backend_cancel_keeps_incumbent_and_returns_fast(backend: str) -> None:
    prob = make_market_split()
    thread, cancel, has_incumbent, out = solve_in_thread(
        prob, BackendOptions(backend=backend, time_limit_s=60, threads=1)
    )
    assert has_incumbent.wait(20), "no incumbent reported"
    time.sleep(0.3)  # let the search get going: cancel mid branch and bound

    cancelled_at = time.monotonic()
    cancel.set()
    thread.join(10)
    latency = time.monotonic() - cancelled_at

    result = out["result"]
    assert latency < 2.0
    assert result.status is SolveStatus.CANCELLED
    assert result.has_solution
    assert result.objective >= result.bound - 1e-6
    assert result.objective == pytest.approx(pulp.value(prob.objective))
    assert prob.valid(1e-6)
    assert prob.sol_status == pulp.LpSolutionIntegerFeasible  # not PuLP's "Optimal"
    assert cbc_children() == []


@pytest.fixture(scope="module", params=BACKENDS)
def limited_run(request: pytest.FixtureRequest) -> tuple[BackendResult, list[Progress], float]:
    """The hard model under a 1 s time limit: its result, progress reports and wall time."""
    reports: list[Progress] = []
    started = time.monotonic()
    options = BackendOptions(backend=request.param, time_limit_s=1.0, threads=1)
    result = run_backend(make_market_split(), options, reports.append)
    return result, reports, time.monotonic() - started


def test_run_backend_time_limit_stops_hard_model(limited_run) -> None:
    result, _, wall = limited_run

    assert result.status in (SolveStatus.FEASIBLE, SolveStatus.TIME_LIMIT)
    assert wall < 4.0
    assert result.has_solution == (result.status is SolveStatus.FEASIBLE)
    if result.has_solution:
        assert result.objective >= result.bound - 1e-6


def test_run_backend_streams_progress(limited_run) -> None:
    result, reports, _ = limited_run

    with_incumbent = [p for p in reports if p.incumbent is not None]
    assert with_incumbent
    assert sum(p.log_line is not None for p in reports) >= 5
    elapsed = [p.elapsed_s for p in reports]
    assert elapsed == sorted(elapsed)
    if result.has_solution:
        assert min(p.incumbent for p in with_incumbent) == pytest.approx(result.objective)
    assert result.log_tail
    assert len(result.log_tail) <= _common.LOG_TAIL_LINES


def test_run_backend_warm_start_is_first_incumbent(backend: str) -> None:
    prob = make_market_split(seed=1)
    _, target = market_split_data(seed=1)
    for var in prob.variables():  # x = 0 is feasible with each row's target taken up by "under"
        var.varValue = float(target[int(var.name[6:])]) if var.name.startswith("under_") else 0.0
    start_objective = pulp.value(prob.objective)
    incumbents: list[float] = []

    def on_progress(progress: Progress) -> None:
        if progress.incumbent is not None:
            incumbents.append(progress.incumbent)

    options = BackendOptions(backend=backend, time_limit_s=1.0, threads=1, warm_start=True)
    result = run_backend(prob, options, on_progress)

    assert prob.valid(1e-6)
    assert incumbents[0] == pytest.approx(start_objective)
    assert result.has_solution
    assert result.objective <= start_objective


def test_run_backend_progress_exception_propagates(backend: str) -> None:
    prob, _ = make_knapsack()

    def on_progress(progress: Progress) -> None:
        raise RuntimeError("GUI went away")

    with pytest.raises(RuntimeError, match="GUI went away"):
        run_backend(prob, BackendOptions(backend=backend), on_progress)
    assert cbc_children() == []


def test_run_backend_rejects_maximisation(backend: str) -> None:
    prob = pulp.LpProblem("max", pulp.LpMaximize)
    prob += prob.add_variable("x", 0, 1)

    with pytest.raises(ValueError, match="minimisation"):
        run_backend(prob, BackendOptions(backend=backend))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"backend": "gurobi"}, "backend must be one of"),
        ({"time_limit_s": 0}, "time_limit_s must be a positive number; got 0"),
        ({"gap_rel": -0.1}, "gap_rel must be >= 0"),
        ({"threads": 0}, "threads must be >= 1"),
    ],
)
def test_backend_options_rejects_bad_settings(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BackendOptions(**kwargs)


def test_available_backends_lists_cbc_first() -> None:
    assert available_backends()[0] == "cbc"
    assert set(available_backends()) <= set(registry.BACKENDS)


def test_every_available_backend_imports_and_an_unknown_one_names_the_choices() -> None:
    for name in available_backends():
        module = registry.BACKENDS[name].module
        if module is not None:
            importlib.import_module(module)
    with pytest.raises(XEngineError, match="unknown solver 'gurobi'; choose one of cbc"):
        registry.backend("gurobi")


# --------------------------------------------------------------------------- CBC only


def test_cbc_pipe_fallback_still_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pty() -> tuple[int, int]:
        raise OSError("out of pty devices")

    monkeypatch.setattr(cbc.pty, "openpty", no_pty)
    prob, _ = make_knapsack()
    reports: list[Progress] = []

    result = run_backend(prob, BackendOptions(), reports.append)

    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(78.0)
    assert any(p.log_line and p.log_line.startswith("Cbc") for p in reports)


def test_cbc_hung_past_time_limit_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Like CBC stuck in preprocessing: deaf to SIGINT, with a child holding the pty open.
    fake_cbc(tmp_path, monkeypatch, "trap '' INT\necho 'Welcome to fake CBC'\nsleep 30\n")
    monkeypatch.setattr(cbc, "HARD_STOP_GRACE_S", 0.5)
    prob, x = make_knapsack()

    started = time.monotonic()
    result = run_backend(prob, BackendOptions(time_limit_s=0.5))
    wall = time.monotonic() - started

    assert result.status is SolveStatus.TIME_LIMIT
    assert not result.has_solution
    assert "overran its time limit" in result.message
    assert "Welcome to fake CBC" in result.log_tail
    assert wall < 0.5 + 0.5 + cbc.SIGINT_GRACE_S + 1.0
    assert [xi.varValue for xi in x] == [None] * 5


def test_cbc_deaf_to_sigint_is_killed_within_two_seconds_of_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cbc(
        tmp_path, monkeypatch, "trap '' INT\necho 'Cbc0012I Integer solution of 5'\nsleep 30\n"
    )
    prob, _ = make_knapsack()
    thread, cancel, has_incumbent, out = solve_in_thread(prob, BackendOptions())
    assert has_incumbent.wait(10)

    cancelled_at = time.monotonic()
    cancel.set()
    thread.join(10)

    assert time.monotonic() - cancelled_at < 2.0
    result = out["result"]
    assert result.status is SolveStatus.CANCELLED
    assert not result.has_solution
    assert result.objective is None


def test_cbc_relaxation_values_are_not_a_solution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PuLP reads this header as a solution; it is the LP relaxation after a time limit.
    header = "Stopped on time (no integer solution - continuous used) - objective value 12"
    fake_cbc(
        tmp_path,
        monkeypatch,
        'while [ $# -gt 0 ]; do [ "$1" = -solution ] && sol="$2"; shift; done\n'
        f"printf '{header}\\n      0 C0000000  0.5  0\\n' > \"$sol\"\n",
    )
    prob, x = make_knapsack()

    result = run_backend(prob, BackendOptions(time_limit_s=1))

    assert result.status is SolveStatus.TIME_LIMIT
    assert not result.has_solution
    assert [xi.varValue for xi in x] == [None] * 5


def test_cbc_crash_is_an_error_with_its_last_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cbc(tmp_path, monkeypatch, "echo 'Segmentation fault'\nexit 3\n")
    prob, _ = make_knapsack()

    result = run_backend(prob, BackendOptions())

    assert result.status is SolveStatus.ERROR
    assert "code 3" in result.message
    assert "Segmentation fault" in result.message


# --------------------------------------------------------------------------- HiGHS only


@pytest.mark.skipif("highs" not in available_backends(), reason="highspy is not installed")
def test_highs_accepts_a_new_thread_count_in_the_same_process() -> None:
    # HiGHS sizes a per-thread scheduler on first use; a changed count used to be an ERROR.
    for threads in (1, 2, 1):
        prob, _ = make_knapsack()
        result = run_backend(prob, BackendOptions(backend="highs", threads=threads))
        assert result.status is SolveStatus.OPTIMAL


@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists(), reason="needs util-linux setpriv")
def test_cbc_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    """SIGKILL of Python (no handler can run) must not orphan the solver process."""
    import signal
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from solver.optimize.backends.cbc import _spawn_cbc\n"
        "child = _spawn_cbc(['sleep', '60'])\n"
        "print(child.proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        pid = int(parent.stdout.readline())
        # setpriv arms PR_SET_PDEATHSIG only once it runs, then execs the solver: a parent
        # killed before that (a loaded CI machine) leaves nothing armed, so wait for the exec
        armed = time.monotonic() + 10
        while Path(f"/proc/{pid}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < armed, "setpriv never started the stand-in solver"
            time.sleep(0.01)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # a zombie counts as dead: it is reaped by init
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the solver process outlived its killed parent")
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdout.close()


@pytest.mark.parametrize(
    ("ran_out", "expected"), [(True, SolveStatus.TIME_LIMIT), (False, SolveStatus.INFEASIBLE)]
)
def test_cbc_infeasible_from_preprocessing_cut_short_is_a_time_limit(ran_out, expected) -> None:
    """CBC 2.10.3 says "infeasible" when -sec strikes inside preprocessing (log lines as
    captured from resnet18 at GPU 60%, 1.5 s); only an unhurried verdict is believed."""
    from solver.optimize.backends._common import Tracker
    from solver.optimize.backends.cbc import _cbc_status

    tracker = Tracker(0.0, None)
    tracker.tail.extend(
        [
            "Cgl0000I Cut generators found to be infeasible! (or unbounded)",
            "Pre-processing says infeasible or unbounded",
        ]
    )
    header = "Infeasible - objective value 0.00000000"
    status, _ = _cbc_status(header, None, 0, tracker, ran_out)
    assert status is expected


def test_mps_written_in_chunks_is_the_same_file_and_solves_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_mps streams the file in chunks (a 1.6 M-coefficient relaxation held it whole as
    1.6 M strings beside a solve); a chunk of 3 lines must give the file a single one does."""
    from solver.document.generators import unit_chain
    from solver.optimize.backends import lp
    from solver.optimize.relaxation import build_relaxation

    program = build_relaxation(unit_chain(4, budget=3)).program
    lp.write_mps(program, str(tmp_path / "whole.mps"))
    monkeypatch.setattr(lp, "MPS_CHUNK_LINES", 3)
    lp.write_mps(program, str(tmp_path / "chunked.mps"))
    whole = (tmp_path / "whole.mps").read_text()
    assert (tmp_path / "chunked.mps").read_text() == whole
    assert whole.startswith("NAME") and whole.endswith("ENDATA\n")
    assert whole.count("\n") > 3 * 10  # many chunks, not one
    outcome = run_backend(program, BackendOptions(backend="cbc", time_limit_s=30))
    assert outcome.status is SolveStatus.OPTIMAL and outcome.objective == pytest.approx(12.0)


def test_a_cancel_stops_writing_the_model_and_cbc_is_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a 5,107-operation tower's relaxation (1.6 M coefficients) was still being written when
    # its solve reached the time limit, which then waited for the file
    from solver.document.generators import unit_chain
    from solver.optimize.backends import lp
    from solver.optimize.relaxation import build_relaxation

    def no_spawn(args):
        raise AssertionError("CBC was started")

    program = build_relaxation(unit_chain(4, budget=3)).program
    monkeypatch.setattr(lp, "MPS_CHUNK_LINES", 3)
    monkeypatch.setattr(cbc, "_spawn_cbc", no_spawn)
    stop = threading.Event()
    stop.set()
    with pytest.raises(lp.WriteStopped):
        lp.write_mps(program, str(tmp_path / "stopped.mps"), stop)
    result = cbc.run_cbc(program, BackendOptions(time_limit_s=30), _common.Tracker(0.0, None), stop)
    assert result.status is SolveStatus.CANCELLED and not result.has_solution
    assert result.message == "cancelled while the model was written: CBC was not started"


def test_cbc_is_not_started_when_writing_its_model_took_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a model of 441,111 rows took 6.6-7.9 s to write beside the other searches; CBC started
    # then could not even read it before the limit, and was stopped 2.5 s past it
    def slow_write(program, path, cancel=None) -> None:
        time.sleep(0.8)
        real_write(program, path, cancel)

    def no_spawn(args):
        raise AssertionError("CBC was started")

    real_write = cbc.write_mps
    monkeypatch.setattr(cbc, "write_mps", slow_write)
    monkeypatch.setattr(cbc, "_spawn_cbc", no_spawn)
    prob, _ = make_knapsack()
    result = run_backend(prob, BackendOptions(time_limit_s=1.0))
    assert result.status is SolveStatus.TIME_LIMIT and not result.has_solution
    assert "the time limit came while the model was written" in result.message
    assert "CBC was not started" in result.message

"""Run a PuLP minimisation MILP on CBC or HiGHS with live progress, limits and cancellation.

PuLP's own ``prob.solve()`` gives the GUI nothing to hold on to: ``PULP_CBC_CMD`` waits on a
process it never exposes, CBC's log is block-buffered when piped, and PuLP reports a
time-limited or interrupted run as "Optimal". So CBC is run here as a process we own (under a
pty, so every log line arrives when printed; SIGINT keeps the incumbent), and HiGHS runs in
process with its callbacks switched on. Both report our :class:`~solver.status.SolveStatus`
(spec/model.md section 4; notes: qt-stack.md section 2.4).
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pulp

from solver.status import Progress, SolveStatus

try:
    import highspy
except ImportError:  # HiGHS is optional: CBC ships with PuLP 3.x
    highspy = None

__all__ = ["BackendOptions", "BackendResult", "available_backends", "run_backend"]

BACKENDS = ("cbc", "highs")
LOG_TAIL_LINES = 200
POLL_S = 0.05
"""How often the CBC reader and the HiGHS watcher look at the cancel Event."""
SIGINT_GRACE_S = 1.5
"""How long CBC may take to write its incumbent after SIGINT before it is killed."""
HARD_STOP_GRACE_S = 5.0
"""CBC ignores ``-sec`` in preprocessing (coin-or/pulp#699), so we stop it at limit + this."""
_NO_INCUMBENT = 1e49  # CBC prints 1e+50 as "best solution" until it has one
_CBC_PATTERNS = (
    re.compile(
        r"Cbc0010I After \d+ nodes, \d+ on tree, (?P<inc>\S+) best solution, "
        r"best possible (?P<bound>\S+)"
    ),
    re.compile(r"Cbc00(?:04|12)I Integer solution of (?P<inc>\S+)"),
    re.compile(r"Cbc0045I MIPStart provided solution with cost (?P<inc>\S+)"),
    re.compile(
        r"Cbc0005I Partial search - best objective (?P<inc>\S+) "
        r"\(best possible (?P<bound>[^)\s]+)\)"
    ),
    re.compile(r"Cbc0001I Search completed - best objective (?P<inc>[^,\s]+)"),
    re.compile(r"Continuous objective value is (?P<bound>\S+)"),
    re.compile(r"^Objective value:\s+(?P<inc>\S+)"),
    re.compile(r"^Lower bound:\s+(?P<bound>\S+)"),
)


@dataclass(frozen=True)
class BackendOptions:
    """How to run one solve; validated on construction so a bad setting fails before CBC starts.

    Parameters
    ----------
    backend : str
        ``"cbc"`` (bundled with PuLP) or ``"highs"`` (needs ``highspy``).
    time_limit_s : float
        Wall-clock limit in seconds; the best incumbent found by then is kept.
    gap_rel : float
        Relative MIP gap at which the backend may stop and call the result optimal.
    threads : int or None
        Solver threads; ``None`` keeps the backend's default.
    warm_start : bool
        Use the variables' current ``varValue`` as a MIP start (e.g. the previous budget's
        schedule), which gives the search an incumbent from the first second.
    """

    backend: str = "cbc"
    time_limit_s: float = 60.0
    gap_rel: float = 1e-4
    threads: int | None = None
    warm_start: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}; got {self.backend!r}")
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise ValueError(f"time_limit_s must be a positive number; got {self.time_limit_s}")
        if not (math.isfinite(self.gap_rel) and self.gap_rel >= 0):
            raise ValueError(f"gap_rel must be >= 0; got {self.gap_rel}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or None; got {self.threads}")


@dataclass(frozen=True)
class BackendResult:
    """How a backend run ended, in our words rather than PuLP's (which says "Optimal" too often).

    ``objective`` and ``bound`` include the objective's constant term, which neither CBC nor
    PuLP's HiGHS bridge sees. ``has_solution`` is True exactly when every variable's
    ``varValue`` now holds the incumbent; otherwise the values were left untouched.
    """

    status: SolveStatus
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    has_solution: bool
    message: str = ""
    log_tail: tuple[str, ...] = ()


def available_backends() -> list[str]:
    """List the backends this installation can run, so the GUI offers only those.

    Returns
    -------
    list of str
        ``["cbc"]``, plus ``"highs"`` when ``highspy`` imports.

    Examples
    --------
    >>> available_backends()[0]
    'cbc'
    """
    return ["cbc", "highs"] if highspy is not None else ["cbc"]


def run_backend(
    prob: pulp.LpProblem,
    options: BackendOptions,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
) -> BackendResult:
    """Solve ``prob`` with one backend, reporting progress and obeying a cancel Event.

    Parameters
    ----------
    prob : pulp.LpProblem
        A minimisation MILP. On ``has_solution`` its variables hold the incumbent, as after
        ``prob.solve()``; ``prob.status``/``prob.sol_status`` are set honestly (a stopped run
        is "Not Solved" with an integer-feasible solution, never "Optimal").
    options : BackendOptions
        Backend, limits and warm start.
    on_progress : callable, optional
        Called on the solving thread with a :class:`Progress` per log line and per new
        incumbent; it must be quick (the GUI throttles redraws itself).
    cancel : threading.Event, optional
        Set it from any thread to stop; the incumbent, if any, is kept. Polled every 50 ms.

    Returns
    -------
    BackendResult
        Never raises for solver trouble: a crash, an unreadable answer or a hung CBC is
        ``SolveStatus.ERROR`` or ``TIME_LIMIT`` with a message.

    Raises
    ------
    ValueError
        If ``prob`` maximises or the backend is not installed.
    Exception
        Whatever ``on_progress`` raises, after CBC has been killed or HiGHS stopped.

    Examples
    --------
    >>> prob = pulp.LpProblem("tiny", pulp.LpMinimize)
    >>> x = prob.add_variable("x", 0, 3, cat="Integer")
    >>> prob += 2 * x + 1
    >>> prob += x >= 1.5, "at_least"
    >>> result = run_backend(prob, BackendOptions(time_limit_s=10))
    >>> result.status, result.objective, x.varValue
    (<SolveStatus.OPTIMAL: 'optimal'>, 5.0, 2.0)
    """
    if prob.sense != pulp.LpMinimize:
        raise ValueError("run_backend expects a minimisation problem; bounds assume it")
    if options.backend not in available_backends():
        raise ValueError(f"backend {options.backend!r} is not installed; use 'cbc'")
    tracker = _Tracker(_objective_constant(prob), on_progress)
    if options.backend == "highs":
        return _run_highs(prob, options, tracker, cancel)
    return _run_cbc(prob, options, tracker, cancel)


class _Tracker:
    """Best incumbent and bound so far (in model units), the log tail, and the callback."""

    def __init__(self, offset: float, on_progress: Callable[[Progress], None] | None) -> None:
        self.start = time.monotonic()
        self.offset = offset
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._on_progress = on_progress

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def see(self, incumbent: float | str | None = None, bound: float | str | None = None) -> None:
        """Record solver-unit values; incumbents only improve, the latest bound wins."""
        inc = _as_float(incumbent)
        if inc is not None and abs(inc) < _NO_INCUMBENT:
            inc += self.offset
            self.incumbent = inc if self.incumbent is None else min(self.incumbent, inc)
        low = _as_float(bound)
        if low is not None and abs(low) < _NO_INCUMBENT:
            self.bound = low + self.offset

    def gap(self) -> float | None:
        return _relative_gap(self.incumbent, self.bound)

    def line(self, text: str) -> None:
        text = text.rstrip()
        if text:
            self.tail.append(text)
            self.report(text)

    def report(self, line: str | None = None) -> None:
        if self._on_progress is not None:
            bound = self.bound
            if bound is not None and self.incumbent is not None:
                bound = min(bound, self.incumbent)  # CBC's cutoff can push it past the incumbent
            self._on_progress(Progress(self.elapsed(), self.incumbent, bound, self.gap(), line))


# --------------------------------------------------------------------------- CBC


@dataclass
class _CbcProcess:
    """A running CBC and the file descriptor its merged stdout/stderr is read from."""

    proc: subprocess.Popen[bytes]
    fd: int
    owns_fd: bool  # True for a pty master we must close; a pipe is closed via proc.stdout


def _run_cbc(
    prob: pulp.LpProblem,
    options: BackendOptions,
    tracker: _Tracker,
    cancel: threading.Event | None,
) -> BackendResult:
    """Write MPS, run CBC under our control, and read its solution back into ``prob``."""
    cbc = pulp.PULP_CBC_CMD.pulp_cbc_path  # a class attribute: no PuLP 4 deprecation warning
    if not (pulp.PULP_CBC_CMD._permissions_ok and os.access(cbc, os.X_OK)):
        return _error(tracker, f"the CBC bundled with PuLP is not executable: {cbc}")
    coin = pulp.COIN_CMD(path=cbc, msg=False)  # only for its .sol reader and MIP start writer
    with tempfile.TemporaryDirectory(prefix="xengine-cbc-") as tmp:
        mps, sol, mst = (os.path.join(tmp, f"model.{ext}") for ext in ("mps", "sol", "mst"))
        was_none, dummy = prob.fixObjective()  # as prob.solve() does for a constant objective
        try:
            vs, var_names, con_names, _ = prob.writeMPS(mps, rename=1)
        finally:
            prob.restoreObjective(was_none, dummy)
        if options.warm_start:
            coin.writesol(mst, prob, vs, var_names, con_names)
        child = _spawn_cbc(_cbc_args(cbc, mps, sol, mst if options.warm_start else None, options))
        try:
            deadline = tracker.start + options.time_limit_s + HARD_STOP_GRACE_S
            reason = _pump_cbc(child, tracker, cancel, deadline)
        finally:
            _reap(child)
        ok = child.proc.returncode == 0 and os.path.exists(sol)
        header = _first_line(sol) if ok else ""
        status, message = _cbc_status(header, reason, child.proc.returncode, tracker)
        solved = status.has_solution_possible and _cbc_header_has_solution(header)
        if solved:
            values = coin.readsol_MPS(sol, prob, vs, var_names, con_names)[1]
            prob.assignVarsVals(values)
    return _finish(prob, tracker, status, solved, message, options.gap_rel)


def _cbc_args(cbc: str, mps: str, sol: str, mst: str | None, options: BackendOptions) -> list[str]:
    """CBC's command line; names checked against ``cbc ?`` of the bundled 2.10.3."""
    args = [cbc, mps, "-timeMode", "elapsed", "-sec", f"{options.time_limit_s:g}"]
    args += ["-ratio", f"{options.gap_rel:g}"]
    if options.threads is not None:
        args += ["-threads", str(options.threads)]
    if mst is not None:
        args += ["-mips", mst]
    return [*args, "-printingOptions", "all", "-solve", "-solution", sol]


def _spawn_cbc(args: list[str]) -> _CbcProcess:
    """Start CBC in its own session with line-buffered output (pty, else pipe + stdbuf)."""
    common = {"stdin": subprocess.DEVNULL, "start_new_session": True, "close_fds": True}
    try:
        master, slave = pty.openpty()  # CBC's stdio sees a terminal and flushes every line
    except OSError:  # no devpts (some chroots/containers): fall back to stdbuf on a pipe
        stdbuf = shutil.which("stdbuf")
        cmd = [stdbuf, "-oL", *args] if stdbuf else args
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **common)
        return _CbcProcess(proc, proc.stdout.fileno(), owns_fd=False)
    try:
        proc = subprocess.Popen(args, stdout=slave, stderr=slave, **common)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)  # otherwise the master never sees EOF when CBC exits
    return _CbcProcess(proc, master, owns_fd=True)


def _pump_cbc(
    child: _CbcProcess, tracker: _Tracker, cancel: threading.Event | None, deadline: float
) -> str | None:
    """Forward CBC's log line by line until it exits; stop it on cancel or past the deadline.

    Returns ``"cancel"`` or ``"deadline"`` when we stopped CBC, else ``None``.
    """
    reason: str | None = None
    stopped_at: float | None = None
    pending = b""
    while True:
        now = time.monotonic()
        if reason is None and cancel is not None and cancel.is_set():
            reason = "cancel"
        elif reason is None and now > deadline:
            reason = "deadline"
        if reason is not None and stopped_at is None:
            stopped_at = now
            _signal(child, signal.SIGINT)  # CBC stops branching and writes its incumbent
        elif stopped_at is not None and now - stopped_at > SIGINT_GRACE_S:
            _signal(child, signal.SIGKILL)
        chunk = _read_chunk(child.fd, POLL_S)
        if chunk == b"" or (chunk is None and child.proc.poll() is not None):
            break  # EOF, or CBC is gone and something it started still holds the output
        if chunk is not None:
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                _cbc_line(tracker, raw.decode("utf-8", "replace").strip("\r"))
    if pending:
        _cbc_line(tracker, pending.decode("utf-8", "replace").strip("\r"))
    return reason


def _read_chunk(fd: int, timeout: float) -> bytes | None:
    """Read what is available: bytes, ``b""`` at end of output, ``None`` if nothing yet."""
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return None
    try:
        return os.read(fd, 65536)
    except OSError as exc:
        if exc.errno == errno.EIO:  # a pty master reports EIO once CBC has closed its side
            return b""
        raise


def _cbc_line(tracker: _Tracker, line: str) -> None:
    """Pick incumbent and bound out of one CBC log line, then report it."""
    for pattern in _CBC_PATTERNS:
        match = pattern.search(line)
        if match:
            found = match.groupdict()
            tracker.see(found.get("inc"), found.get("bound"))
            break
    # An exhausted tree proves the incumbent optimal, unless CBC left early on the gap
    # (Cbc0011I); then the summary's "Lower bound:" line follows.
    if (
        line.startswith("Cbc0001I")
        and tracker.incumbent is not None
        and not any(seen.startswith("Cbc0011I") for seen in tracker.tail)
    ):
        tracker.see(bound=tracker.incumbent - tracker.offset)
    tracker.line(line)


def _signal(child: _CbcProcess, sig: signal.Signals) -> None:
    """Signal CBC (SIGINT) or its whole process group (SIGKILL), ignoring a finished one."""
    if child.proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        if sig == signal.SIGKILL:
            os.killpg(child.proc.pid, sig)  # start_new_session made the pid the group id
        else:
            child.proc.send_signal(sig)


def _reap(child: _CbcProcess) -> None:
    """Make sure CBC is dead and waited for, and its output closed, whatever happened."""
    try:
        if child.proc.poll() is None:
            _signal(child, signal.SIGKILL)
        child.proc.wait()
    finally:
        if child.owns_fd:
            os.close(child.fd)
        elif child.proc.stdout is not None:
            child.proc.stdout.close()


def _cbc_status(
    header: str, reason: str | None, returncode: int | None, tracker: _Tracker
) -> tuple[SolveStatus, str]:
    """Map the .sol file's first line (and why we stopped CBC) onto our statuses."""
    words = header.split(" - objective value")[0].strip()
    result = next((s for s in reversed(tracker.tail) if s.startswith("Result - ")), words)
    if words.startswith("Optimal"):
        return SolveStatus.OPTIMAL, result
    if words.startswith(("Infeasible", "Integer infeasible")):
        return SolveStatus.INFEASIBLE, f"CBC proved the model infeasible ({words})"
    if words.startswith("Unbounded"):
        return SolveStatus.ERROR, "CBC found the model unbounded; every variable needs bounds"
    found = _cbc_header_has_solution(header)
    if words.startswith("Stopped") and reason != "deadline":
        if reason == "cancel" or "ctrl-c" in words:  # after SIGINT 2.10.3 says "iterations"
            kept = "kept its incumbent" if found else "had no incumbent yet"
            return SolveStatus.CANCELLED, f"cancelled; CBC {kept}"
        if "difficulties" in words and not found:
            return SolveStatus.ERROR, f"CBC gave up: {words}"
        return (SolveStatus.FEASIBLE if found else SolveStatus.TIME_LIMIT), result
    if reason == "cancel":
        return SolveStatus.CANCELLED, "cancelled before CBC wrote a solution"
    if reason == "deadline":
        return (SolveStatus.FEASIBLE if found else SolveStatus.TIME_LIMIT), (
            f"CBC overran its time limit by {HARD_STOP_GRACE_S:g} s and was stopped"
        )
    last = tracker.tail[-1] if tracker.tail else "no output"
    return SolveStatus.ERROR, f"CBC exited with code {returncode} without a solution: {last}"


def _cbc_header_has_solution(header: str) -> bool:
    """Whether a .sol header carries an integer solution (not the LP relaxation's values)."""
    words = header.split(" - objective value")[0]
    if not header or "no integer solution" in words:
        return False
    return words.startswith(("Optimal", "Stopped"))


def _first_line(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.readline().strip()


# --------------------------------------------------------------------------- HiGHS


class _CancellableHiGHS(pulp.HiGHS):
    """PuLP's in-process HiGHS with progress callbacks, a MIP start and a cancel hook.

    ``output_flag`` stays on because HiGHS only fires its logging callbacks then;
    ``log_to_console`` off keeps stdout quiet (qt-stack.md section 2.4).
    """

    def __init__(self, options: BackendOptions, tracker: _Tracker) -> None:
        super().__init__(
            msg=True,
            timeLimit=options.time_limit_s,
            gapRel=options.gap_rel,
            threads=options.threads,
            log_to_console=False,
        )
        self._options = options
        self._tracker = tracker
        self._highs = None
        self._cancel_requested = False
        self.callback_error: BaseException | None = None
        self.outcome: tuple[SolveStatus, bool, float | None, str] | None = None

    def request_cancel(self) -> None:
        """Ask HiGHS to stop; safe from any thread, also before the model exists."""
        self._cancel_requested = True
        if self._highs is not None:
            self._highs.cancelSolve()

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        super().createAndConfigureSolver(lp)
        h = lp.solverModel
        h.HandleUserInterrupt = True
        h.cbLogging.subscribe(self._guard(self._on_log))
        h.cbMipImprovingSolution.subscribe(self._guard(self._on_incumbent))
        h.cbMipLogging.subscribe(self._guard(self._on_mip_log))
        self._highs = h
        if self._cancel_requested:  # a cancel that came while we were building
            h.cancelSolve()

    def callSolver(self, lp: pulp.LpProblem) -> None:
        if self._options.warm_start:
            _set_highs_start(lp)
        super().callSolver(lp)

    def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
        """Read status, bound and (only if there is one) the solution; PuLP's maps both
        time limit and interrupt to "Optimal" and indexes an empty solution when infeasible."""
        h = lp.solverModel
        model_status = h.getModelStatus()
        info = h.getInfo()
        feasible = int(highspy.SolutionStatus.kSolutionStatusFeasible)
        found = int(info.primal_solution_status) == feasible
        status = _highs_status(model_status, found)
        solved = found and status.has_solution_possible
        if solved:
            values = h.getSolution().col_value
            for var in lp.variables():
                var.varValue = values[var.index]
        message = h.modelStatusToString(model_status)
        self.outcome = (status, solved, info.mip_dual_bound, message)
        return _pulp_codes(status, solved)

    def _guard(self, handler: Callable[[object], None]) -> Callable[[object], None]:
        """Keep callback exceptions out of HiGHS's C++ loop: remember, cancel, re-raise later."""

        def guarded(event: object) -> None:
            if self.callback_error is not None:
                return
            try:
                handler(event)
            except Exception as exc:  # must not unwind through C++; _run_highs re-raises it
                self.callback_error = exc
                self.request_cancel()

        return guarded

    def _on_log(self, event: highspy.HighsCallbackEvent) -> None:
        for text in str(event.message).splitlines():
            self._tracker.line(text)

    def _on_incumbent(self, event: highspy.HighsCallbackEvent) -> None:
        self._tracker.see(incumbent=event.data_out.objective_function_value)
        self._tracker.report()

    def _on_mip_log(self, event: highspy.HighsCallbackEvent) -> None:
        out = event.data_out  # the log line that follows reports these
        self._tracker.see(out.objective_function_value, out.mip_dual_bound)


def _run_highs(
    prob: pulp.LpProblem,
    options: BackendOptions,
    tracker: _Tracker,
    cancel: threading.Event | None,
) -> BackendResult:
    """Solve on a fresh thread while this one watches the cancel Event.

    HiGHS keeps one task scheduler per calling thread, sized by the first solve's
    ``threads``; a later solve on that thread with another count fails ("scheduler has
    already been initialized"). A new thread per solve gets a new scheduler, and the waiting
    caller doubles as the watcher that forwards ``cancel`` to ``cancelSolve()``.
    """
    solver = _CancellableHiGHS(options, tracker)
    failure: list[BaseException] = []

    def solve() -> None:
        try:
            prob.solve(solver)
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)
        finally:  # drop HiGHS's model copy and our callbacks, which hold on_progress
            prob.solverModel = None
            prob.solver = None

    worker = threading.Thread(target=solve, name="highs-solve", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            if cancel is not None and cancel.is_set():
                solver.request_cancel()
    finally:
        if worker.is_alive():  # we are unwinding (e.g. KeyboardInterrupt): stop HiGHS first
            solver.request_cancel()
            worker.join()
    if failure or solver.callback_error is not None:
        raise (failure or [solver.callback_error])[0]
    if solver.outcome is None:
        return _error(tracker, "HiGHS returned without a status")
    status, solved, bound, message = solver.outcome
    tracker.see(bound=bound)
    return _finish(prob, tracker, status, solved, message, options.gap_rel)


def _set_highs_start(lp: pulp.LpProblem) -> None:
    """Hand the variables' current values to HiGHS as a (possibly partial) MIP start."""
    known = [(var.index, var.varValue) for var in lp.variables() if var.varValue is not None]
    if known:
        index = np.array([i for i, _ in known], dtype=np.int32)
        value = np.array([v for _, v in known], dtype=np.float64)
        lp.solverModel.setSolution(len(known), index, value)


def _highs_status(model_status: object, solved: bool) -> SolveStatus:
    """Map a ``HighsModelStatus`` onto ours; limits keep or lack an incumbent."""
    kind = highspy.HighsModelStatus
    if model_status == kind.kOptimal:
        return SolveStatus.OPTIMAL
    if model_status in (kind.kInfeasible, kind.kUnboundedOrInfeasible):
        return SolveStatus.INFEASIBLE
    if model_status == kind.kInterrupt:
        return SolveStatus.CANCELLED
    limits = (kind.kTimeLimit, kind.kIterationLimit, kind.kSolutionLimit)
    if model_status in limits:
        return SolveStatus.FEASIBLE if solved else SolveStatus.TIME_LIMIT
    return SolveStatus.ERROR


# --------------------------------------------------------------------------- shared


def _finish(
    prob: pulp.LpProblem,
    tracker: _Tracker,
    status: SolveStatus,
    solved: bool,
    message: str,
    gap_rel: float,
) -> BackendResult:
    """Build the result from the assigned values, so the objective includes its constant."""
    prob.assignStatus(*_pulp_codes(status, solved))
    objective = _objective_value(prob) if solved else None
    bound = tracker.bound if status != SolveStatus.INFEASIBLE else None
    if bound is not None and objective is not None:
        bound = min(bound, objective)
    stale = (_relative_gap(objective, bound) or 0.0) > gap_rel
    if status == SolveStatus.OPTIMAL and (bound is None or stale):
        # The backend proved the gap closed; a bound that says otherwise is an old log line
        # (e.g. CBC's LP relaxation when presolve or the cutoff finished the search).
        bound = objective
    return BackendResult(
        status=status,
        objective=objective,
        bound=bound,
        gap=_relative_gap(objective, bound),
        seconds=tracker.elapsed(),
        has_solution=solved,
        message=message,
        log_tail=tuple(tracker.tail),
    )


def _error(tracker: _Tracker, message: str) -> BackendResult:
    return BackendResult(
        SolveStatus.ERROR, None, None, None, tracker.elapsed(), False, message, tuple(tracker.tail)
    )


def _pulp_codes(status: SolveStatus, solved: bool) -> tuple[int, int]:
    """PuLP's (status, sol_status) that do not lie: only a proven optimum is "Optimal"."""
    if status == SolveStatus.OPTIMAL:
        return pulp.LpStatusOptimal, pulp.LpSolutionOptimal
    if status == SolveStatus.INFEASIBLE:
        return pulp.LpStatusInfeasible, pulp.LpSolutionInfeasible
    if solved:
        return pulp.LpStatusNotSolved, pulp.LpSolutionIntegerFeasible
    return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound


def _objective_constant(prob: pulp.LpProblem) -> float:
    return float(prob.objective.constant) if prob.objective is not None else 0.0


def _objective_value(prob: pulp.LpProblem) -> float:
    value = prob.objective.value() if prob.objective is not None else 0.0
    return float(value) if value is not None else math.nan


def _relative_gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None:
        return None
    return max(0.0, objective - bound) / max(abs(objective), 1e-9)


def _as_float(text: float | str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None

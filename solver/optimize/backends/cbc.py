"""Run CBC as a process we own: MPS in, live log over a pty, SIGINT to stop, .sol back.

PuLP's ``PULP_CBC_CMD`` waits on a process it never exposes and CBC's log is block-buffered
when piped, so CBC runs here under a pty (every log line arrives when printed) in its own
session. SIGINT makes it stop branching and write its incumbent; past a grace period, or past
the time limit plus :data:`HARD_STOP_GRACE_S`, its process group is killed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pulp

from solver.optimize.backends._common import (
    POLL_S,
    BackendResult,
    Cancel,
    Tracker,
    error_result,
    finish_result,
)
from solver.optimize.backends.lp import (
    LinearProgram,
    WriteStopped,
    read_cbc_solution,
    write_mip_start,
    write_mps,
)
from solver.status import SolveStatus

if TYPE_CHECKING:
    from solver.optimize.backends import BackendOptions

__all__ = ["HARD_STOP_GRACE_S", "SIGINT_GRACE_S", "run_cbc"]

SIGINT_GRACE_S = 1.5
"""How long CBC may take to write its incumbent after SIGINT before it is killed."""
HARD_STOP_GRACE_S = 1.0
"""CBC ignores ``-sec`` in preprocessing (coin-or/pulp#699), so we stop it at limit + this
(then SIGINT, and SIGKILL after :data:`SIGINT_GRACE_S`): a solve ends within 2.5 s of its limit."""
CBC_LEAST_S = 1.0
"""CBC is not started when writing its model took more than half its time and less than this
is left: reading a 441,111-row model took it 1.5 s, so it would only be stopped, up to
:data:`HARD_STOP_GRACE_S` + :data:`SIGINT_GRACE_S` past the limit (a 15 s solve of a 250-node
random graph ended at 17.6 s; 16.1 s without the start)."""
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


@dataclass
class _CbcProcess:
    """A running CBC and the file descriptor its merged stdout/stderr is read from."""

    proc: subprocess.Popen[bytes]
    fd: int
    owns_fd: bool  # True for a pty master we must close; a pipe is closed via proc.stdout


def run_cbc(
    program: LinearProgram,
    options: BackendOptions,
    tracker: Tracker,
    cancel: Cancel | None,
    start: np.ndarray | None = None,
    on_started: Callable[[], None] | None = None,
) -> BackendResult:
    """Write MPS, run CBC under our control, and read its solution back; ``on_started`` is
    called once CBC runs (writing the file is Python, CBC is not)."""
    cbc = pulp.PULP_CBC_CMD.pulp_cbc_path  # a class attribute: no PuLP 4 deprecation warning
    if not (pulp.PULP_CBC_CMD._permissions_ok and os.access(cbc, os.X_OK)):
        return error_result(tracker, f"the CBC bundled with PuLP is not executable: {cbc}")
    with tempfile.TemporaryDirectory(prefix="xengine-cbc-") as tmp:
        mps, sol, mst = (os.path.join(tmp, f"model.{ext}") for ext in ("mps", "sol", "mst"))
        try:
            write_mps(program, mps, cancel)
        except WriteStopped:
            why = "cancelled while the model was written: CBC was not started"
            return BackendResult(
                SolveStatus.CANCELLED, None, None, None, tracker.elapsed(), False, why
            )
        if start is not None:
            write_mip_start(start, mst)
        # writing a large model takes seconds (441,111 rows: 6.6 s beside the exact search)
        left = options.time_limit_s - tracker.elapsed()
        if left < min(CBC_LEAST_S, options.time_limit_s / 2):
            why = (
                f"the time limit came while the model was written ({tracker.elapsed():.1f} s "
                "of the backend's time): CBC was not started"
            )
            return BackendResult(
                SolveStatus.TIME_LIMIT, None, None, None, tracker.elapsed(), False, why
            )
        args = _cbc_args(
            cbc, mps, sol, mst if start is not None else None, replace(options, time_limit_s=left)
        )
        child = _spawn_cbc(args)
        if on_started is not None:
            on_started()
        try:
            deadline = tracker.start + options.time_limit_s + HARD_STOP_GRACE_S
            reason = _pump_cbc(child, tracker, cancel, deadline)
        finally:
            _reap(child)
        ok = child.proc.returncode == 0 and os.path.exists(sol)
        header = _first_line(sol) if ok else ""
        ran_out = reason is not None or tracker.elapsed() >= 0.95 * options.time_limit_s
        status, message = _cbc_status(header, reason, child.proc.returncode, tracker, ran_out)
        solved = status.has_solution_possible and _cbc_header_has_solution(header)
        values = read_cbc_solution(sol, program.num_cols) if solved else None
    return finish_result(program, tracker, status, values, message, options.gap_rel)


def _cbc_args(cbc: str, mps: str, sol: str, mst: str | None, options: BackendOptions) -> list[str]:
    """CBC's command line; names checked against ``cbc ?`` of the bundled 2.10.3."""
    args = [cbc, mps, "-timeMode", "elapsed", "-sec", f"{options.time_limit_s:g}"]
    args += ["-ratio", f"{options.gap_rel:g}"]
    if options.threads is not None:
        args += ["-threads", str(options.threads)]
    if options.cutoff is not None:
        args += ["-cutoff", repr(float(options.cutoff))]
    if mst is not None:
        args += ["-mips", mst]
    return [*args, "-printingOptions", "all", "-solve", "-solution", sol]


def _dies_with_parent(args: list[str]) -> list[str]:
    """Prefix ``args`` so CBC gets SIGKILL when the thread that started it dies (Linux
    ``PR_SET_PDEATHSIG`` through util-linux's ``setpriv``, which then execs CBC).

    Our own signal handlers stop CBC on Ctrl-C, SIGTERM and SIGHUP; this covers what they
    cannot: SIGKILL, a crash, or an out-of-memory kill of Python, which would otherwise leave
    CBC running with its temporary folder. ``preexec_fn`` would do the same but is unsafe in
    a process with threads (the GUI's workers, the neighbourhood search). Without
    ``setpriv`` (not Linux), CBC starts as before.
    """
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "KILL", "--", *args] if setpriv else args


def _spawn_cbc(args: list[str]) -> _CbcProcess:
    """Start CBC in its own session with line-buffered output (pty, else pipe + stdbuf)."""
    common: dict[str, Any] = {
        "stdin": subprocess.DEVNULL,
        "start_new_session": True,
        "close_fds": True,
    }
    args = _dies_with_parent(args)
    try:
        master, slave = pty.openpty()  # CBC's stdio sees a terminal and flushes every line
    except OSError:  # no devpts (some chroots/containers): fall back to stdbuf on a pipe
        stdbuf = shutil.which("stdbuf")
        cmd = [stdbuf, "-oL", *args] if stdbuf else args
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **common)
        assert proc.stdout is not None  # stdout=PIPE
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
    child: _CbcProcess, tracker: Tracker, cancel: Cancel | None, deadline: float
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


def _cbc_line(tracker: Tracker, line: str) -> None:
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
    header: str,
    reason: str | None,
    returncode: int | None,
    tracker: Tracker,
    ran_out: bool = False,
) -> tuple[SolveStatus, str]:
    """Map the .sol file's first line (and why we stopped CBC) onto our statuses.

    ``ran_out``: the time limit had passed when CBC ended. CBC 2.10.3 then says
    "infeasible" if the limit struck inside its preprocessing (measured: resnet18 at GPU
    60% with 1.5 s, one run in four), so that claim is not taken at its word.
    """
    words = header.split(" - objective value")[0].strip()
    result = next((s for s in reversed(tracker.tail) if s.startswith("Result - ")), words)
    if words.startswith("Optimal"):
        return SolveStatus.OPTIMAL, result
    if words.startswith(("Infeasible", "Integer infeasible")):
        if ran_out and any("Pre-processing says infeasible" in line for line in tracker.tail):
            return SolveStatus.TIME_LIMIT, "the time limit ran out in CBC's preprocessing"
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

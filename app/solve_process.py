"""Run solver work (one solve, a comparison, a sweep) in a child process, with its reports relayed.

Why a process: building the MIQP and reading the answer back is pure Python. On a worker
*thread* it holds the GIL for most of a second (minutes for the big zoo graphs), and every Python
callback of the GUI thread (paint events of pyqtgraph items, timers) then queues for the GIL;
we measured 0.5-1 s event-loop stalls on the 30-layer chain. In a child process the worker
thread only waits on a pipe (GIL released), so the window stays fluid whatever the model size.

A *job* is a picklable callable ``job(report, cancel)`` (a ``functools.partial`` of a solver
function whose last two parameters are the report callback and the cancel Event, e.g.
``partial(solve, graph, method, options)``); it runs in the child, each ``report(item)`` reaches
the caller's ``on_item``, and its return value comes back. The child comes from a ``forkserver``
(a clean interpreter started once, with the core already imported: about 5 ms per job after a
0.3 s first start), never a fork of the Qt process. Cancelling sets the child's Event, which the
core polls to stop CBC with SIGINT and keep the incumbent. No Qt here: the caller
(``app.workers``) turns the callbacks into signals.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.execution.simulate import Timeline, simulate
from solver.optimize.methods import solve
from solver.optimize.solve import SolveOptions, SolveResult
from solver.status import Progress

__all__ = [
    "Job",
    "ProvisionalSchedule",
    "SolveProcessError",
    "run_in_process",
    "solve_reporting_incumbents",
]

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often the relay looks at the cancel Event while no message arrives."""
KILL_GRACE_S = 20.0
"""After a cancel, how long the child may take to deliver its incumbent before it is killed."""
CHILD_NICENESS = 10
"""How much lower the solver child's CPU priority is than the window's (``os.nice``)."""
_context: multiprocessing.context.BaseContext | None = None

Job = Callable[[Callable[[object], None], threading.Event], object]
"""``job(report, cancel)``: picklable, run in the child (see the module docstring)."""


@dataclass(frozen=True)
class ProvisionalSchedule:
    """An incumbent found during a solve, replayed: drawn as provisional until the solve ends.

    ``objective`` is the incumbent's cost as the solver reported it (ms); ``timeline`` is the
    simulator's replay of ``schedule``, made in the child process.
    """

    elapsed_s: float
    objective: float | None
    schedule: Schedule
    timeline: Timeline


def solve_reporting_incumbents(
    graph: Graph,
    method: str,
    options: SolveOptions,
    report: Callable[[object], None],
    cancel: threading.Event | None = None,
) -> SolveResult:
    """``solver.optimize.methods.solve`` whose reports carry incumbents as
    :class:`ProvisionalSchedule`.

    A ``Progress`` with a ``schedule`` is reported without it (the schedule is not sent twice),
    followed by the replayed :class:`ProvisionalSchedule`; a schedule that does not replay
    validly is dropped (the final result is checked again anyway). Runs in the child.
    """

    def relay(progress: Progress) -> None:
        schedule = getattr(progress, "schedule", None)
        if schedule is None:
            report(progress)
            return
        report(replace(progress, schedule=None))
        timeline = simulate(graph, schedule)
        if timeline.valid:
            report(ProvisionalSchedule(progress.elapsed_s, progress.incumbent, schedule, timeline))

    return solve(graph, method, options, relay, cancel)


class SolveProcessError(RuntimeError):
    """The solve failed in the child process, or the child died; the message says how."""


def _get_context() -> multiprocessing.context.BaseContext:
    global _context
    if _context is None:
        methods = multiprocessing.get_all_start_methods()
        _context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        if _context.get_start_method() == "forkserver":
            # Children import the parent's __main__ (main.py) unless the server already has:
            # preloading it makes that a one-off cost instead of one per solve.
            _context.set_forkserver_preload(
                ["__main__", "solver.optimize.methods", "solver.sweeps.sweep", __name__]
            )
    return _context


def run_in_process(
    job: Job,
    on_item: Callable[[object], None] | None = None,
    cancel: threading.Event | None = None,
) -> object:
    """Run ``job`` in a child process; blocks (without the GIL) until its value arrives.

    ``on_item`` is called on the calling thread for every item the job reports; setting
    ``cancel`` sets the job's own cancel Event, and whatever the job returns then still comes
    back.

    Raises
    ------
    SolveProcessError
        When the job raised in the child (its message), or the child died without a value.
    """
    context = _get_context()
    receiver, sender = context.Pipe(duplex=False)
    child_cancel = context.Event()
    process = context.Process(
        target=_child_main,
        args=(sender, job, child_cancel),
        name="xengine-solve",
        daemon=True,
    )
    process.start()
    sender.close()  # only the child writes; EOF then means the child is gone
    try:
        return _relay(process, receiver, child_cancel, on_item, cancel)
    finally:
        receiver.close()
        process.join(timeout=5.0)
        if process.is_alive():
            logger.warning("solver process %s did not exit; killing it", process.pid)
            process.kill()
            process.join()


def _relay(process, receiver, child_cancel, on_item, cancel) -> object:
    cancelled_at: float | None = None
    while True:
        if cancel is not None and cancel.is_set() and cancelled_at is None:
            child_cancel.set()
            cancelled_at = time.monotonic()
        if cancelled_at is not None and time.monotonic() - cancelled_at > KILL_GRACE_S:
            process.kill()
            raise SolveProcessError("the solver did not stop after the cancel; it was killed")
        if not receiver.poll(POLL_S):
            continue
        try:
            kind, payload = receiver.recv()
        except EOFError:
            process.join(timeout=5.0)
            raise SolveProcessError(
                f"the solver process ended (exit code {process.exitcode}) without a result"
            ) from None
        if kind == "item":
            if on_item is not None:
                on_item(payload)
        elif kind == "result":
            return payload
        else:
            raise SolveProcessError(payload)


def _child_main(sender: multiprocessing.connection.Connection, job: Job, cancel) -> None:
    """The child's entry point: run the job, stream its items, send its value (or the error).

    The child (and the CBC it starts) runs at a lower CPU priority: on a busy machine the
    window must keep getting the CPU it needs to stay fluid, and the solve loses little.
    """
    try:
        os.nice(CHILD_NICENESS)
    except (AttributeError, OSError):  # no nice() on this platform, or not allowed
        pass
    try:
        value = job(lambda item: sender.send(("item", item)), cancel)
        sender.send(("result", value))
    except Exception as exc:  # noqa: BLE001 - the parent shows any failure as a message
        sender.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        sender.close()

"""Run ``solver.methods.solve`` in a child process, with progress and cancel relayed.

Why a process: building the MIQP and reading the answer back is pure Python. On a worker
*thread* it holds the GIL for most of a second (minutes for the big zoo graphs), and every Python
callback of the GUI thread (paint events of pyqtgraph items, timers) then queues for the GIL;
we measured 0.5-1 s event-loop stalls on the 30-layer chain. In a child process the worker
thread only waits on a pipe (GIL released), so the window stays fluid whatever the model size.

The child comes from a ``forkserver`` (a clean interpreter started once, with the core already
imported: about 5 ms per solve after a 0.3 s first start), never a fork of the Qt process.
Cancelling sets the child's Event, which the core polls to stop CBC with SIGINT and keep the
incumbent. No Qt here: the caller (``app.workers``) turns the callbacks into signals.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import threading
import time
from collections.abc import Callable

from solver.graph import Graph
from solver.solve import SolveOptions, SolveResult
from solver.status import Progress

__all__ = ["SolveProcessError", "solve_in_process"]

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often the relay looks at the cancel Event while no message arrives."""
KILL_GRACE_S = 20.0
"""After a cancel, how long the child may take to deliver its incumbent before it is killed."""
_context: multiprocessing.context.BaseContext | None = None


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
            _context.set_forkserver_preload(["__main__", "solver.methods", __name__])
    return _context


def solve_in_process(
    graph: Graph,
    method: str,
    options: SolveOptions,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
) -> SolveResult:
    """Solve in a child process; blocks (without the GIL) until the result arrives.

    ``on_progress`` is called on the calling thread for every report; setting ``cancel`` stops
    the solve, and the result (status CANCELLED, incumbent kept) still comes back.

    Raises
    ------
    SolveProcessError
        When the core raised in the child (its message), or the child died without a result.
    """
    context = _get_context()
    receiver, sender = context.Pipe(duplex=False)
    child_cancel = context.Event()
    process = context.Process(
        target=_child_main,
        args=(sender, graph, method, options, child_cancel),
        name="xengine-solve",
        daemon=True,
    )
    process.start()
    sender.close()  # only the child writes; EOF then means the child is gone
    try:
        return _relay(process, receiver, child_cancel, on_progress, cancel)
    finally:
        receiver.close()
        process.join(timeout=5.0)
        if process.is_alive():
            logger.warning("solver process %s did not exit; killing it", process.pid)
            process.kill()
            process.join()


def _relay(process, receiver, child_cancel, on_progress, cancel) -> SolveResult:
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
        if kind == "progress":
            if on_progress is not None:
                on_progress(payload)
        elif kind == "result":
            return payload
        else:
            raise SolveProcessError(payload)


def _child_main(
    sender: multiprocessing.connection.Connection,
    graph: Graph,
    method: str,
    options: SolveOptions,
    cancel,
) -> None:
    """The child's entry point: solve, stream progress, send the result (or the error)."""
    from solver.methods import solve

    try:
        result = solve(graph, method, options, lambda p: sender.send(("progress", p)), cancel)
        sender.send(("result", result))
    except Exception as exc:  # noqa: BLE001 - the parent shows any failure as a message
        sender.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        sender.close()

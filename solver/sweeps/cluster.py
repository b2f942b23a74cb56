"""Sweep tasks on a Dask distributed cluster, for when one machine is not enough.

The tasks are the same :class:`~solver.sweeps.sweep.SweepTask` s the local pool runs; each is sent
to the cluster as ``run_task`` (workers need only this package installed, ``pip install
xengine-studio``, and the extra ``[dask]``). Results come back as they finish and are stored
here, on the machine that asked (the workers have no store). A cancel sets a Dask ``Event``
that each running task watches: its solve stops and keeps its incumbent, and tasks that had not
started return nothing. Dask is imported only in this module, only when a sweep names a
``--scheduler``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from solver.errors import XEngineError
from solver.optimize.solve import SolveResult
from solver.status import SolveStatus

if TYPE_CHECKING:
    from solver.results.store import ResultStore
    from solver.sweeps.sweep import SweepPoint, SweepTask

__all__ = ["run_on_dask", "cluster_task"]

POLL_S = 0.1
"""How often the caller looks at the futures and its cancel Event."""
WATCH_S = 0.5
"""How often a running task looks at the cluster-wide cancel Event."""
CONNECT_TIMEOUT_S = 10.0
"""How long to try reaching the scheduler before saying it cannot be reached."""


def run_on_dask(
    tasks: list[SweepTask],
    scheduler: str,
    store: ResultStore | None,
    arrived: Callable[[SweepPoint, int], None],
    cancel: threading.Event | None = None,
) -> None:
    """Run ``tasks`` on the cluster at ``scheduler``; store and hand on each point as it ends.

    Raises
    ------
    XEngineError
        When the ``[dask]`` extra is missing or the scheduler cannot be reached.
    """
    try:
        from distributed import Client, Event
    except ImportError:
        raise XEngineError(
            f"--scheduler {scheduler}: Dask is not installed here; "
            "pip install 'xengine-studio[dask]' (or dask[distributed])"
        ) from None
    try:
        client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError) as exc:
        raise XEngineError(
            f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc}); "
            "start one with 'dask scheduler' and check the address"
        ) from None
    name = f"xengine-sweep-cancel-{uuid.uuid4().hex}"
    try:
        stop = Event(name, client=client)
        running = {
            client.submit(cluster_task, task, name, key=f"xengine-{name[-32:]}-{task.index}"): task
            for task in tasks
        }
        while running:
            if cancel is not None and cancel.is_set() and not stop.is_set():
                stop.set()
            for future in [f for f in running if f.done()]:
                task = running.pop(future)
                point = _point_of(future, task)
                if point is None:
                    continue
                if store is not None:
                    store.put(task.graph, task.method, task.options, point.result)
                arrived(point, task.index)
            if running:
                time.sleep(POLL_S)
    finally:
        client.close()


def cluster_task(task: SweepTask, cancel_event: str) -> SweepPoint | None:
    """Run on a Dask worker: ``run_task`` with the cluster-wide cancel Event watched.

    Returns ``None`` for a task that was cancelled before it started.
    """
    from distributed import Event

    from solver.sweeps.sweep import run_task

    stop = Event(cancel_event)
    if stop.is_set():
        return None
    local, done = threading.Event(), threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                if stop.wait(timeout=WATCH_S):
                    local.set()
                    return
            except Exception:  # noqa: BLE001 - the cluster went away: nothing left to watch
                return

    watcher = threading.Thread(target=watch, name="xengine-cancel-watch", daemon=True)
    watcher.start()
    try:
        return run_task(task, None, cancel=local)
    finally:
        done.set()


def _point_of(future, task: SweepTask) -> SweepPoint | None:
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - a lost worker or a failed task: say so on its point
        message = f"the cluster task failed: {type(exc).__name__}: {exc}"
        return task.point(SolveResult(task.method, SolveStatus.ERROR, message=message))

"""The result store for the window: stored schedules at once, and the explorer's points in parallel.

:func:`stored_result` and :func:`remember_result` let the solve controller show a stored
schedule as soon as the budgets, the settings or the graph say which one is wanted (a dragged
slider, a re-opened graph), and store every finished solve; the window looks up in a child
process (:func:`lookup_job`): replaying a big stored schedule would stall its event loop. A
stored result that came from a shorter time limit than the settings ask is shown too, with a
note, but not taken as the answer: auto-solve (or Solve) runs again. :class:`SweepRunner` runs
an explorer sweep: stored points arrive at once, the others are solved by up to ``jobs`` child
processes at a time (:func:`solver.sweeps.sweep.run_task`, which also stores them), and arrive
as they finish.

The store is ``$XENGINE_STORE`` or the user's data directory (``XENGINE_STORE=off``: none),
read when each lookup is made; every failure of the store is only a logged warning.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal

from app.solve_process import Job
from app.workers import ProcessWorker
from solver.document.graph import Graph
from solver.optimize.solve import SolveOptions, SolveResult
from solver.results.cached import stored_answer
from solver.results.key import result_key
from solver.results.store import ResultStore, default_store_path
from solver.sweeps.sweep import SweepPoint, SweepTask, default_jobs, run_task

__all__ = [
    "StoreWriter",
    "StoredAnswer",
    "current_store",
    "keeps_apart",
    "stored_result",
    "lookup_job",
    "remember_result",
    "SweepRunner",
]

logger = logging.getLogger(__name__)


class StoreWriter:
    """Stores results off the GUI thread (a write may wait for a lock or an fsync), on one
    thread of its own. The window owns one and drains it when it closes, so that no write
    is cut off and no thread outlives the window (a module-level pool did both)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, call, *args) -> Future:
        """Run ``call(*args)`` on the writer's thread (made at the first write)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="xengine-store")
        return self._pool.submit(call, *args)

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait for the pending writes (up to ``timeout_s``) and end the thread; True when
        every write finished."""
        pool, self._pool = self._pool, None
        if pool is None:
            return True
        done = _wait_all(pool, timeout_s)
        pool.shutdown(wait=done, cancel_futures=not done)
        if not done:
            logger.warning("result store writes still pending after %.0f s", timeout_s)
        return done


def _wait_all(pool: ThreadPoolExecutor, timeout_s: float) -> bool:
    """Whether a marker queued behind every pending write ran within ``timeout_s``."""
    marker = pool.submit(lambda: None)
    try:
        marker.result(timeout=timeout_s)
    except TimeoutError:
        return False
    return True


@dataclass(frozen=True)
class StoredAnswer:
    """A stored result for the window; ``final`` when it answers the solve (no re-solve)."""

    result: SolveResult
    final: bool
    note: str


LOOKUP_TIMEOUT_S = 0.25
"""How long a lookup may wait for a lock before it gives up (WAL readers rarely wait at all):
a stored answer that comes late is no longer worth showing; writes run in the background with
the store's own patience."""


def current_store(timeout_s: float | None = None) -> ResultStore | None:
    """The store named by the environment now, or ``None`` when it is off."""
    path = default_store_path()
    if path is None:
        return None
    return ResultStore(path) if timeout_s is None else ResultStore(path, timeout_s, retries=1)


def keeps_apart(graph: Graph, method: str, options: SolveOptions) -> bool:
    """Whether the store's key tells this solve from the same solve without offloading.

    The window passes the store the very options it solves with; a store whose key did not
    name offloading would serve one model's answer for the other, so such solves are neither
    looked up nor stored (``solve --offload`` skips the store likewise).
    """
    if not options.offload:
        return True
    paper = replace(options, offload=False)
    return result_key(graph, method, options).digest != result_key(graph, method, paper).digest


def stored_result(graph: Graph, method: str, options: SolveOptions) -> StoredAnswer | None:
    """The stored result of this solve (replayed), if the store has one.

    It replays the stored schedule: 0.4 s on a 5,000-operation graph, so the window calls it
    in a child process (:func:`lookup_job`), never on its GUI thread.
    """
    return _answer(graph, method, options, current_store(LOOKUP_TIMEOUT_S))


def lookup_job(graph: Graph, method: str, options: SolveOptions) -> Job | None:
    """:func:`stored_result` as a job for a :class:`~app.workers.ProcessWorker` (its value: a
    :class:`StoredAnswer` or ``None``); ``None`` when the store is off.

    The store is named now, from this process's environment: the child comes from a fork
    server started earlier, whose environment may be older.
    """
    path = default_store_path()
    if path is None:
        return None
    return partial(_lookup_in_child, str(path), graph, method, options)


def _lookup_in_child(
    path: str, graph: Graph, method: str, options: SolveOptions, report, cancel
) -> StoredAnswer | None:
    """The child's side of :func:`lookup_job` (``report`` and ``cancel`` unused: one answer)."""
    return _answer(graph, method, options, ResultStore(Path(path), LOOKUP_TIMEOUT_S, retries=1))


def _answer(
    graph: Graph, method: str, options: SolveOptions, store: ResultStore | None
) -> StoredAnswer | None:
    if not keeps_apart(graph, method, options):
        return None
    stored, final = stored_answer(graph, method, options, store)
    if stored is None:
        return None
    return StoredAnswer(stored.result, final, stored.note(options.time_limit_s))


def remember_result(
    graph: Graph, method: str, options: SolveOptions, result: SolveResult, writer: StoreWriter
) -> Future | None:
    """Store a finished solve on ``writer``'s thread (the store skips cancelled and failed
    ones). Returns the pending write (tests wait on it); ``None`` when the store is off."""
    store = current_store()
    if store is None or not keeps_apart(graph, method, options):
        return None
    return writer.submit(store.put, graph, method, options, result)


class SweepRunner(QObject):
    """Runs the tasks of an explorer sweep: stored ones at once, the rest ``jobs`` at a time.

    Emits ``point`` per finished task (any order) and ``finished`` once, with every point in
    task order, after the last one or after :meth:`cancel` (running solves stop, keeping their
    incumbents; tasks not started are dropped).
    """

    point = Signal(object)
    """A :class:`~solver.sweeps.sweep.SweepPoint` arrived (from the store or a solve)."""
    finished = Signal(list)
    """The sweep ended: its points in task order (partial after a cancel)."""
    failed = Signal(str)
    """A task raised; the message is one line (the sweep goes on)."""

    def __init__(self, tasks: list[SweepTask], jobs: int | None = None, parent=None):
        super().__init__(parent)
        self._todo = list(tasks)
        self._jobs = jobs or (default_jobs(tasks[0].options) if tasks else 1)
        self._points: dict[int, SweepPoint] = {}
        self._running: set[ProcessWorker] = set()
        self._cancelled = False
        self._ended = False
        self._store = current_store(LOOKUP_TIMEOUT_S)
        self.from_store = 0
        """How many points the store answered."""
        self.shorter = 0
        """How many stored points fell short of the time limit and are solved again."""

    def start(self) -> None:
        """Answer from the store (points arrive on the next event-loop turn), then solve."""
        todo = []
        stored = []
        for task in self._todo:
            found, final = stored_answer(task.graph, task.method, task.options, self._store)
            if found is not None and final:
                stored.append(task.point(found.result, from_store=True))
                self._points[task.index] = stored[-1]
                continue
            self.shorter += found is not None
            todo.append(task)
        self._todo = todo
        self.from_store = len(stored)
        QTimer.singleShot(0, self, partial(self._emit_stored, stored))

    def cancel(self) -> None:
        """Stop: running solves end with their incumbents, queued ones are dropped."""
        self._cancelled = True
        self._todo = []
        for worker in list(self._running):
            worker.cancel()
        self._finish_if_done()

    @property
    def running(self) -> bool:
        return bool(self._running or self._todo)

    def _emit_stored(self, stored: list[SweepPoint]) -> None:
        for point in stored:
            self.point.emit(point)
        self._start_more()
        self._finish_if_done()

    def _start_more(self) -> None:
        pool = QThreadPool.globalInstance()
        path = str(self._store.path) if self._store is not None else None
        while self._todo and len(self._running) < self._jobs and not self._cancelled:
            task = self._todo.pop(0)
            worker = ProcessWorker(partial(run_task, task, path), f"sweep point {task.index}")
            worker.signals.finished.connect(partial(self._on_worker_finished, worker, task))
            worker.signals.failed.connect(partial(self._on_worker_failed, worker))
            self._running.add(worker)
            # the pool's threads only wait on child processes: never let a sweep queue the
            # window's own solve behind it
            pool.setMaxThreadCount(max(pool.maxThreadCount(), pool.activeThreadCount() + 1))
            worker.start(pool)

    def _on_worker_finished(self, worker: ProcessWorker, task: SweepTask, point) -> None:
        self._running.discard(worker)
        if point is not None:
            self._points[task.index] = point
            self.point.emit(point)
        self._start_more()
        self._finish_if_done()

    def _on_worker_failed(self, worker: ProcessWorker, message: str) -> None:
        self._running.discard(worker)
        self.failed.emit(message)
        self._start_more()
        self._finish_if_done()

    def _finish_if_done(self) -> None:
        if not self._running and not self._todo and not self._ended:
            self._ended = True
            self.finished.emit([self._points[i] for i in sorted(self._points)])

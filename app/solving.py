"""Running solves for the window: one current worker, progress throttled, results cached.

The controller turns "Solve" into a :class:`~app.workers.SolveRequest` snapshot, starts a
:class:`~app.workers.SolveWorker`, batches its progress reports and hands them out at most ten
times a second (CBC prints thousands of lines; the GUI must not redraw per line). A result is
cached under the request's key; only the current request's result is put on display, so an
older solve that finishes late never overwrites a newer one. While a solve runs, each new
incumbent schedule (replayed in the child) is put on display as *provisional*, the latest one
per flush, so a long solve shows its best schedule so far; the final result replaces it. With
auto-solve on, a budget change that settles (no change for ``AUTO_SOLVE_DELAY_MS``) shows the
cached result or starts a solve.
"""

from __future__ import annotations

import gc
import itertools
import logging

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal

from app.document import Document
from app.solve_process import ProvisionalSchedule
from app.store_lookup import StoreWriter, remember_result, stored_result
from app.tasks import CurrentTask
from app.workers import ProcessWorker, SolveRequest, SolveWorker
from solver.optimize.solve import SolveResult
from solver.status import Progress, SolveStatus

__all__ = ["SolveController", "format_objective"]

logger = logging.getLogger(__name__)

FLUSH_INTERVAL_MS = 100
"""Progress is handed to the views at most every 100 ms (<= 10 Hz)."""
AUTO_SOLVE_DELAY_MS = 600
"""How long the budgets must stay unchanged before an auto-solve starts."""


def format_objective(value: float | None) -> str:
    """How an objective (total schedule time in ms) is shown everywhere in the window."""
    return "\u2014" if value is None else f"{value:.6g} ms"


class SolveController(QObject):
    """Starts, cancels and reports solves of ``document`` (see module docstring).

    Listens to ``memory_limits_changed``, ``graph_changed`` and ``settings_changed`` (show a cached
    result; auto-solve). Writes ``document.set_result`` and ``document.cache_result``.
    """

    started = Signal(object)
    """A solve started (the :class:`SolveRequest`)."""
    progressed = Signal(list)
    """A batch of :class:`Progress` reports of the current solve, at most 10 per second."""
    finished = Signal(object)
    """The current solve ended with this :class:`SolveResult` (also when cancelled)."""
    failed = Signal(str)
    """The current solve raised; the message is one line."""
    running_changed = Signal(bool)
    """A solve started (True) or the current one ended (False)."""
    notice = Signal(str)
    """One line for the status bar: a result came from the result store (issue 13)."""

    def __init__(
        self, document: Document, writer: StoreWriter | None = None, parent: QObject | None = None
    ):
        super().__init__(parent)
        self._document = document
        self._writer = writer or StoreWriter()
        """Where finished solves are stored; its owner (the window) drains it on close."""
        self._owns_writer = writer is None
        self._ids = itertools.count(1)
        self._solve = CurrentTask(self)
        self._solve.item.connect(self._on_solve_item)
        self._solve.finished.connect(self._on_solve_finished)
        self._solve.failed.connect(self._on_solve_failed)
        self._pending: list[Progress] = []
        self._provisional: ProvisionalSchedule | None = None
        self._closed = False
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(FLUSH_INTERVAL_MS)
        self._flush_timer.timeout.connect(self._on_flush_timer_timeout)
        self._auto_timer = QTimer(self)
        self._auto_timer.setSingleShot(True)
        self._auto_timer.setInterval(AUTO_SOLVE_DELAY_MS)
        self._auto_timer.timeout.connect(self._on_auto_timer_timeout)
        document.memory_limits_changed.connect(self._on_document_setting_changed)
        document.settings_changed.connect(self._on_document_setting_changed)
        document.graph_changed.connect(self._on_document_graph_changed)

    # ----- state --------------------------------------------------------------------------------
    @property
    def store_writer(self) -> StoreWriter:
        """Where finished solves are stored (the window's, when it gave one)."""
        return self._writer

    @property
    def is_running(self) -> bool:
        return self._solve.running

    @property
    def current_worker(self) -> SolveWorker | None:
        """The worker of the solve on display, if one runs."""
        worker = self._solve.task
        return worker if isinstance(worker, SolveWorker) else None

    @property
    def current_request(self) -> SolveRequest | None:
        worker = self.current_worker
        return worker.request if worker is not None else None

    def blocker(self) -> str | None:
        """Why Solve cannot run now, or ``None`` when it can."""
        graph = self._document.graph
        if graph is None:
            return "open a graph first"
        if not graph.nodes:
            return "the graph has no nodes; add some first"
        return None

    # ----- actions ------------------------------------------------------------------------------
    def solve(self) -> SolveRequest | None:
        """Start a solve of the current graph, budgets and settings (cancelling one running)."""
        if self.blocker() is not None:
            return None
        self._drop_current()
        document = self._document
        settings = document.settings
        request = SolveRequest(
            request_id=next(self._ids),
            graph=document.graph,
            method=settings.method,
            options=settings.solve_options(),
            key=document.result_key(),
        )
        worker = SolveWorker(request)
        # every finished solve is cached and stored, also one that is no longer current
        worker.signals.finished.connect(lambda r, w=worker: self._on_worker_finished(w, r))
        self._pending = []
        self._provisional = None
        # A full collection walks every object of the window (80 ms on ResNet-50, measured
        # with bench/draw.py --stall) and holds the GIL, stalling the event loop mid-solve.
        # What is alive now (graph, views, results) moves out of its reach, as run() does at
        # startup; only cycles among these objects would wait for the process to end.
        gc.freeze()
        self._solve.start_worker(worker)
        logger.info("solve %d started: %s", request.request_id, request.method)
        self._flush_timer.start()
        self.started.emit(request)
        self.running_changed.emit(True)
        return request

    def cancel(self) -> None:
        """Stop the current solve; its incumbent (if any) still arrives as the result."""
        task = self._solve.task
        if task is not None:
            task.cancel()  # still current: its result arrives and is shown

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel every solve and background task, then wait for the threads (window close)."""
        self._closed = True  # late signals of our workers are ignored from now on
        self._auto_timer.stop()
        self._flush_timer.stop()
        self._solve.forget()
        ProcessWorker.cancel_all()  # our solves, and the views' comparisons and sweeps
        done = QThreadPool.globalInstance().waitForDone(timeout_ms)
        if not done:
            logger.warning("background solves still running after %d ms", timeout_ms)
        if self._owns_writer:
            done = self._writer.drain(timeout_ms / 1000) and done
        return done

    def _drop_current(self) -> None:
        if self._solve.cancel():  # its late result is still cached if it is worth caching
            self.running_changed.emit(False)

    # ----- worker -> GUI ------------------------------------------------------------------------
    def _on_solve_item(self, worker: SolveWorker, item: object) -> None:
        if isinstance(item, ProvisionalSchedule):
            self._provisional = item  # only the latest is worth drawing
        else:
            self._pending.append(item)

    def _on_worker_finished(self, worker: SolveWorker, result: SolveResult) -> None:
        if self._closed:
            return
        if worker.request.key is not None:
            self._document.cache_result(worker.request.key, result)
        request = worker.request
        remember_result(request.graph, request.method, request.options, result, self._writer)

    def _on_solve_finished(self, worker: SolveWorker, result: SolveResult) -> None:
        self._provisional = None  # the final result replaces it
        self._flush_progress(None)
        self._flush_timer.stop()
        logger.info(
            "solve %d finished: %s %s", worker.request.request_id, result.status.value,
            format_objective(result.objective),
        )  # fmt: skip
        self._document.set_result(result)
        self.finished.emit(result)
        self.running_changed.emit(False)

    def _on_solve_failed(self, worker: SolveWorker, message: str) -> None:
        self._flush_timer.stop()
        self._provisional = None
        if self._document.is_provisional:
            self._document.set_result(None)  # the solve never confirmed it
        self.failed.emit(message)
        self.running_changed.emit(False)

    def _on_flush_timer_timeout(self) -> None:
        self._flush_progress(self.current_request)

    def _flush_progress(self, request: SolveRequest | None) -> None:
        """Hand out the batched reports, and the latest incumbent of ``request`` if given."""
        if self._pending:
            batch, self._pending = self._pending, []
            self.progressed.emit(batch)
        if self._provisional is not None and request is not None:
            found, self._provisional = self._provisional, None
            if not self._may_draw_incumbent(request):
                return
            self._document.set_result(
                SolveResult(
                    request.method,
                    SolveStatus.FEASIBLE,
                    found.schedule,
                    found.timeline,
                    found.objective if found.objective is not None else found.timeline.total_ms,
                    seconds=found.elapsed_s,
                    backend=request.options.backend,
                    message="provisional: the best schedule found so far; the solve goes on",
                ),
                provisional=True,
            )

    def _may_draw_incumbent(self, request: SolveRequest) -> bool:
        """Whether an incumbent of ``request`` may go on display.

        Not once the graph or the method changed. After a memory limit moved (a slider dragged
        mid-solve) it still may, marked as solved for other limits (the views say so), unless
        an answer for the new limits is on display: dropping it froze the drawing on the last
        incumbent, still labelled "still solving", while the solve went on.
        """
        key = self._document.result_key()
        if request.key is None or key is None or request.key[:2] != key[:2]:
            return False
        if request.key == key:
            return True
        document = self._document
        return document.result is None or document.is_provisional

    # ----- cached results and auto-solve ----------------------------------------------------
    def _on_document_setting_changed(self) -> None:
        cached = self._document.cached_result()
        if cached is None:
            cached = self._stored_result()
        if cached is not None:
            self._document.set_result(cached)
        if self._document.settings.auto_solve:
            self._auto_timer.start()

    def _on_document_graph_changed(self) -> None:
        # after the whole open/edit (which ends by putting its own result on display)
        QTimer.singleShot(0, self, self._on_graph_settled)

    def _on_graph_settled(self) -> None:
        if self._closed or self._solve.running or self._document.result is not None:
            return
        stored = self._stored_result()
        if stored is not None:
            self._document.set_result(stored)

    def _stored_result(self) -> SolveResult | None:
        """The result store's answer for the current setting, cached as if solved here.

        A stored result from a shorter time limit is put on display at once but not cached,
        so auto-solve (or Solve) still runs; the notice says which it was.
        """
        document = self._document
        if document.graph is None or not document.graph.nodes or self._closed:
            return None
        settings = document.settings
        found = stored_result(document.graph, settings.method, settings.solve_options())
        if found is None:
            return None
        if not found.final:
            self.notice.emit(f"Shown: {found.note}; solve again for the full limit")
            document.set_result(found.result)
            return None
        self.notice.emit(f"Result {found.note}")
        document.cache_result(document.result_key(), found.result)
        return found.result

    def _on_auto_timer_timeout(self) -> None:
        if self._document.cached_result() is not None:
            return
        request = self.current_request
        if request is not None and request.key == self._document.result_key():
            return  # already solving exactly this
        self.solve()

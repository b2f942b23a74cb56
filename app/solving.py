"""Running solves for the window: one current worker, progress throttled, results cached.

The controller turns "Solve" into a :class:`~app.workers.SolveRequest` snapshot, starts a
:class:`~app.workers.SolveWorker`, batches its progress reports and hands them out at most ten
times a second (CBC prints thousands of lines; the GUI must not redraw per line). A result is
cached under the request's key; only the current request's result is put on display, so an
older solve that finishes late never overwrites a newer one. While a solve runs, each new
incumbent schedule (replayed in the child) is put on display as *provisional*, the latest one
per flush, so a long solve shows its best schedule so far; the final result replaces it. With
auto-solve on, a budget change that settles (no change for ``AUTO_SOLVE_DELAY_MS``) shows the
cached result or starts a solve. The result store is asked in a child process (replaying a big
stored schedule stalled the event loop for 0.4 s); its answer is shown when it arrives, unless
the graph or the settings changed meanwhile, and auto-solve waits for it.
"""

from __future__ import annotations

import gc
import itertools
import logging

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal

from app.document import Document
from app.solve_process import ProvisionalSchedule
from app.store_lookup import StoredAnswer, StoreWriter, lookup_job, remember_result
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
STORE_DELAY_MS = 500
"""How long after a solve ends its result is handed to the store's writer: the final result
is drawn first (see ``_on_worker_finished``)."""


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
        self._lookup = CurrentTask(self)
        """The result-store lookup on its way, if any (one at a time)."""
        self._lookup.finished.connect(self._on_lookup_finished)
        self._lookup.failed.connect(self._on_lookup_failed)
        self._lookup_for: tuple[object, str, object] = (None, "", None)
        self._lookup_after_graph_change = False
        self._lookup_wanted: bool | None = None
        """Another lookup was asked for while one ran (its ``after_graph_change``)."""
        self._auto_solve_waits = False
        """Auto-solve's delay ended during a lookup: it solves when the lookup did not answer."""
        self._unstored: list[tuple[SolveRequest, SolveResult]] = []
        """Finished solves waiting for ``STORE_DELAY_MS`` before they are stored."""
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
        self._drop_lookup()  # the solve answers now; a stored answer arriving later would not
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
        self._store_pending()  # on the writer, which is drained below (or by the window)
        self._closed = True  # late signals of our workers are ignored from now on
        self._auto_timer.stop()
        self._flush_timer.stop()
        self._solve.forget()
        self._drop_lookup()
        ProcessWorker.cancel_all()  # our solves, and the views' comparisons and sweeps
        done = QThreadPool.globalInstance().waitForDone(timeout_ms)
        if not done:
            logger.warning("background solves still running after %d ms", timeout_ms)
        if self._owns_writer:
            done = self._writer.drain(timeout_ms / 1000) and done
        return done

    def _drop_lookup(self) -> None:
        self._lookup.forget()  # its child ends by itself within a second
        self._lookup_wanted = None
        self._auto_solve_waits = False

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
        # Stored a moment later: serializing a 5,000-op schedule is 0.1 s of Python on the
        # writer's thread, and while the final result is drawn it took the GIL from the GUI
        # thread (a 60 ms stall, bench/draw.py --stream). A close stores it at once.
        self._unstored.append((worker.request, result))
        QTimer.singleShot(STORE_DELAY_MS, self, self._store_pending)

    def _store_pending(self) -> None:
        pending, self._unstored = self._unstored, []
        for request, result in pending:
            remember_result(request.graph, request.method, request.options, result, self._writer)

    def _on_solve_finished(self, worker: SolveWorker, result: SolveResult) -> None:
        self._provisional = None  # the final result replaces it
        self._flush_progress(None)
        self._flush_timer.stop()
        logger.info(
            "solve %d finished: %s %s", worker.request.request_id, result.status.value,
            format_objective(result.objective),
        )  # fmt: skip
        self._document.set_result(result, limits=worker.request.graph.memory_limits)
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
        if cached is not None:
            self._drop_lookup()  # answered: a lookup on its way is for another setting
            self._document.set_result(cached)
        else:
            self._look_up_stored(after_graph_change=False)
        if self._document.settings.auto_solve:
            self._auto_timer.start()

    def _on_document_graph_changed(self) -> None:
        # after the whole open/edit (which ends by putting its own result on display)
        QTimer.singleShot(0, self, self._on_graph_settled)

    def _on_graph_settled(self) -> None:
        if self._closed or self._solve.running or self._document.result is not None:
            return
        self._look_up_stored(after_graph_change=True)

    def _look_up_stored(self, after_graph_change: bool) -> None:
        """Ask the result store for the current setting, in a child process.

        Replaying a stored schedule took 0.4 s of the GUI thread on a 5,000-operation graph
        (``bench/draw.py --stream``). One lookup runs at a time: a request made meanwhile (a
        slider dragged) waits for it and then asks for the setting of that moment, and an
        answer for a setting that is no longer the document's is dropped
        (:meth:`_on_lookup_finished`).
        """
        document = self._document
        if document.graph is None or not document.graph.nodes or self._closed:
            self._lookup_wanted = None
            return
        if self._lookup.running:
            self._lookup_wanted = after_graph_change  # asked again when the one on its way ends
            return
        self._lookup_wanted = None
        settings = document.settings
        job = lookup_job(document.graph, settings.method, settings.solve_options())
        if job is None:
            return
        worker = ProcessWorker(job, "stored result lookup")
        self._lookup_for = (document.graph, settings.method, settings.solve_options())
        self._lookup_after_graph_change = after_graph_change
        pool = QThreadPool.globalInstance()  # never queue the window's solve behind a lookup
        pool.setMaxThreadCount(max(pool.maxThreadCount(), pool.activeThreadCount() + 1))
        self._lookup.start(
            worker, worker.signals.progress, worker.signals.finished, worker.signals.failed
        )

    def _lookup_is_current(self) -> bool:
        """Whether the answer of the lookup that just ended is for what the document shows:
        the same graph object (an edit or a memory limit makes a new one), method and options,
        and (after a graph change) nothing else put on display meanwhile. A solve started
        meanwhile drops it in :meth:`solve`."""
        document = self._document
        graph, method, options = self._lookup_for
        settings = document.settings
        if self._closed or document.graph is not graph:
            return False
        if settings.method != method or settings.solve_options() != options:
            return False
        # after a graph change, only a window that still shows nothing gets the stored result
        return not self._lookup_after_graph_change or (
            document.result is None and not self._solve.running
        )

    def _on_lookup_finished(self, worker: ProcessWorker, found: object) -> None:
        if isinstance(found, StoredAnswer) and self._lookup_is_current():
            self._show_stored(found)
        self._lookup_ended()

    def _on_lookup_failed(self, worker: ProcessWorker, message: str) -> None:
        logger.warning("stored result lookup failed: %s", message)
        self._lookup_ended()

    def _lookup_ended(self) -> None:
        again = self._lookup_wanted
        if again is not None:
            self._look_up_stored(again)
        elif self._auto_solve_waits:
            self._auto_solve_waits = False
            self._on_auto_timer_timeout()

    def _show_stored(self, found: StoredAnswer) -> None:
        """Put the store's answer on display, cached as if solved here.

        A stored result from a shorter time limit is put on display but not cached, so
        auto-solve (or Solve) still runs; the notice says which it was.
        """
        document = self._document
        if not found.final:
            self.notice.emit(f"Shown: {found.note}; solve again for the full limit")
            document.set_result(found.result)
            return
        self.notice.emit(f"Result {found.note}")
        document.cache_result(document.result_key(), found.result)
        document.set_result(found.result)

    @property
    def looking_up(self) -> bool:
        """Whether a result-store lookup is on its way (its answer is shown when it comes)."""
        return self._lookup.running or self._lookup_wanted is not None

    def _on_auto_timer_timeout(self) -> None:
        if self._document.cached_result() is not None:
            return
        if self.looking_up:  # the store may answer: solve only if it does not
            self._auto_solve_waits = True
            return
        request = self.current_request
        if request is not None and request.key == self._document.result_key():
            return  # already solving exactly this
        self.solve()

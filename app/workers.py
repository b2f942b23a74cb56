"""Background solves: a QRunnable per solve, talking to the GUI only through signals.

The worker gets an immutable :class:`SolveRequest` built on the GUI thread and never reads the
document or touches a widget (style rules 14-15). It runs ``solver.methods.solve`` in a child
process (:mod:`app.solve_process`: the model build would otherwise starve the GUI thread of the
GIL) and relays progress; ``cancel()`` sets a ``threading.Event`` that is passed on to the solve,
which stops CBC with SIGINT and keeps the incumbent, so a cancelled solve still delivers a
result. A class-level set keeps running workers alive (pytest-qt and closures hold only weak
references; qt-stack.md §3.3) until their last signal has arrived.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import ClassVar

from PySide6.QtCore import QCoreApplication, QObject, QRunnable, QThreadPool, Signal, Slot

from app.solve_process import SolveProcessError, solve_in_process
from solver.graph import Graph
from solver.solve import SolveOptions, SolveResult
from solver.status import Progress

__all__ = ["SolveRequest", "WorkerSignals", "SolveWorker"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolveRequest:
    """A snapshot of what to solve: ``key`` is the document's cache key at request time."""

    request_id: int
    graph: Graph
    method: str
    options: SolveOptions
    key: object = None


class WorkerSignals(QObject):
    """Signals of one :class:`SolveWorker` (QRunnable is not a QObject).

    It lives on the GUI thread and is deleted there, only after every signal it sent has been
    delivered: ``_ended`` is emitted last and queued behind them, and its slot waits until the
    worker thread has left ``run()`` before ``deleteLater()``. (Deleting it any earlier drops
    queued deliveries: PySide 6.12 runs a non-QObject callable on the emitting thread.)
    """

    progress = Signal(object)
    """A :class:`solver.status.Progress` report, emitted on the worker thread (queued to GUI)."""
    finished = Signal(object)
    """The :class:`solver.solve.SolveResult`, also after a cancel (status CANCELLED)."""
    failed = Signal(str)
    """An unexpected exception, as one line; no result follows."""
    _ended = Signal()

    def __init__(self, worker: SolveWorker):
        super().__init__(QCoreApplication.instance())  # C++-owned: Python never deletes it
        self._worker = worker
        self._ended.connect(self._on_self_ended)

    @Slot()
    def _on_self_ended(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.returned.wait(5.0)  # microseconds: run() is past its last emit
            SolveWorker._alive.discard(worker)
        self.deleteLater()


class SolveWorker(QRunnable):
    """Run ``solver.methods.solve`` for one request on the global thread pool."""

    _alive: ClassVar[set[SolveWorker]] = set()

    def __init__(self, request: SolveRequest):
        super().__init__()
        self.setAutoDelete(False)  # our set owns it; the pool must not delete it under us
        self.request = request
        self.signals = WorkerSignals(self)
        self.returned = threading.Event()
        """Set when ``run()`` has sent its last signal."""
        self._cancel = threading.Event()

    # ----- GUI thread ---------------------------------------------------------------------------
    def start(self, pool: QThreadPool | None = None) -> None:
        """Queue the solve; the worker stays alive until its result reaches the GUI thread."""
        SolveWorker._alive.add(self)
        (pool or QThreadPool.globalInstance()).start(self)

    def cancel(self) -> None:
        """Ask the solve to stop; its incumbent (if any) still arrives through ``finished``."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @classmethod
    def running(cls) -> list[SolveWorker]:
        """Workers whose last signal has not reached the GUI thread yet."""
        return list(cls._alive)

    @classmethod
    def cancel_all(cls) -> None:
        """Cancel every running solve (closing the window)."""
        for worker in list(cls._alive):
            worker.cancel()

    # ----- worker thread ------------------------------------------------------------------------
    def run(self) -> None:
        """Solve; every exception becomes ``failed`` so the GUI is never left waiting."""
        request = self.request
        signals = self.signals
        try:
            result: SolveResult = solve_in_process(
                request.graph, request.method, request.options, self._emit_progress, self._cancel
            )
        except SolveProcessError as exc:
            logger.warning("solve %s failed: %s", request.request_id, exc)
            signals.failed.emit(str(exc))
        except Exception as exc:  # noqa: BLE001 - any failure must reach the GUI as a message
            logger.exception("solve %s failed", request.request_id)
            signals.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            signals.finished.emit(result)
        finally:
            signals._ended.emit()
            self.returned.set()

    def _emit_progress(self, progress: Progress) -> None:
        self.signals.progress.emit(progress)

"""Background work in a child process: a QRunnable per job, talking to the GUI only by signals.

A worker gets an immutable job built on the GUI thread (a solve request, or a ``partial`` of
``compare``/``sweep_budgets`` over a graph snapshot) and never reads the document or touches a
widget (style rules 14-15). It runs the job in a child process (:mod:`app.solve_process`: the
model build would otherwise starve the GUI thread of the GIL) and relays each reported item;
``cancel()`` sets a ``threading.Event`` that is passed on to the job, which stops CBC with SIGINT
and keeps the incumbent, so a cancelled job still delivers its value. A class-level set keeps
running workers alive (pytest-qt and closures hold only weak references)
until their last signal has arrived.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from PySide6.QtCore import QCoreApplication, QObject, QRunnable, QThreadPool, Signal, Slot

from app.solve_process import Job, SolveProcessError, run_in_process, solve_reporting_incumbents
from solver.document.graph import Graph
from solver.optimize.solve import SolveOptions

__all__ = ["SolveRequest", "WorkerSignals", "ProcessWorker", "SolveWorker"]

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
    """Signals of one :class:`ProcessWorker` (QRunnable is not a QObject).

    It lives on the GUI thread and is deleted there, only after every signal it sent has been
    delivered: ``_ended`` is emitted last and queued behind them, and its slot waits until the
    worker thread has left ``run()`` before ``deleteLater()``. (Deleting it any earlier drops
    queued deliveries: PySide 6.12 runs a non-QObject callable on the emitting thread.)
    """

    progress = Signal(object)
    """One reported item, emitted on the worker thread (queued to GUI): a solve's
    :class:`~solver.status.Progress`, a comparison's ``SolveResult``, a sweep's ``SweepPoint``."""
    finished = Signal(object)
    """The job's value (a solve's ``SolveResult``), also after a cancel."""
    failed = Signal(str)
    """An unexpected exception, as one line; no value follows."""
    _ended = Signal()

    def __init__(self, worker: ProcessWorker):
        super().__init__(QCoreApplication.instance())  # C++-owned: Python never deletes it
        self._worker = worker
        self._ended.connect(self._on_self_ended)

    @Slot()
    def _on_self_ended(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.returned.wait(5.0)  # microseconds: run() is past its last emit
            ProcessWorker._alive.discard(worker)
        self.deleteLater()


class ProcessWorker(QRunnable):
    """Run ``job(report, cancel)`` in a child process, from a thread of the global pool."""

    _alive: ClassVar[set[ProcessWorker]] = set()

    def __init__(self, job: Job, name: str = "job"):
        super().__init__()
        self.setAutoDelete(False)  # our set owns it; the pool must not delete it under us
        self.job = job
        self.name = name
        self.signals = WorkerSignals(self)
        self.returned = threading.Event()
        """Set when ``run()`` has sent its last signal."""
        self._cancel = threading.Event()

    # ----- GUI thread ---------------------------------------------------------------------------
    def start(self, pool: QThreadPool | None = None) -> None:
        """Queue the job; the worker stays alive until its value reaches the GUI thread."""
        ProcessWorker._alive.add(self)
        (pool or QThreadPool.globalInstance()).start(self)

    def cancel(self) -> None:
        """Ask the job to stop; what it returns then still arrives through ``finished``."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @classmethod
    def running(cls) -> list[ProcessWorker]:
        """Workers of this class whose last signal has not reached the GUI thread yet."""
        return [w for w in ProcessWorker._alive if isinstance(w, cls)]

    @classmethod
    def cancel_all(cls) -> None:
        """Cancel every running job of this class (closing the window)."""
        for worker in cls.running():
            worker.cancel()

    # ----- worker thread ------------------------------------------------------------------------
    def run(self) -> None:
        """Run the job; every exception becomes ``failed`` so the GUI is never left waiting."""
        signals = self.signals
        try:
            value = run_in_process(self.job, signals.progress.emit, self._cancel)
        except SolveProcessError as exc:
            logger.warning("%s failed: %s", self.name, exc)
            signals.failed.emit(str(exc))
        except Exception as exc:  # any failure must reach the GUI as a message
            logger.exception("%s failed", self.name)
            signals.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            signals.finished.emit(value)
        finally:
            signals._ended.emit()
            self.returned.set()


class SolveWorker(ProcessWorker):
    """Run ``solver.optimize.methods.solve`` for one request; ``finished`` carries its
    ``SolveResult``.

    ``progress`` carries the solve's ``Progress`` reports and, for each new incumbent, a
    :class:`~app.solve_process.ProvisionalSchedule` already replayed in the child.
    """

    def __init__(self, request: SolveRequest):
        job = partial(solve_reporting_incumbents, request.graph, request.method, request.options)
        super().__init__(job, f"solve {request.request_id}")
        self.request = request

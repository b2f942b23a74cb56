"""Background tasks for the views that run many solves (comparison, trade-off explorer).

Same pattern as ``app.workers.SolveWorker`` (style rule 14), generalised to any function that
reports items as it goes: ``fn(report, cancel)`` runs on the global thread pool, ``report(item)``
reaches the GUI thread as the ``item`` signal, and a ``threading.Event`` cancels it. A class-level
set keeps each task alive until its last signal has reached the GUI thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import ClassVar

from PySide6.QtCore import QCoreApplication, QObject, QRunnable, QThreadPool, Signal

__all__ = ["TaskSignals", "BackgroundTask"]

logger = logging.getLogger(__name__)

TaskFunction = Callable[[Callable[[object], None], threading.Event], object]


class TaskSignals(QObject):
    """Signals of one :class:`BackgroundTask` (QRunnable is not a QObject)."""

    item = Signal(object)
    """One partial result reported by the task (emitted on the worker thread, queued)."""
    finished = Signal(object)
    """The task's return value; also after a cancel (the task decides what it returns)."""
    failed = Signal(str)
    """An unexpected exception, as one line."""


class BackgroundTask(QRunnable):
    """Run ``fn(report, cancel)`` off the GUI thread."""

    _alive: ClassVar[set[BackgroundTask]] = set()

    def __init__(self, fn: TaskFunction, name: str = "task"):
        super().__init__()
        self.setAutoDelete(False)
        self.name = name
        self.signals = TaskSignals(QCoreApplication.instance())
        self._fn = fn
        self._cancel = threading.Event()
        self.signals.finished.connect(self._on_signals_done)
        self.signals.failed.connect(self._on_signals_done)

    def start(self, pool: QThreadPool | None = None) -> None:
        BackgroundTask._alive.add(self)
        (pool or QThreadPool.globalInstance()).start(self)

    def cancel(self) -> None:
        """Ask the task to stop at its next check of the event."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @classmethod
    def running(cls) -> list[BackgroundTask]:
        """Tasks whose end has not reached the GUI thread yet."""
        return list(cls._alive)

    @classmethod
    def cancel_all(cls) -> None:
        for task in list(cls._alive):
            task.cancel()

    def _on_signals_done(self, *_: object) -> None:
        BackgroundTask._alive.discard(self)
        self.signals.deleteLater()

    def run(self) -> None:
        try:
            value = self._fn(self.signals.item.emit, self._cancel)
        except Exception as exc:  # noqa: BLE001 - any failure must reach the GUI as a message
            logger.exception("%s failed", self.name)
            self.signals.failed.emit(f"{type(exc).__name__}: {exc}")
            return
        self.signals.finished.emit(value)

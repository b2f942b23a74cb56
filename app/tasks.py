"""One current background task per owner: starting a new one cancels the old, whose late
reports are dropped.

The solve controller, the comparison view and the explorer each run one task at a time (a solve,
a comparison, a sweep) and must never let an older task that finishes late overwrite what a newer
one shows. :class:`CurrentTask` holds that rule once: it forwards the items, value and failure of
the current task only, each with the task it came from, and forgets the task when it ends.
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from app.workers import ProcessWorker

__all__ = ["CurrentTask", "Task"]


class Task(Protocol):
    """What :class:`CurrentTask` needs of a task: ``start()`` and ``cancel()``."""

    def start(self) -> None: ...

    def cancel(self) -> None: ...


class CurrentTask(QObject):
    """Holds at most one running task; what any other task reports is dropped.

    Listens to the signals of the task given to :meth:`start`. Emits ``item``, ``finished`` and
    ``failed`` for the current task only; after ``finished`` or ``failed`` there is no current
    task. A cancelled task is no longer current, so what it still delivers is dropped too
    (connect to the task itself to see that, e.g. to cache a late result).
    """

    item = Signal(object, object)
    """(task, item): the current task reported an item (a progress report, a result, a point)."""
    finished = Signal(object, object)
    """(task, value): the current task ended with this value."""
    failed = Signal(object, str)
    """(task, message): the current task raised; the message is one line."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._task: Task | None = None

    @property
    def task(self) -> Task | None:
        """The running task, if any."""
        return self._task

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(
        self,
        task: Task,
        item: SignalInstance,
        finished: SignalInstance,
        failed: SignalInstance,
    ) -> None:
        """Cancel the current task, make ``task`` current, connect its signals and start it."""
        self.cancel()
        self._task = task
        item.connect(partial(self._on_task_item, task))
        finished.connect(partial(self._on_task_finished, task))
        failed.connect(partial(self._on_task_failed, task))
        task.start()

    def start_worker(self, worker: ProcessWorker) -> None:
        """:meth:`start` for a :class:`ProcessWorker` (its signals live on ``worker.signals``)."""
        signals = worker.signals
        self.start(worker, signals.progress, signals.finished, signals.failed)

    def cancel(self) -> bool:
        """Cancel the current task and forget it; whether there was one."""
        task, self._task = self._task, None
        if task is None:
            return False
        task.cancel()
        return True

    def forget(self) -> None:
        """Drop whatever the current task still reports, without cancelling it."""
        self._task = None

    def _on_task_item(self, task: Task, item: object) -> None:
        if task is self._task:
            self.item.emit(task, item)

    def _on_task_finished(self, task: Task, value: object) -> None:
        if task is self._task:
            self._task = None
            self.finished.emit(task, value)

    def _on_task_failed(self, task: Task, message: str) -> None:
        if task is self._task:
            self._task = None
            self.failed.emit(task, message)

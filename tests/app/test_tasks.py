"""CurrentTask: one current task; an older task's late items, value and failure are dropped."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.tasks import CurrentTask


class FakeTask(QObject):
    item = Signal(object)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def cancel(self) -> None:
        self.calls.append("cancel")


def _record(current: CurrentTask) -> list[tuple]:
    seen: list[tuple] = []
    current.item.connect(lambda task, item: seen.append(("item", task.name, item)))
    current.finished.connect(lambda task, value: seen.append(("finished", task.name, value)))
    current.failed.connect(lambda task, message: seen.append(("failed", task.name, message)))
    return seen


def _start(current: CurrentTask, task: FakeTask) -> None:
    current.start(task, task.item, task.finished, task.failed)


def test_a_new_task_cancels_the_old_one_whose_late_reports_are_dropped(qapp):
    current = CurrentTask()
    seen = _record(current)
    old, new = FakeTask("old"), FakeTask("new")
    _start(current, old)
    assert current.task is old and old.calls == ["start"]
    old.item.emit(1)
    _start(current, new)
    assert old.calls == ["start", "cancel"] and new.calls == ["start"]
    old.item.emit(2)  # late: dropped
    old.finished.emit("old value")  # late: dropped
    new.item.emit(3)
    new.finished.emit("new value")
    assert seen == [("item", "old", 1), ("item", "new", 3), ("finished", "new", "new value")]
    assert current.task is None and not current.running
    new.item.emit(4)  # after its end: dropped
    assert len(seen) == 3


def test_failure_ends_the_task_and_cancel_says_whether_one_ran(qapp):
    current = CurrentTask()
    seen = _record(current)
    assert current.cancel() is False
    task = FakeTask("a")
    _start(current, task)
    task.failed.emit("boom")
    assert seen == [("failed", "a", "boom")] and not current.running
    again = FakeTask("b")
    _start(current, again)
    assert current.cancel() is True and again.calls == ["start", "cancel"]
    again.finished.emit("late")  # cancelled, so no longer current
    assert seen == [("failed", "a", "boom")]


def test_forget_drops_reports_without_cancelling(qapp):
    current = CurrentTask()
    seen = _record(current)
    task = FakeTask("a")
    _start(current, task)
    current.forget()
    task.finished.emit("value")
    assert seen == [] and task.calls == ["start"]

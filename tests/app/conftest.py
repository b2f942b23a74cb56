"""Fixtures for the GUI tests: offscreen Qt, throw-away settings, dialogs and windows.

``make_window`` is a factory that keeps a strong reference to every window it makes (pytest-qt
holds only weak ones), and on teardown cancels solves, closes the windows,
waits for the worker threads and fails on a leaked worker or a visible top-level widget.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before pytest-qt makes the QApplication

import pytest
from PySide6.QtCore import QStandardPaths, QThreadPool, QTimer
from PySide6.QtWidgets import QApplication

QStandardPaths.setTestModeEnabled(True)  # QSettings go to ~/.qttest, never the user's config

from app.dialogs import Choice, ErrorDialog, UnsavedChangesDialog  # noqa: E402
from app.document import Document  # noqa: E402
from app.main_window import MainWindow  # noqa: E402
from app.settings import AppSettings  # noqa: E402
from app.workers import ProcessWorker  # noqa: E402
from solver.document.graph import Graph  # noqa: E402
from solver.document.graph_io import load_graph  # noqa: E402
from solver.document.schedule_io import load_schedule  # noqa: E402
from solver.execution.simulate import simulate  # noqa: E402
from solver.optimize.solve import SolveResult  # noqa: E402
from solver.status import SolveStatus  # noqa: E402

gc.freeze()  # as app.main_window.run() does at startup: no long GC pauses during solves
DATA = Path(__file__).resolve().parents[1] / "data"


class DialogRecorder:
    """Stands in for the modal dialogs: records errors, answers the unsaved-changes question."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        self.unsaved_answer = Choice.DISCARD
        self.unsaved_asked: list[str] = []

    def show_error(self, parent, title: str, message: str) -> None:
        self.errors.append((title, message))

    def ask(self, parent, name: str) -> Choice:
        self.unsaved_asked.append(name)
        return self.unsaved_answer


class LoopProbe:
    """A 10 ms QTimer that records the longest gap between its ticks (event-loop stalls)."""

    def __init__(self) -> None:
        self.max_gap = 0.0
        self.worst_at = 0.0
        self.worst_cpu = 0.0
        """CPU time the GUI thread used during the longest gap (its own work, not waiting)."""
        self.max_cpu = 0.0
        """The most CPU the GUI thread used between two ticks: its longest piece of work, which
        is what the window controls; a wall-clock gap longer than that was spent waiting for a
        CPU (two shared cores, a solver beside us) or for the GIL."""
        self.ticks = 0
        self._start = self._last = time.perf_counter()
        self._last_cpu = time.thread_time()
        self._timer = QTimer()
        self._timer.setInterval(10)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._timer.start()

    def _on_timer_timeout(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        if now - self._last > self.max_gap:
            self.max_gap, self.worst_at = now - self._last, self._last - self._start
            self.worst_cpu = cpu - self._last_cpu
        self.max_cpu = max(self.max_cpu, cpu - self._last_cpu)
        self._last, self._last_cpu = now, cpu
        self.ticks += 1

    def stop(self) -> None:
        self._timer.stop()
        self._stop = time.perf_counter()

    @property
    def tick_rate(self) -> float:
        """Ticks seen over ticks due (1.0: the loop never fell behind); call after ``stop``."""
        return self.ticks / max((self._stop - self._start) / 0.010, 1.0)

    def __str__(self) -> str:
        return (
            f"event loop stalled {self.max_gap * 1000:.0f} ms at {self.worst_at:.2f} s "
            f"(GUI thread CPU {self.worst_cpu * 1000:.0f} ms); longest GUI work "
            f"{self.max_cpu * 1000:.0f} ms; {self.ticks} ticks"
        )


@pytest.fixture
def loop_probe(qapp):
    """Start a :class:`LoopProbe` when called; every probe made is stopped on teardown."""
    probes: list[LoopProbe] = []

    def start() -> LoopProbe:
        probes.append(LoopProbe())
        return probes[-1]

    yield start
    for probe in probes:
        probe.stop()


@pytest.fixture(autouse=True)
def dialogs(monkeypatch) -> DialogRecorder:
    """No test ever blocks on a modal dialog; tests read what would have been shown."""
    recorder = DialogRecorder()
    monkeypatch.setattr(
        ErrorDialog, "show_error", classmethod(lambda cls, *a: recorder.show_error(*a))
    )
    monkeypatch.setattr(UnsavedChangesDialog, "ask", classmethod(lambda cls, *a: recorder.ask(*a)))
    return recorder


@pytest.fixture
def graph() -> Graph:
    """The hand-built 2-device graph of ``tests/data`` (its schedule is checked by hand)."""
    return load_graph(DATA / "handbuilt.graph.json")


@pytest.fixture
def handbuilt_result(graph) -> SolveResult:
    """The hand-written schedule of :func:`graph`, replayed: 11 ms, feasible."""
    schedule = load_schedule(DATA / "handbuilt.schedule.json", graph)
    timeline = simulate(graph, schedule, strict=True)
    return SolveResult("hand", SolveStatus.FEASIBLE, schedule, timeline, 11.0)


@pytest.fixture
def document(graph, handbuilt_result) -> Document:
    """A document showing :func:`handbuilt_result` (no window)."""
    doc = Document()
    doc.set_graph(graph)
    doc.set_result(handbuilt_result)
    return doc


@pytest.fixture
def show(qtbot):
    """``show(widget, width, height)``: add, resize, show and wait until exposed; returns it."""

    def show(widget, width: int, height: int):
        qtbot.addWidget(widget)
        widget.resize(width, height)
        widget.show()
        qtbot.waitExposed(widget)
        return widget

    return show


@pytest.fixture
def app_settings(qapp) -> AppSettings:
    settings = AppSettings()
    settings.clear()
    settings.set_tour_seen(True)  # the tour's own tests start without this
    yield settings
    settings.clear()


@pytest.fixture
def make_window(qtbot, app_settings):
    windows: list[MainWindow] = []

    def make(example: str | None = "chain") -> MainWindow:
        window = MainWindow(app_settings)
        window.show()
        if example is not None:
            assert window.open_example(example)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.controller.cancel()
        window.document.undo_stack.setClean()  # never prompt on teardown
        window.close()
    assert QThreadPool.globalInstance().waitForDone(30_000), "worker threads still running"
    qtbot.waitUntil(lambda: not ProcessWorker.running(), timeout=5_000)
    # A garbage collection while the list is walked can delete a parentless widget (a dialog
    # the test made) under it: Python's C++ pointer then dangles and isVisible() segfaults
    # (seen twice in CI at this line). Collect first, and not during the walk.
    gc.collect()
    gc.disable()
    try:
        visible = [w for w in QApplication.topLevelWidgets() if w.isVisible()]
    finally:
        gc.enable()
    for window in windows:
        window.deleteLater()
    assert not visible, f"top-level widgets left open: {visible}"

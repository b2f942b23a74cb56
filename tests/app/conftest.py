"""Fixtures for the GUI tests: offscreen Qt, throw-away settings, dialogs and windows.

``make_window`` is a factory that keeps a strong reference to every window it makes (pytest-qt
holds only weak ones; qt-stack.md §3.3), and on teardown cancels solves, closes the windows,
waits for the worker threads and fails on a leaked worker or a visible top-level widget.
"""

from __future__ import annotations

import gc
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before pytest-qt makes the QApplication

import pytest  # noqa: E402
from PySide6.QtCore import QStandardPaths, QThreadPool  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

QStandardPaths.setTestModeEnabled(True)  # QSettings go to ~/.qttest, never the user's config

from app.dialogs import Choice, ErrorDialog, UnsavedChangesDialog  # noqa: E402
from app.main_window import MainWindow  # noqa: E402
from app.settings import AppSettings  # noqa: E402
from app.workers import SolveWorker  # noqa: E402

gc.freeze()  # as app.main_window.run() does at startup: no long GC pauses during solves


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
def app_settings(qapp) -> AppSettings:
    settings = AppSettings()
    settings.clear()
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
    qtbot.waitUntil(lambda: not SolveWorker.running(), timeout=5_000)
    visible = [w for w in QApplication.topLevelWidgets() if w.isVisible()]
    for window in windows:
        window.deleteLater()
    assert not visible, f"top-level widgets left open: {visible}"

"""File ▸ Export in the window: each action writes a file that loads back; none without a result."""

from __future__ import annotations

import csv

import pytest
from PySide6.QtGui import QImage
from PySide6.QtSvg import QSvgRenderer

from app.dialogs import FileDialog
from app.project import SolverSettings
from solver.document.schedule_io import load_schedule, schedule_to_dict
from solver.execution.simulate import simulate


@pytest.fixture
def solved(qtbot, make_window):
    window = make_window("chain")
    window.document.set_settings(SolverSettings(method="checkpoint-all:cpu"))  # fast: no MIQP
    with qtbot.waitSignal(window.controller.finished, timeout=60_000) as blocker:
        window.window_actions.solve.trigger()
    assert blocker.args[0].ok and blocker.args[0].method == "checkpoint-all:cpu"
    return window


@pytest.fixture
def save_to(monkeypatch, tmp_path):
    """Answer the save dialog with ``tmp_path / name``; returns a setter for the name."""
    chosen: dict[str, str] = {}

    def answer(cls, parent, caption, directory, filters):
        chosen["filters"] = filters
        return str(tmp_path / chosen["name"])

    monkeypatch.setattr(FileDialog, "save_path", classmethod(answer))

    def choose(name: str):
        chosen["name"] = name
        return tmp_path / name

    return choose


def test_window_export_actions_are_disabled_without_a_result(make_window):
    window = make_window("chain")
    actions = window.window_actions
    assert window.document.result is None
    for action in (actions.export_png, actions.export_svg, actions.export_schedule):
        assert not action.isEnabled()
    assert not actions.export_timeline.isEnabled()
    assert "Expor&t" in [a.text() for a in window.menuBar().actions()[0].menu().actions()]


def test_window_exports_the_current_view_as_png(solved, save_to):
    path = save_to("view.png")
    assert solved.window_actions.export_png.isEnabled()
    solved.window_actions.export_png.trigger()
    image = QImage(str(path))
    view = solved.schedule_tabs.currentWidget()
    assert not image.isNull()
    assert (image.width(), image.height()) == (2 * view.width(), 2 * view.height())


def test_window_exports_the_current_view_as_svg(solved, save_to):
    path = save_to("view.svg")
    solved.window_actions.export_svg.trigger()
    renderer = QSvgRenderer(str(path))
    assert renderer.isValid()
    assert renderer.viewBox().width() == solved.schedule_tabs.currentWidget().width()


def test_window_exports_the_schedule_as_json(solved, save_to):
    path = save_to("chain.schedule.json")
    solved.window_actions.export_schedule.trigger()
    result, graph = solved.document.result, solved.document.graph
    again = load_schedule(path, graph)
    assert schedule_to_dict(again) == schedule_to_dict(result.schedule)
    assert simulate(graph, again).total_ms == result.timeline.total_ms


def test_window_exports_the_timeline_as_csv(solved, save_to):
    path = save_to("chain.csv")
    solved.window_actions.export_timeline.trigger()
    timeline = solved.document.result.timeline
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(timeline.ops) + len(timeline.transfers)
    assert max(float(r["end_ms"]) for r in rows) == pytest.approx(timeline.total_ms)

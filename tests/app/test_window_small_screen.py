"""The window on a 1280x720 screen (issue 20, items 1 and 4): nothing is pushed off-screen."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication, QToolButton

from solver.optimize.methods import solve


@pytest.fixture
def small(qtbot, make_window):
    window = make_window("chain")
    window.resize(1280, 720)
    qtbot.waitExposed(window)
    window.document.set_result(solve(window.document.graph, "greedy"))
    QApplication.processEvents()
    return window


def test_window_range_readout_never_widens_the_schedule_tab(qtbot, small):
    schedule = small.schedule_tabs.widget(0)
    gantt = schedule.gantt
    viewport = schedule.scroll.viewport().width()
    end = small.document.timeline.total_ms
    gantt.select_range(0.0, end)  # every lane busy: the longest readout
    QApplication.processEvents()
    assert "busy" in gantt.range_text
    # what the chart asks of its layout: the scroll area widens it to this a round of the event
    # loop later (after a single processEvents its width was still the viewport's)
    assert gantt.minimumSizeHint().width() <= viewport
    assert gantt.width() <= viewport
    reset = next(b for b in gantt.findChildren(QToolButton) if b.text() == "Reset view")
    right = reset.mapTo(schedule, reset.rect().topRight()).x()
    assert right <= schedule.width()


def test_window_shows_every_device_row_and_a_graph_at_1280x720(qtbot, small):
    panel = small.devices_panel
    viewport = panel.viewport()

    def cut() -> list[str]:
        return [
            name
            for name, row in panel.rows.items()
            if row.mapTo(viewport, row.rect().bottomLeft()).y() > viewport.height()
        ]

    qtbot.waitUntil(lambda: not cut(), timeout=3_000)  # the docks are fitted after a resize
    assert small.graph_view.canvas.height() >= 100  # it was 85 px
    assert small.graph_view.toolbar.isVisible()  # in the dock's title bar
    search = small.graph_view.search  # the toolbar squeezed it to "Fi…"
    assert search.width() >= search.fontMetrics().horizontalAdvance(search.placeholderText())


def test_window_opening_another_graph_starts_afresh(small):
    """The live plot's axes and the search texts carried over to a newly opened graph."""
    panel = small.solver_panel
    panel.plot.setXRange(0, 40, padding=0)
    panel.plot.setYRange(500, 900, padding=0)
    small.graph_view.search.setText("fc")
    gantt = small.schedule_tabs.widget(0).gantt
    gantt.find("fc")
    assert small.open_example("resnet18")
    (x0, x1), (y0, y1) = panel.plot.getPlotItem().getViewBox().viewRange()
    assert (x1, y1) == pytest.approx((1.0, 1.0))
    assert small.graph_view.search.text() == ""
    assert gantt.find_next() is None


def test_window_gives_the_live_plot_its_axis_title_when_notes_show(qtbot, small):
    """Four lines of notes after a weak solve pushed the live plot's time-axis title out of
    the solver dock at 1280x720: the window gives the panel the height its wrapped lines need."""
    panel = small.solver_panel
    dock = small.docks["solver"]
    notes = [
        "Stopped at its limit with a gap of 2.17 %: up to 2.17 % slower than the best "
        "(none faster than 59.9 ms).",
        "Model: XEngine's MIQP, 121,163 variables, 341,747 constraints.",
        "A longer time limit would narrow the gap.",
    ]
    panel._show_notes(notes)
    plot = panel.plot

    def bottom() -> int:
        return plot.mapTo(dock, plot.rect().bottomLeft()).y()

    qtbot.waitUntil(lambda: bottom() <= dock.height(), timeout=3_000)
    assert plot.height() >= plot.minimumHeight()

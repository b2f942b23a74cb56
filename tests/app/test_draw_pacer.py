"""Drawing a new result in parts (issue 10, event-loop stalls): the views' deferred redraws run
one per turn of the event loop, the newest result wins, and the grid is drawn opaque."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QColor, QImage, QPen

from app.theme import colors_for
from app.views.draw_pacer import DrawPacer
from app.views.plotting import _mixed_pen, configure_plot
from app.views.schedule_view import ScheduleView
from solver.optimize.methods import solve


@pytest.fixture
def other_results(graph):
    """Two more schedules of the hand-built graph: greedy (7 ms) and checkpoint-all (17 ms)."""
    greedy, everything = solve(graph, "greedy"), solve(graph, "checkpoint-all")
    assert (greedy.timeline.total_ms, everything.timeline.total_ms) == (7.0, 17.0)
    return greedy, everything


def test_waiting_redraws_run_one_per_turn_with_other_events_in_between(qtbot, qapp):
    owner = QObject()
    pacer = DrawPacer.of(owner)
    assert DrawPacer.of(owner) is pacer  # one per document
    a, b, c = QObject(owner), QObject(owner), QObject(owner)
    ran: list[str] = []

    def redraw(name: str):
        def run() -> None:
            ran.append(name)
            QTimer.singleShot(0, lambda: ran.append(f"timer after {name}"))

        return run

    pacer.request(a, redraw("a"))
    pacer.request(b, redraw("b"))
    pacer.request(a, redraw("a again"))  # keeps a's place, replaces its redraw, runs once
    pacer.request(c, redraw("c"))
    assert ran == [] and pacer.waiting == 3  # nothing inside request()
    qtbot.waitUntil(lambda: pacer.waiting == 0 and len(ran) == 6)
    assert ran == ["a again", "timer after a again", "b", "timer after b", "c", "timer after c"]


def test_a_view_read_before_its_turn_draws_at_once_and_a_deleted_one_is_skipped(qtbot):
    owner = QObject()
    pacer = DrawPacer.of(owner)
    read, gone = QObject(owner), QObject(owner)
    ran: list[str] = []
    pacer.request(read, lambda: ran.append("read"))
    pacer.request(gone, lambda: ran.append("gone"))
    pacer.run_now(read)
    assert ran == ["read"] and not pacer.is_waiting(read) and pacer.is_waiting(gone)
    pacer.run_now(read)  # nothing waits for it any more
    assert ran == ["read"]
    drawn: list[QObject] = []
    pacer.drawn.connect(drawn.append)
    gone.deleteLater()
    qtbot.waitUntil(lambda: pacer.waiting == 0)
    assert ran == ["read"] and drawn == []


def _drawn_end(view: ScheduleView) -> tuple[float, float]:
    """The time at which the Gantt chart's bars and the GPU memory curve end, as drawn (read
    from the items, not through the views' accessors, which would draw a waiting result)."""
    bars = [
        np.asarray(item.opts["x0"]) + np.asarray(item.opts["width"])
        for item in view.gantt._plot.items
        if isinstance(item, pg.BarGraphItem) and item.opts.get("x0") is not None
    ]
    gantt_end = max(float(b.max()) for b in bars if len(b))
    memory_end = float(view.memory._plots["gpu"].curve.xData[-1])
    return gantt_end, memory_end


def test_an_incumbent_arriving_between_the_parts_of_a_drawing_is_what_every_view_shows(
    qtbot, show, document, handbuilt_result, other_results
):
    view = show(ScheduleView(document), 1000, 600)
    pacer = DrawPacer.of(document)
    qtbot.waitUntil(lambda: pacer.waiting == 0)
    assert _drawn_end(view) == (11.0, 11.0)
    greedy, everything = other_results
    parts: list[tuple[QObject, tuple[float, float]]] = []

    def on_drawn(part: QObject) -> None:
        parts.append((part, _drawn_end(view)))
        if len(parts) == 1:  # half drawn: the next incumbent arrives now
            document.set_result(greedy, provisional=True)

    pacer.drawn.connect(on_drawn)
    document.set_result(everything, provisional=True)
    qtbot.waitUntil(lambda: pacer.waiting == 0 and len(parts) >= 3)
    first, second = parts[0][0], parts[1][0]
    assert {first, second} == {view.gantt, view.memory}  # one view per turn
    assert parts[0][1] in ((17.0, 11.0), (11.0, 17.0))  # the first part drew the 17 ms one
    # the 17 ms one was never finished: the views end up agreeing on the newest, 7 ms
    assert parts[-1][1] == (7.0, 7.0) and _drawn_end(view) == (7.0, 7.0)
    assert len(parts) == 3  # the view drawn first is drawn again, the other once
    assert "provisional" in view.gantt.summary_text


def test_the_final_result_replaces_a_half_drawn_incumbent(
    qtbot, show, document, handbuilt_result, other_results
):
    view = show(ScheduleView(document), 1000, 600)
    pacer = DrawPacer.of(document)
    greedy, everything = other_results
    done: list[QObject] = []

    def on_drawn(part: QObject) -> None:
        done.append(part)
        if len(done) == 1:
            document.set_result(greedy)  # the solve ends while its last incumbent is drawn

    pacer.drawn.connect(on_drawn)
    document.set_result(everything, provisional=True)
    qtbot.waitUntil(lambda: pacer.waiting == 0 and len(done) >= 3)
    assert _drawn_end(view) == (7.0, 7.0)
    assert "provisional" not in view.gantt.summary_text


def test_mixed_pen_is_the_translucent_colour_drawn_over_the_background():
    pen = QPen(QColor(0, 0, 0, 51))  # 20 % black, pyqtgraph's grid at alpha 0.2
    mixed = _mixed_pen(pen, QColor(255, 255, 255))
    # 255 * (1 - 51/255) = 204 on every channel, fully opaque
    assert mixed.color().getRgb() == (204, 204, 204, 255)
    opaque = QPen(QColor(10, 20, 30))
    assert _mixed_pen(opaque, QColor(255, 255, 255)) is opaque


def _grid_image(qtbot, opaque: bool, y_grid: bool) -> tuple[np.ndarray, QColor]:
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    colors = colors_for(widget)
    widget.setBackground(colors.background)
    plot = widget.getPlotItem()
    configure_plot(plot, colors)
    if y_grid:  # as the live plot and the explorer have
        plot.showGrid(x=True, y=True, alpha=0.25)
    if not opaque:
        del plot.getAxis("bottom").drawPicture  # pyqtgraph's own: translucent grid lines
    plot.setXRange(0, 10, padding=0)
    plot.setYRange(0, 1, padding=0)
    widget.resize(400, 300)
    widget.show()
    qtbot.waitExposed(widget)
    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), -1, 4)
    return pixels[:, : image.width(), :3].astype(int), QColor(colors.background)


@pytest.mark.parametrize("y_grid", [False, True])
def test_the_opaque_grid_looks_exactly_like_the_translucent_one(qtbot, y_grid):
    opaque, background = _grid_image(qtbot, True, y_grid)
    translucent, _ = _grid_image(qtbot, False, y_grid)
    assert opaque.shape == translucent.shape
    plain = np.array(background.getRgb()[:3])
    grid = (translucent != plain).any(axis=2)
    assert grid.sum() > 500  # vertical grid lines across the plot were drawn
    assert np.abs(opaque - translucent).max() <= 1  # pixel for pixel the same picture


def test_the_memory_plots_take_the_new_time_range_in_their_own_turn(
    qtbot, show, document, handbuilt_result, other_results
):
    """The Gantt chart's turn resets the linked time axis; the memory plots, whose redraw
    waits, follow it only in their own turn (following at once repainted them twice)."""
    view = show(ScheduleView(document), 1000, 600)
    pacer = DrawPacer.of(document)
    qtbot.waitUntil(lambda: pacer.waiting == 0)
    gantt_box = view.gantt.plot.getViewBox()
    memory_box = view.memory.plot("gpu").getViewBox()
    old = memory_box.viewRange()[0]
    assert old == pytest.approx(gantt_box.viewRange()[0])
    seen: dict[QObject, tuple[list[float], list[float]]] = {}
    pacer.drawn.connect(
        lambda part: seen.setdefault(part, (gantt_box.viewRange()[0], memory_box.viewRange()[0]))
    )
    _, everything = other_results
    document.set_result(everything, provisional=True)
    qtbot.waitUntil(lambda: pacer.waiting == 0 and len(seen) == 2)
    gantt_range, memory_range = seen[view.gantt]
    assert gantt_range[1] == pytest.approx(17.0 * 1.01, rel=0.02)  # the 17 ms schedule, padded
    assert memory_range == pytest.approx(old)  # not followed in the Gantt chart's turn
    assert seen[view.memory][1] == pytest.approx(gantt_range)  # followed in its own
    # with nothing waiting, the plots follow a pan at once, both ways
    gantt_box.setXRange(2.0, 6.0, padding=0)
    assert memory_box.viewRange()[0] == pytest.approx([2.0, 6.0])
    memory_box.setXRange(3.0, 5.0, padding=0)
    assert gantt_box.viewRange()[0] == pytest.approx([3.0, 5.0])

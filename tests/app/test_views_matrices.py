"""R/S matrices: cells are the schedule's, coloured by kind; selection flows across views."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor
from PySide6.QtTest import QTest

from app.theme import colors_for
from app.views.gantt import GanttView
from app.views.matrices import MatricesView
from app.views.memory import MemoryView

MiB = 2**20


def click_at(plot, x: float, y: float) -> None:
    """A real left click on a pyqtgraph plot at data coordinates."""
    vb = plot.getViewBox()
    graphics_view = vb.scene().views()[0]
    pos = graphics_view.mapFromScene(vb.mapViewToScene(QPointF(x, y)))
    QTest.mouseClick(graphics_view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


@pytest.fixture
def view(document, show):
    return show(MatricesView(document), 700, 700)


def test_matrices_cells_match_the_schedule_and_are_coloured_by_kind(view):
    colors = colors_for(view)
    background, outside = colors.background, colors.grid
    expected_r = {
        ("gpu", 0, 0): colors.kind("forward"),
        ("gpu", 1, 1): colors.kind("forward"),
        ("gpu", 2, 2): colors.kind("loss"),
        ("gpu", 3, 0): colors.recompute("forward"),
        ("cpu", 3, 3): colors.kind("backward"),
    }
    for device in ("cpu", "gpu"):
        for stage in range(4):
            for node in range(4):
                default = QColor(background if node <= stage else outside)
                want = expected_r.get((device, stage, node), default)
                assert view.cell_color(device, "R", stage, node).name() == want.name()


def test_matrices_s_cells_use_the_device_colour(view):
    colors = colors_for(view)
    kept = {(1, 0), (2, 1), (3, 2)}
    for stage in range(4):
        for node in range(4):
            gpu = view.cell_color("gpu", "S", stage, node).name()
            if (stage, node) in kept:
                assert gpu == colors.device(1).name()
            else:
                assert gpu in (colors.background, colors.grid)
    cpu = view.image("cpu", "S")[..., :3]
    assert not (cpu == np.array(colors.device(0).getRgb()[:3])).all(axis=-1).any()


def test_matrices_click_on_a_cell_selects_its_node(qtbot, view, document):
    with qtbot.waitSignal(document.selection_changed):
        click_at(view.plot("gpu", "R"), 0.0, 3.0)
    assert document.selection == "a"
    assert view.selected_column("cpu", "S") == 0


def test_matrices_outline_the_cursor_stage(view, document):
    document.set_cursor(4)
    assert view.cursor_row("gpu", "R") == 3 and view.cursor_row("cpu", "S") == 3
    document.set_cursor(None)
    assert view.cursor_row("gpu", "R") is None


def test_selection_in_gantt_reaches_matrices_and_memory(qtbot, document):
    gantt, matrices, memory = GanttView(document), MatricesView(document), MemoryView(document)
    for widget in (gantt, matrices, memory):
        qtbot.addWidget(widget)
        widget.resize(700, 400)
        widget.show()
        qtbot.waitExposed(widget)
    with qtbot.waitSignal(document.selection_changed):
        click_at(gantt.plot, 3.5, 2.0)  # the loss node c on the gpu lane
    assert document.selection == "c"
    for device in ("cpu", "gpu"):
        for which in ("R", "S"):
            assert matrices.selected_column(device, which) == 2
    assert memory.selected_curve("gpu").yData.max() == pytest.approx(1.0)


def _shows_whole(plot, n: int) -> bool:
    (x0, x1), (y0, y1) = plot.getViewBox().viewRange()
    return x0 <= -0.5 and x1 >= n - 0.5 and y0 <= -0.5 and y1 >= n - 0.5


@pytest.mark.parametrize("size", [(1400, 420), (500, 900)])
def test_matrices_show_every_stage_and_node_in_any_shape(qtbot, document, show, size):
    view = show(MatricesView(document), *size)
    n = document.graph.n
    for device in ("cpu", "gpu"):
        for which in ("R", "S"):
            qtbot.waitUntil(lambda d=device, w=which: _shows_whole(view.plot(d, w), n))


def test_matrices_fit_brings_the_whole_matrix_back_after_a_zoom(qtbot, view, document):
    n = document.graph.n
    plot = view.plot("gpu", "R")
    plot.getViewBox().setRange(xRange=(1, 2), yRange=(1, 2), padding=0)
    assert not _shows_whole(plot, n)
    view.fit()
    qtbot.waitUntil(lambda: _shows_whole(plot, n))


def test_matrices_axes_name_the_nodes(view, document):
    names = [node.id for node in document.graph.nodes]
    assert [view.axis_label("gpu", "R", "bottom", i) for i in range(len(names))] == names
    assert view.axis_label("cpu", "S", "left", 2) == f"2 {names[2]}"
    plot = view.plot("gpu", "R")
    values = plot.getAxis("bottom").tickValues(-0.5, len(names) - 0.5, 600)
    assert values and set(values[0][1]) == set(range(len(names)))  # room for every name


def test_matrices_draw_as_one_indexed_image_per_matrix(view):
    for device in ("cpu", "gpu"):
        for which in ("R", "S"):
            plot = view.plot(device, which)
            images = [i for i in plot.items if isinstance(i, pg.ImageItem)]
            assert len(images) == 1
            assert images[0].image.dtype == np.uint8 and images[0].image.ndim == 2


def test_matrices_render_each_cell_in_its_colour(qtbot, view):
    """What is painted, not just the arrays: a short colour table once drew every cell as
    the background."""
    colors = colors_for(view)
    for device, which, stage, node in (("gpu", "R", 0, 0), ("gpu", "R", 3, 0), ("gpu", "S", 1, 0)):
        plot = view.plot(device, which)
        vb = plot.getViewBox()
        graphics_view = vb.scene().views()[0]
        point = graphics_view.mapFromScene(vb.mapViewToScene(QPointF(node, stage)))
        image = graphics_view.grab().toImage()
        shown = QColor(image.pixel(point.x(), point.y()))
        want = view.cell_color(device, which, stage, node)
        assert shown.name() == want.name(), (device, which, stage, node)
    assert view.cell_color("gpu", "R", 0, 0).name() == colors.kind("forward").name()


def test_matrices_left_axis_draws_its_names(view):
    from PySide6.QtGui import QImage, QPainter

    axis = view.plot("gpu", "R").getAxis("left")
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        texts = [spec[2] for spec in axis.generateDrawSpecs(painter)[2]]
    finally:
        painter.end()
    assert texts and all(t.split(" ", 1)[1] in "a b c d".split() for t in texts)


def test_matrices_stand_in_one_row_in_a_short_wide_view(document, show):
    """At 1280x720 the tab is about 850x280: a 2x2 grid of squares would be ~60 px tall."""
    view = show(MatricesView(document), 850, 280)
    assert view.in_one_row
    plots = [view.plot(d, w) for d in ("cpu", "gpu") for w in ("R", "S")]
    tops = {round(p.sceneBoundingRect().top()) for p in plots}
    lefts = [p.sceneBoundingRect().left() for p in plots]
    assert len(tops) == 1 and lefts == sorted(lefts)  # side by side, R then S per device
    assert min(p.getViewBox().height() for p in plots) > 120
    view.resize(900, 700)  # tall again: the grid, a device per row
    assert not view.in_one_row
    assert plots[0].sceneBoundingRect().top() < plots[2].sceneBoundingRect().top()


def test_matrices_in_one_row_all_fit_the_view(qtbot, show):
    """VGG16 at 1280x720: four axes of long stage names cut the third and fourth matrix off;
    in one row only the first names the stages, and every matrix lies inside the view."""
    from app.document import Document
    from solver.document.examples import example_path
    from solver.document.graph_io import load_graph
    from solver.optimize.methods import solve

    graph = load_graph(example_path("vgg16"))
    document = Document()
    document.set_graph(graph)
    document.set_result(solve(graph, "checkpoint-all:gpu"))
    view = show(MatricesView(document), 817, 340)
    assert view.in_one_row
    plots = [view.plot(d, w) for d in ("cpu", "gpu") for w in ("R", "S")]
    qtbot.waitUntil(lambda: max(p.sceneBoundingRect().right() for p in plots) <= 817)
    assert [p.getAxis("left").isVisible() for p in plots] == [True, False, False, False]
    assert "classifier" in " ".join(plots[0].getAxis("left").names)

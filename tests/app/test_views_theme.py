"""Themes: palette, pyqtgraph defaults, existing plots and kind colours all switch together."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from app.theme import DARK, LIGHT, apply_theme, colors_for
from app.views.gantt import GanttView
from app.views.memory import MemoryView


@pytest.fixture
def dark(qapp):
    apply_theme(qapp, "dark")
    yield qapp
    apply_theme(qapp, "light")


def test_theme_dark_restyles_existing_views(qtbot, document, qapp):
    gantt, memory = GanttView(document), MemoryView(document)
    for widget in (gantt, memory):
        qtbot.addWidget(widget)
    assert colors_for(gantt) is LIGHT
    apply_theme(qapp, "dark")
    try:
        qtbot.waitUntil(lambda: colors_for(gantt) is DARK)  # palette changes arrive as events
        assert gantt.layer("forward").opts["brush"] == DARK.kind("forward")
        assert memory.curve("gpu").opts["pen"].color() == DARK.device(1)
        view = gantt.plot.getViewBox().scene().views()[0]
        assert view.backgroundBrush().color().name() == DARK.background
        assert pg.getConfigOption("background") == DARK.background
    finally:
        apply_theme(qapp, "light")
    qtbot.waitUntil(lambda: gantt.layer("forward").opts["brush"] == LIGHT.kind("forward"))


def test_theme_new_views_take_the_current_theme(qtbot, document, dark):
    gantt = GanttView(document)
    qtbot.addWidget(gantt)
    assert gantt.layer("backward").opts["brush"] == DARK.kind("backward")


def test_theme_unknown_name_is_refused(qapp):
    with pytest.raises(ValueError, match="unknown theme 'sepia'; choose one of light, dark"):
        apply_theme(qapp, "sepia")


def test_theme_kinds_are_distinct_in_both_themes():
    for colors in (LIGHT, DARK):
        fills = [colors.kind(k).name() for k in ("forward", "loss", "backward", "other")]
        fills += [colors.recompute("forward").name(), colors.transfer]
        assert len(set(fills)) == len(fills)


def test_dark_check_boxes_are_framed_visibly(qtbot, dark):
    """Fusion outlines a check box in the window colour made darker: on the dark theme the
    unchecked boxes (Allow offloading, Flows, Auto-solve) all but vanished."""
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton

    box = QCheckBox("Allow offloading")
    qtbot.addWidget(box)
    box.resize(200, 30)
    box.show()
    qtbot.waitExposed(box)
    image = box.grab().toImage()
    option = QStyleOptionButton()
    box.initStyleOption(option)
    rect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    window = box.palette().color(box.backgroundRole()).lightness()
    edge = [
        QColor(image.pixel(rect.left(), y)).lightness() for y in range(rect.top(), rect.bottom())
    ]
    assert max(edge) - window > 60  # the frame stands out from the window

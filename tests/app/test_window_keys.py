"""The stepper's keys work anywhere in the window, not only while the stepper has focus."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QPushButton, QToolButton, QWidget

from app.project import SolverSettings


@pytest.fixture
def window(qtbot, make_window):
    window = make_window("chain")
    window.document.set_settings(SolverSettings(method="checkpoint-all:cpu"))  # fast: no MIQP
    with qtbot.waitSignal(window.controller.finished, timeout=60_000):
        window.window_actions.solve.trigger()
    window.activateWindow()
    qtbot.waitActive(window)
    return window


def test_window_step_keys_work_while_another_view_has_focus(qtbot, window):
    canvas = window.graph_view.canvas
    canvas.setFocus()
    qtbot.waitUntil(canvas.hasFocus)
    count = len(window.document.timeline.ops)
    QTest.keyClick(canvas, Qt.Key.Key_Right)
    QTest.keyClick(canvas, Qt.Key.Key_Right)
    assert window.document.cursor == 1
    QTest.keyClick(canvas, Qt.Key.Key_End)
    assert window.document.cursor == count - 1
    QTest.keyClick(canvas, Qt.Key.Key_Left)
    assert window.document.cursor == count - 2
    QTest.keyClick(canvas, Qt.Key.Key_Home)
    assert window.document.cursor == 0
    QTest.keyClick(canvas, Qt.Key.Key_Space)
    assert window.stepper.playing
    QTest.keyClick(canvas, Qt.Key.Key_Space)
    assert not window.stepper.playing


def test_window_step_keys_leave_text_fields_alone(qtbot, window):
    edit = window.devices_panel.rows["gpu"].size_edit
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    edit.setCursorPosition(0)
    QTest.keyClick(edit, Qt.Key.Key_Right)
    assert edit.cursorPosition() == 1
    assert window.document.cursor is None


@pytest.mark.parametrize("button_type", [QPushButton, QToolButton])
def test_window_space_presses_a_focused_button_instead_of_playing(qtbot, window, button_type):
    button = button_type()
    button.setText("probe")
    button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    window.stepper.layout().addWidget(button)
    button.setFocus()
    qtbot.waitUntil(button.hasFocus)
    with qtbot.waitSignal(button.clicked, timeout=2_000):
        QTest.keyClick(button, Qt.Key.Key_Space)
    assert not window.stepper.playing
    canvas = window.graph_view.canvas
    canvas.setFocus()
    qtbot.waitUntil(canvas.hasFocus)
    QTest.keyClick(canvas, Qt.Key.Key_Space)  # off the button, Space plays again
    assert window.stepper.playing


def test_window_space_types_into_a_text_field_instead_of_playing(qtbot, window):
    window.graph_view.click_node("fc1")
    edit = window.inspector.node_page.op_edit
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    edit.setText("Gemm")
    QTest.keyClick(edit, Qt.Key.Key_Space)
    assert edit.text() == "Gemm " and not window.stepper.playing


def test_window_stepper_keeps_qwidget_actions():
    from app.views.stepper import StepperPanel

    assert StepperPanel.actions is QWidget.actions  # not shadowed by a property

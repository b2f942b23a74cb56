"""Stepper: buttons, keys, slider and playback move the document cursor; the text explains."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtTest import QTest

from app.views.stepper import StepperPanel


@pytest.fixture
def panel(document, show):
    return show(StepperPanel(document), 700, 140)


def test_stepper_starts_before_the_first_operation(panel, document):
    assert document.cursor is None
    assert panel.explanation == "Press ▶ or → to step through the schedule."


def test_stepper_next_and_previous_move_the_cursor(panel, document):
    panel.step_actions["next"].trigger()
    assert document.cursor == 0
    panel.step_actions["next"].trigger()
    panel.step_actions["next"].trigger()
    assert document.cursor == 2
    panel.step_actions["previous"].trigger()
    assert document.cursor == 1
    panel.step_actions["last"].trigger()
    assert document.cursor == 4
    panel.step_actions["next"].trigger()
    assert document.cursor == 4
    panel.step_actions["first"].trigger()
    assert document.cursor == 0


def test_stepper_explains_the_recomputation_with_node_device_and_reason(panel, document):
    document.set_cursor(3)
    assert panel.explanation.startswith("stage 3: recompute a on gpu (1 ms) — its output was freed")
    assert "to stay under 3.0 MiB" in panel.explanation
    document.set_cursor(4)
    assert panel.explanation == "stage 3: compute d on cpu (4 ms), copying a and c from gpu (2 ms)"


def test_stepper_slider_follows_and_drives_the_cursor(panel, document):
    document.set_cursor(2)
    assert panel.slider.value() == 2 and panel.slider.maximum() == 4
    panel.slider.setValue(3)
    assert document.cursor == 3


def test_stepper_keyboard_shortcuts(qtbot, panel, document):
    panel.activateWindow()
    panel.setFocus()
    qtbot.waitUntil(panel.hasFocus)
    QTest.keyClick(panel, Qt.Key.Key_Right)
    QTest.keyClick(panel, Qt.Key.Key_Right)
    assert document.cursor == 1
    QTest.keyClick(panel, Qt.Key.Key_End)
    assert document.cursor == 4
    QTest.keyClick(panel, Qt.Key.Key_Left)
    assert document.cursor == 3
    QTest.keyClick(panel, Qt.Key.Key_Home)
    assert document.cursor == 0
    QTest.keyClick(panel, Qt.Key.Key_Space)
    assert panel.playing
    QTest.keyClick(panel, Qt.Key.Key_Space)
    assert not panel.playing


def test_stepper_plays_to_the_end_and_stops(qtbot, panel, document):
    panel.set_play_interval(5)
    panel.step_actions["play"].trigger()
    assert panel.playing and document.cursor == 0
    qtbot.waitUntil(lambda: not panel.playing, timeout=3000)
    assert document.cursor == 4


def test_stepper_disables_itself_without_a_schedule(panel, document):
    document.set_result(None)
    assert not panel.slider.isEnabled()
    assert not panel.step_actions["next"].isEnabled()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_stepper_icons_contrast_with_the_theme(qapp, panel, theme):
    """The step buttons are drawn in the button-text colour: visible on the dark theme too."""
    from app.theme import apply_theme

    apply_theme(qapp, theme)
    try:
        button = panel.palette().color(QPalette.ColorRole.Button)
        for name in ("first", "previous", "play", "next", "last"):
            icon = panel.icon_color(name)
            assert icon.name() == panel.palette().color(QPalette.ColorRole.ButtonText).name()
            assert abs(icon.lightnessF() - button.lightnessF()) > 0.5, name
        panel.set_playing(True)
        assert panel.icon_color("play").name() == icon.name()  # pause, same colour
        panel.set_playing(False)
    finally:
        apply_theme(qapp, "light")


def test_stepper_says_which_constraint_binds(panel, document):
    document.set_cursor(1)  # b on the gpu: a (1 MiB) and b (2 MiB) fill its 3 MiB
    assert panel.binding_text == (
        "gpu is at its limit: 3.0 MiB of its 3.0 MiB activation budget (100%) while b runs"
    )
    document.set_cursor(3)  # a again on the gpu, after c
    assert panel.binding_text.startswith("a is recomputed: ")
    document.set_cursor(4)  # d on the cpu reads a and c, both on the gpu
    assert panel.binding_text == (
        "a is copied from gpu: d needs it on cpu, where it is not resident; "
        "c is copied from gpu: d needs it on cpu, where it is not resident"
    )
    document.set_cursor(0)
    assert panel.binding_text == "nothing binds: every device has room"


def test_stepper_text_says_each_thing_once(panel, document):
    """The step text repeated itself: a recomputation's reason twice, copies twice (issue 20)."""
    import html as html_module

    document.set_cursor(3)  # a recomputed
    reason = panel.binding_text.removeprefix("a is recomputed: ")
    shown = html_module.unescape(panel.shown_text)
    assert shown.count(reason) == 1
    document.set_cursor(4)  # d on the cpu, copying a and c
    shown = html_module.unescape(panel.shown_text)
    assert "copying" in shown and "is copied from" not in shown

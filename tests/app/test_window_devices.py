"""The device panel's size field: always a unit (``2.56 GiB``), typed units still accepted.

Slider positions snap to round sizes; budgets from a file, a script or an undo need not be round
(4_solved.png showed ``2751027520 B``), and those are what the field must still show with a unit.
"""

from __future__ import annotations

from app.commands import SetBudgetCommand
from app.panels.devices import SLIDER_STEPS

ODD_BUDGET = 2_751_027_520  # 60 % of vgg16's no-remat peak, as scratch/shots.py sets it


def test_device_size_field_shows_a_unit_for_any_budget(make_window):
    window = make_window("vgg16")
    row = window.devices_panel.rows["gpu"]
    window.document.edit(SetBudgetCommand, "gpu", ODD_BUDGET)
    row.slider.setValue(row.slider.value() - 1)
    window.document.undo_stack.undo()  # back to the odd budget, through the slider's path
    budget = window.document.budgets["gpu"]
    assert budget == ODD_BUDGET
    assert row.size_edit.text() == "2.56 GiB"  # format_size would round to 2.6 GiB
    assert not row.size_edit.text().endswith(" B")
    assert f"{budget:,}" in row.size_edit.toolTip()
    assert row.size_edit.value() == budget


def test_device_size_field_focus_out_keeps_the_exact_budget(make_window):
    window = make_window("vgg16")
    row = window.devices_panel.rows["gpu"]
    window.document.edit(SetBudgetCommand, "gpu", ODD_BUDGET)
    budget, edits = window.document.budgets["gpu"], window.document.undo_stack.count()
    row.size_edit.editingFinished.emit()  # leaving the field without typing
    assert window.document.budgets["gpu"] == budget
    assert window.document.undo_stack.count() == edits


def test_device_size_field_accepts_typed_units(make_window):
    window = make_window("vgg16")
    row = window.devices_panel.rows["gpu"]
    row.slider.setValue(round(0.7 * SLIDER_STEPS))
    row.size_edit.setText("2 GiB")
    row.size_edit.editingFinished.emit()
    assert window.document.budgets["gpu"] == 2 * 1024**3
    assert row.size_edit.text() == "2 GiB"

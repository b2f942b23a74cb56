"""The device panel's size field: always a unit (``2.56 GiB``), typed units still accepted.

Slider positions snap to round sizes; budgets from a file, a script or an undo need not be round
(4_solved.png showed ``2751027520 B``), and those are what the field must still show with a unit.
"""

from __future__ import annotations

from app.commands import SetMemoryLimitCommand
from app.panels.devices import SLIDER_STEPS

ODD_BUDGET = 2_751_027_520  # 60 % of vgg16's no-remat peak, as scratch/shots.py sets it


def test_device_size_field_shows_a_unit_for_any_budget(make_window):
    window = make_window("vgg16")
    row = window.devices_panel.rows["gpu"]
    window.document.edit(SetMemoryLimitCommand, "gpu", ODD_BUDGET)
    row.slider.setValue(row.slider.value() - 1)
    window.document.undo_stack.undo()  # back to the odd budget, through the slider's path
    budget = window.document.memory_limits["gpu"]
    assert budget == ODD_BUDGET
    assert row.size_edit.text() == "2.56 GiB"  # format_size would round to 2.6 GiB
    assert not row.size_edit.text().endswith(" B")
    assert f"{budget:,}" in row.size_edit.toolTip()
    assert row.size_edit.value() == budget


def test_device_size_field_focus_out_keeps_the_exact_budget(make_window):
    window = make_window("vgg16")
    row = window.devices_panel.rows["gpu"]
    window.document.edit(SetMemoryLimitCommand, "gpu", ODD_BUDGET)
    budget, edits = window.document.memory_limits["gpu"], window.document.undo_stack.count()
    row.size_edit.editingFinished.emit()  # leaving the field without typing
    assert window.document.memory_limits["gpu"] == budget
    assert window.document.undo_stack.count() == edits


def test_device_size_field_accepts_typed_units(make_window):
    window = make_window("vgg16")
    row = window.devices_panel.rows["gpu"]
    row.slider.setValue(round(0.7 * SLIDER_STEPS))
    row.size_edit.setText("2 GiB")
    row.size_edit.editingFinished.emit()
    assert window.document.memory_limits["gpu"] == 2 * 1024**3
    assert row.size_edit.text() == "2 GiB"


def test_device_row_says_which_quantity_each_number_counts(make_window):
    """One word, one quantity: the field counts device memory, the landmarks activations."""
    from solver.document.units import format_size
    from solver.optimize.bounds import lower_bound, no_remat_peak

    window = make_window("vgg16")
    graph = window.document.graph
    gpu = graph.device("gpu")
    peak, low = no_remat_peak(graph), lower_bound(graph, "gpu")
    window.document.edit(SetMemoryLimitCommand, "gpu", gpu.fixed_memory + int(0.6 * peak))
    row = window.devices_panel.rows["gpu"]
    device = window.document.graph.device("gpu")
    text = row.landmarks_label.text()
    assert (
        f"activations {format_size(device.activation_budget)} "
        f"+ fixed {format_size(gpu.fixed_memory)}" in (text)
    )
    assert f"lower bound {format_size(low)}" in text and f"peak {format_size(peak)}" in text
    assert "MB" not in text and "GB" not in text  # one unit family: IEC
    assert row.size_edit.text().endswith("GiB")
    assert "Device memory, in total" in row.size_edit.toolTip()
    # the percentage is always there, also below the lower bound (60 % < vgg16's bound)
    percent = row.percent_label.text()
    assert "<b>60 %</b> of peak" in percent
    # per device a fact, in neutral words: features_2.grad goes to the CPU; the joint
    # problem is feasible, so nothing is red (issue 10: red means it cannot be solved)
    assert "1 node runs elsewhere" in percent and "color" not in percent
    assert "features_2.grad" in row.percent_label.toolTip()
    assert "XEngine runs it on cpu" in row.percent_label.toolTip()


def test_device_size_field_shows_iec_for_a_typed_si_size(make_window):
    window = make_window("chain")
    row = window.devices_panel.rows["gpu"]
    row.size_edit.setText("29 MB")
    row.size_edit.editingFinished.emit()
    assert window.document.memory_limits["gpu"] == 29_000_000
    assert row.size_edit.text() == "27.7 MiB"
    assert "29,000,000" in row.size_edit.toolTip()


def test_teaching_graph_says_why_its_gpu_is_below_the_lower_bound(make_window):
    from solver.document.units import format_size
    from solver.optimize.bounds import lower_bound

    window = make_window("chain")  # the default example: its gpu is below the bound on purpose
    graph = window.document.graph
    row = window.devices_panel.rows["gpu"]
    # it does not open on red: the joint problem is feasible, the row says why in plain words
    assert "1 node runs elsewhere" in row.percent_label.text()
    assert "color" not in row.percent_label.text()
    assert row.note_label.isVisibleTo(row)
    note = row.note_label.text()
    assert note.startswith(
        "gpu alone cannot run every node: relu1.grad needs up to "
        f"{format_size(lower_bound(graph, 'gpu'))} of activations at once"
    )
    assert "XEngine runs it on cpu" in note
    assert row.percent_label.toolTip() == note
    assert not window.devices_panel.rows["cpu"].note_label.isVisibleTo(row)
    window.document.edit(SetMemoryLimitCommand, "gpu", 10 * graph.device("gpu").memory_limit)
    assert not row.note_label.isVisibleTo(row)
    assert "elsewhere" not in row.percent_label.text()


def test_red_only_when_no_schedule_exists(make_window):
    """Both devices below relu1.grad's need: no schedule exists, and the rows say so in red."""
    from solver.optimize.bounds import explain_infeasible, lower_bound

    window = make_window("chain")
    graph = window.document.graph
    need = lower_bound(graph)  # relu1.grad's output and inputs
    for name in ("cpu", "gpu"):
        window.document.edit(
            SetMemoryLimitCommand, name, graph.device(name).fixed_memory + need - 1
        )
    assert "node 'relu1.grad' needs" in explain_infeasible(window.document.graph)
    row = window.devices_panel.rows["gpu"]
    assert "no schedule exists" in row.percent_label.text()
    assert "#d62728" in row.percent_label.text()
    assert "No schedule exists" in row.note_label.text()
    assert "relu1.grad" in row.note_label.text()
    assert "#d62728" in row.note_label.styleSheet()

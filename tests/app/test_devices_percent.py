"""The percentage beside a memory slider: what it says for budgets far above the peak."""

from __future__ import annotations

from app.panels.devices import _percent_text


def test_percent_of_peak_within_ten_times_the_peak() -> None:
    assert _percent_text(60, 100, 0, False) == "<b>60 %</b> of peak"
    assert _percent_text(250, 100, 0, False) == "<b>250 %</b> of peak · no remat"


def test_a_host_far_above_the_peak_reads_as_a_multiple() -> None:
    # an imported model's 64 GiB host against a 2.0 MiB peak read "3230133 % of peak"
    assert (
        _percent_text(64 * 2**30, 2_077_696, 0, False)
        == "<b>over 1000\u00d7</b> the peak · no remat"
    )
    assert _percent_text(409 * 100, 100, 0, False) == "<b>409\u00d7</b> the peak · no remat"


def test_memory_field_takes_a_percentage_of_the_peak_as_the_command_line_does(make_window):
    """The GPU memory field refused "60%", which ``--budget gpu=60%`` accepts (issue 20)."""
    from solver.cli import parse_budget

    window = make_window("chain")
    graph = window.document.graph
    edit = window.devices_panel.rows["gpu"].size_edit
    edit.setText("60%")
    edit.editingFinished.emit()
    assert window.document.memory_limits["gpu"] == parse_budget(graph, "gpu=60%")[1]
    edit.setText("lots%")
    edit.editingFinished.emit()
    assert "not a percentage" in edit.toolTip()


def test_device_row_names_the_kind_only_when_it_differs(make_window):
    """Rows read "cpu cpu" and "gpu gpu": the kind repeated the name (issue 20)."""
    window = make_window("chain")
    row = window.devices_panel.rows["cpu"]
    assert not row.kind_label.isVisibleTo(row)

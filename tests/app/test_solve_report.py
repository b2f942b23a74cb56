"""A weak result says what it is and what would help (issue 20, item 5; issue 18)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.panels.solve_report import idle_budgets, readable_log_line, result_notes
from app.views.memory import MemoryView
from solver.optimize.methods import solve
from solver.status import Progress, SolveStatus


@pytest.fixture
def weak(document):
    """The hand-built schedule dressed as a CBC solve stopped at its time limit at 19 %."""
    return replace(
        document.result,
        method="xengine",
        status=SolveStatus.FEASIBLE,
        objective=11.0,
        bound=8.9,
        gap=0.19,
        variables=412_345,
        constraints=823_001,
        backend="cbc",
    )


def test_report_names_gap_model_size_and_advice(weak):
    text = " ".join(result_notes(weak))
    assert "gap of 19 %" in text and "up to 19 % slower than the best" in text
    assert "412,345 variables, 823,001 constraints" in text
    assert "try HiGHS" in text


def test_report_shows_the_solver_advice_and_formulation_when_given(weak):
    result = replace(
        weak, advice="Solve at layer level first.", formulation="retention intervals (C=2)"
    )
    notes = result_notes(result)
    assert "Solve at layer level first." in notes
    assert "try HiGHS" not in " ".join(notes)
    assert "Model: retention intervals (C=2), 412,345 variables, 823,001 constraints." in notes


def test_report_says_the_gap_once(weak):
    """The solver's advice starts by naming the gap, which the report's first note gives: the
    panel keeps only its remedy (repeated, the notes pushed the live plot's axis off a
    1280x720 dock)."""
    result = replace(weak, advice="the gap is 19.0%: try a longer time limit than 15 s")
    notes = result_notes(result)
    assert not any("19.0%" in n or "gap is" in n for n in notes)
    assert "Try a longer time limit than 15 s." in notes


def test_report_writes_the_solvers_advice_as_a_sentence(weak):
    """The command line's clause read as a stray lowercase line under the panel's sentences."""
    clause = "the solve was cut short while gpu still used less than 50% of its budget"
    assert result_notes(replace(weak, advice=clause))[-1] == (
        "The solve was cut short while gpu still used less than 50% of its budget."
    )


def test_report_says_an_idle_budget_was_left_by_a_cut_short_solve(weak):
    timeline = weak.timeline
    budgets = {d: 4 * peak for d, peak in timeline.peaks.items()}  # a quarter used
    idle = replace(weak, timeline=replace(timeline, activation_budgets=budgets))
    assert set(idle_budgets(idle)) == {d for d in budgets if timeline.peaks[d]}
    assert any("the solve ended before it could use the rest" in n for n in result_notes(idle))
    optimal = replace(idle, status=SolveStatus.OPTIMAL, gap=0.0)
    assert not any("before it could use" in n for n in result_notes(optimal))


def test_report_says_nothing_about_an_optimal_result(document):
    result = replace(document.result, status=SolveStatus.OPTIMAL, gap=0.0)
    assert result_notes(result) == []


def test_report_names_the_search_that_proved_an_optimal_result(document):
    # the model's size line would otherwise read as the proof
    message = (
        "it meets a proven lower bound: no schedule costs less than 11 ms (found by the exact "
        "search beside the backend; within 0.01 %), so the solve stopped there"
    )
    result = replace(document.result, status=SolveStatus.OPTIMAL, gap=0.0, message=message)
    assert result_notes(result) == ["It" + message[2:] + "."]
    assert result_notes(replace(result, status=SolveStatus.FEASIBLE, gap=None)) == []


def test_log_drops_the_mps_reader_and_reads_cbc_progress():
    assert readable_log_line("At line 341751 COLUMNS") is None
    assert readable_log_line("Coin0001I At line 15 NAME          MODEL") is None
    line = readable_log_line(
        "Cbc0010I After 1200 nodes, 40 on tree, 100 best solution, best possible 81 (25.00 seconds)"
    )
    assert line == (
        "25.00 s: 1200 branches searched; best schedule 100 ms, none faster than 81 ms (gap 19 %)"
    )


def test_solver_panel_shows_the_notes_and_a_readable_log(qtbot, make_window, weak):
    window = make_window("chain")
    panel = window.solver_panel
    panel.clear_progress()  # as when a solve starts
    batch = [
        Progress(0.5, log_line="At line 341751 COLUMNS"),
        Progress(1.0, log_line="Problem MODEL has 10 rows, 8 columns and 40 elements"),
    ]
    panel._on_controller_progressed(batch)
    assert "COLUMNS" not in panel.log.toPlainText()
    assert "10 constraints, 8 variables" in panel.log.toPlainText()
    panel.raw_log_box.setChecked(True)
    assert "At line 341751 COLUMNS" in panel.log.toPlainText()
    panel._on_controller_finished(weak)
    assert "gap of 19 %" in panel.notes and panel.notes_label.isVisible()


def test_memory_plot_keeps_the_budget_line_of_a_half_used_budget(document, show):
    timeline = document.timeline
    budgets = {d: 2 * max(peak, 1) for d, peak in timeline.peaks.items()}
    half = replace(document.result, timeline=replace(timeline, activation_budgets=budgets))
    document.set_result(half)
    view = show(MemoryView(document), 900, 400)
    assert view.budget_line("gpu").isVisible()
    assert "off scale" not in view.title("gpu")


def test_report_for_a_real_single_device_solve_is_quiet(graph):
    assert not any("gap" in n for n in result_notes(solve(graph, "checkpoint-all:gpu")))


def test_report_has_nothing_to_say_of_a_heuristic(graph):
    greedy = solve(graph, "greedy")
    assert result_notes(greedy) == []


def test_report_ignores_budgets_above_the_no_remat_peak(weak):
    timeline = weak.timeline
    budgets = {d: 4 * max(peak, 1) for d, peak in timeline.peaks.items()}
    idle = replace(weak, timeline=replace(timeline, activation_budgets=budgets))
    assert idle_budgets(idle, no_remat_peak=min(budgets.values())) == {}


def test_report_speaks_of_a_solve_whose_limit_ran_out_before_its_model(weak):
    """A 2,557-op import at a 15 s limit ended at the first schedule, 12x the best, with the GPU
    idle, and the panel said nothing: no variables and no gap read as a heuristic."""
    timeline = weak.timeline
    cpu_only = replace(timeline, ops=tuple(replace(op, device="cpu") for op in timeline.ops))
    early = replace(
        weak,
        timeline=cpu_only,
        bound=None,
        gap=None,
        variables=0,
        constraints=0,
        backend="CBC",
        message="the time limit ran out while the interval model was built",
    )
    text = " ".join(result_notes(early))
    assert "before its model was solved (the time limit ran out while the interval" in text
    assert "gpu runs nothing" in text
    assert "longer time limit" in text

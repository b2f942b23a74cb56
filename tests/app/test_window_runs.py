"""The interval model's ``C`` in the window (issue 18): a "Runs per node" box, remembered, saved
with the project, passed to the solve, and named by the advice instead of the CLI's ``--runs``.

The advice of a result CP-SAT proved only under "at most C runs per node" used to tell a window
user to pass ``--runs 3``, a flag of the command line the window had no control for.
"""

from __future__ import annotations

from dataclasses import replace

from app.panels.solve_report import result_notes
from app.project import Project, SolverSettings, load_project, save_project
from app.settings import AppSettings
from solver.document.generators import unit_chain
from solver.optimize.advice import advise
from solver.optimize.incumbents import Restricted
from solver.optimize.intervals import DEFAULT_RUNS, MAX_RUNS
from solver.optimize.solve import SolveOptions
from solver.results.key import result_key
from solver.status import SolveStatus


def test_runs_default_to_the_solvers_and_reach_the_solve():
    assert SolverSettings().runs == DEFAULT_RUNS == SolveOptions().runs
    assert SolverSettings(runs=4).solve_options().runs == 4
    # a hand-edited file's nonsense falls back to the default, as the other settings do
    assert SolverSettings(runs=0).checked().runs == DEFAULT_RUNS
    assert SolverSettings(runs=MAX_RUNS + 1).checked().runs == DEFAULT_RUNS


def test_runs_are_remembered_and_saved_with_the_project(app_settings: AppSettings, tmp_path):
    app_settings.set_solver_settings(SolverSettings(runs=3))
    assert AppSettings(app_settings.qsettings).solver_settings().runs == 3
    path = tmp_path / "p.xengine.json"
    save_project(Project(unit_chain(3, budget=4), SolverSettings(runs=5)), path)
    assert load_project(path).settings.runs == 5
    save_project(Project(unit_chain(3, budget=4), SolverSettings()), path)
    assert load_project(path).settings.runs == DEFAULT_RUNS


def test_more_runs_is_another_answer_to_the_stores_and_the_cache(make_window):
    graph = unit_chain(3, budget=4)
    two, three = SolveOptions(), SolveOptions(runs=3)
    assert result_key(graph, "xengine", two) != result_key(graph, "xengine", three)
    assert result_key(graph, "greedy", two) == result_key(graph, "greedy", three)  # no model

    window = make_window("chain")
    panel = window.solver_panel
    assert panel.runs_box.value() == DEFAULT_RUNS
    before = window.document.result_key()
    panel.runs_box.setValue(3)
    panel.runs_box.editingFinished.emit()  # the user leaves the box: the document follows
    assert window.document.settings.runs == 3
    assert window.document.settings.solve_options().runs == 3
    assert window.document.result_key() != before
    window.document.set_settings(replace(window.document.settings, runs=6))
    assert panel.runs_box.value() == 6  # and the box follows the document (an opened project)


def test_the_advice_names_the_panels_controls_not_the_command_lines_flags(document):
    graph = document.graph
    proven = replace(
        document.result,
        method="xengine",
        status=SolveStatus.FEASIBLE,
        objective=11.0,
        bound=10.0,
        gap=1 / 11,
        restricted=Restricted(2, 11.0, True),
    )
    advice = advise(proven, graph, 60, "cpsat")
    assert "--runs 3 starts there)" in advice  # the command line's words
    notes = " ".join(result_notes(replace(proven, advice=advice)))
    assert "Runs per node at 3 starts there" in notes and "--runs" not in notes

    weak = replace(proven, restricted=None, gap=0.2)
    cli = (
        "the gap is 20.0%: try a longer time limit than 60 s or the CP-SAT solver (--solver cpsat)"
    )
    notes = " ".join(result_notes(replace(weak, advice=cli)))
    assert "the CP-SAT solver (Solver: CP-SAT)" in notes and "--solver" not in notes

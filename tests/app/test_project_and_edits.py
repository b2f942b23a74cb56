"""Project files and settings, without a window.

Graph edits: tests/solver/editing/test_edits.py.
"""

from __future__ import annotations

import json

import pytest

from app.project import (
    PROJECT_FORMAT,
    Project,
    SolverSettings,
    load_any,
    load_project,
    project_to_dict,
    save_project,
)
from app.widgets import exact_size_text
from solver.document.examples import example_path
from solver.document.generators import unit_chain
from solver.document.graph_io import graph_to_dict, load_graph
from solver.document.schedule_io import save_schedule, schedule_to_dict
from solver.errors import GraphFormatError
from solver.optimize.methods import solve


def test_project_round_trip_keeps_graph_budgets_settings_and_schedule(tmp_path):
    graph = load_graph(example_path("diamond")).with_memory_limits({"gpu": 44_000_000})
    result = solve(graph, "checkpoint-all:gpu")
    settings = SolverSettings("checkmate:gpu", "cbc", 12.0, 0.02, True)
    path = tmp_path / "p.xengine.json"
    save_project(Project(graph, settings, result), path)
    assert json.loads(path.read_text())["format"] == PROJECT_FORMAT
    back = load_project(path)
    assert graph_to_dict(back.graph) == graph_to_dict(graph)
    assert back.settings == settings
    assert schedule_to_dict(back.result.schedule) == schedule_to_dict(result.schedule)
    assert back.result.ok and back.result.timeline.total_ms == pytest.approx(
        result.timeline.total_ms
    )


def test_project_bad_budget_and_schedule_file_are_named(tmp_path):
    graph = unit_chain(2, budget=10)
    doc = project_to_dict(Project(graph))
    doc["budgets"]["cpu"] = "-3 MB"
    path = tmp_path / "bad.xengine.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(GraphFormatError, match="bad.xengine.json: budgets: '-3 MB' is negative"):
        load_any(path)
    schedule = tmp_path / "s.schedule.json"
    save_schedule(solve(graph, "checkpoint-all").schedule, schedule)
    with pytest.raises(GraphFormatError, match="this is a schedule file"):
        load_any(schedule)
    assert load_any(example_path("chain"))[1] is False


def test_settings_checked_replaces_out_of_range_values():
    fixed = SolverSettings(backend="gurobi", time_limit_s=-1, gap_rel=float("nan")).checked()
    assert fixed == SolverSettings()


def test_exact_size_text_reads_back_exactly():
    from solver.document.units import parse_size

    for value in (0, 12, 1024, 29_000_000, 16 * 1024**3, 1_234_567, 3 * 1024**2 + 1):
        assert parse_size(exact_size_text(value)) == value

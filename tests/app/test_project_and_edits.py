"""Project files and pure graph edits, without a window."""

from __future__ import annotations

import json

import pytest

from app import edits
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
from solver.errors import GraphFormatError
from solver.examples import example_path
from solver.formats import graph_to_dict, load_graph, save_schedule, schedule_to_dict
from solver.generators import unit_chain
from solver.graph import Device
from solver.methods import solve


def test_project_round_trip_keeps_graph_budgets_settings_and_schedule(tmp_path):
    graph = load_graph(example_path("diamond")).with_budgets({"gpu": 44_000_000})
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


def test_edits_rename_device_follows_costs_links_and_overrides():
    graph = edits.set_edge_transfer(
        load_graph(example_path("chain")), "fc1", "relu1", {"cpu->gpu": 2.0}
    )
    renamed = edits.rename_device(graph, "gpu", "tpu")
    assert [d.name for d in renamed.devices] == ["cpu", "tpu"]
    assert {lk.target for lk in renamed.links} == {"cpu", "tpu"}
    assert renamed.node("fc1").cost == {"cpu": 4.0, "tpu": 0.5}
    assert next(e for e in renamed.edges if e.source == "fc1").transfer_ms == {"cpu->tpu": 2.0}
    with pytest.raises(GraphFormatError, match="duplicate device name"):
        edits.rename_device(graph, "gpu", "cpu")


def test_edits_remove_last_device_of_a_node_is_refused():
    graph = unit_chain(2, budget=10)
    with pytest.raises(GraphFormatError, match="node 'n0', field 'cost': no device can run it"):
        edits.remove_device(graph, "cpu")
    two = edits.add_device(graph, Device("gpu", "gpu", 8))
    assert two.node("n0").cost == {"cpu": 1.0, "gpu": 1.0}
    assert len(edits.remove_device(two, "gpu").links) == 0


def test_exact_size_text_reads_back_exactly():
    from solver.units import parse_size

    for value in (0, 12, 1024, 29_000_000, 16 * 1024**3, 1_234_567, 3 * 1024**2 + 1):
        assert parse_size(exact_size_text(value)) == value

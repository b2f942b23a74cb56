"""Graph and schedule files: every field read exactly, every error named with place and fix."""

from __future__ import annotations

import copy
import json

import pytest

from solver.errors import GraphFormatError, ScheduleFormatError
from solver.examples import bundled_graphs
from solver.formats import (
    graph_from_dict,
    graph_to_dict,
    load_graph,
    load_schedule,
    save_graph,
    save_schedule,
    schedule_from_dict,
)
from solver.methods import solve
from solver.simulate import check_schedule

SPEC_EXAMPLE = {
    "format": "remat-graph",
    "version": 1,
    "name": "two-layer chain",
    "devices": [
        {"name": "cpu", "kind": "cpu", "memory": "16 GiB"},
        {"name": "gpu", "kind": "gpu", "memory": 4000000},
    ],
    "links": [
        {"from": "cpu", "to": "gpu", "bandwidth": "12 GB/s", "latency_ms": 0.01},
        {"from": "gpu", "to": "cpu", "bandwidth": "12 GB/s", "latency_ms": 0.01},
    ],
    "nodes": [
        {
            "id": "fc1",
            "op": "Gemm",
            "kind": "forward",
            "memory": 1000000,
            "cost": {"cpu": 1.0, "gpu": 10.0},
        },
        {
            "id": "fc2",
            "op": "Gemm",
            "kind": "forward",
            "memory": "4 MB",
            "cost": {"cpu": 10.0, "gpu": 1.0},
            "inputs": ["fc1"],
        },
    ],
    "edges": [{"from": "fc1", "to": "fc2", "transfer_ms": {"cpu->gpu": 3, "gpu->cpu": 8}}],
}


def test_spec_example_reads_with_units_links_and_overrides():
    graph = graph_from_dict(SPEC_EXAMPLE)
    assert graph.device("cpu").memory == 16 * 1024**3
    assert [n.memory for n in graph.nodes] == [1_000_000, 4_000_000]
    assert graph.transfer_ms("fc1", "fc2", "cpu", "gpu") == 3.0
    assert graph.transfer_ms("fc1", "fc2", "gpu", "cpu") == 8.0
    assert len(graph.edges) == 1  # inputs and edges entries are the union


def test_link_model_gives_latency_plus_bytes_over_bandwidth():
    doc = copy.deepcopy(SPEC_EXAMPLE)
    del doc["edges"]
    graph = graph_from_dict(doc)
    assert graph.transfer_ms("fc1", "fc2", "cpu", "gpu") == pytest.approx(0.01 + 1000 * 1e6 / 12e9)


def test_spec_schedule_example_replays_to_five_ms():
    graph = graph_from_dict(SPEC_EXAMPLE).with_budgets({"cpu": 5_000_000, "gpu": 5_000_000})
    schedule = schedule_from_dict(
        {
            "format": "remat-schedule",
            "version": 1,
            "graph": "two-layer chain",
            "budgets": {"cpu": 5000000, "gpu": 5000000},
            "stages": [
                {"ops": [{"node": "fc1", "device": "cpu"}], "keep": {"cpu": ["fc1"], "gpu": []}},
                {
                    "ops": [{"node": "fc2", "device": "gpu", "inputs": {"fc1": "cpu"}}],
                    "keep": {"cpu": [], "gpu": []},
                },
            ],
        },
        graph,
    )
    assert check_schedule(graph, schedule).total_ms == pytest.approx(5.0)


def test_round_trip_of_graph_and_schedule(tmp_path):
    graph = load_graph(bundled_graphs()["chain"])
    save_graph(graph, tmp_path / "g.graph.json")
    again = load_graph(tmp_path / "g.graph.json")
    assert graph_to_dict(again) == graph_to_dict(graph)
    result = solve(graph, "checkpoint-all:cpu")
    save_schedule(result.schedule, tmp_path / "s.json", result.timeline.summary())
    back = load_schedule(tmp_path / "s.json", graph)
    assert back.stages == result.schedule.stages
    assert check_schedule(graph, back).total_ms == result.timeline.total_ms


def test_file_order_that_is_not_topological_is_sorted_with_a_note():
    doc = copy.deepcopy(SPEC_EXAMPLE)
    doc["nodes"].reverse()
    graph = graph_from_dict(doc)
    assert [n.id for n in graph.nodes] == ["fc1", "fc2"]
    assert any("reordered" in note for note in graph.notes)


def _broken(edit):
    doc = copy.deepcopy(SPEC_EXAMPLE)
    edit(doc)
    return doc


GRAPH_ERRORS = [
    (lambda d: d["nodes"][1].update(memory="-4 MiB"), r"node 'fc2', field 'memory'.*negative"),
    (lambda d: d["nodes"][1].update(inputs=["fc2"]), "self-loop"),
    (lambda d: d["nodes"][0].update(inputs=["fc2"]), "cycle: fc1 -> fc2 -> fc1"),
    (lambda d: d["nodes"][1].update(inputs=["nope"]), "unknown node 'nope'"),
    (lambda d: d["nodes"][0].update(cost={"tpu": 1}), r"node 'fc1', field 'cost'.*'tpu'"),
    (lambda d: d["nodes"][0].update(cost={"cpu": -1}), "negative"),
    (lambda d: d["nodes"][1].update(id="fc1"), "duplicate node id"),
    (lambda d: d["devices"].append({"name": "cpu", "memory": 1}), "duplicate device"),
    (lambda d: d["links"].append({"from": "cpu", "to": "npu", "bandwidth": 1}), "'npu'"),
    (lambda d: d["devices"][1].update(memory="lots"), "not a size"),
    (lambda d: d["edges"][0]["transfer_ms"].update({"cpu->cpu": 1}), "bad transfer key"),
    (lambda d: d.update(format="other"), "'format'"),
    (lambda d: d.update(nodes=[]), "no nodes"),
    (lambda d: d["nodes"][0].pop("memory"), "missing field 'memory'"),
    (lambda d: d["nodes"][0].update(kind="sideways"), "unknown kind"),
]
"""Edits of the spec example, each with words its error message must contain."""


@pytest.mark.parametrize(("edit", "words"), GRAPH_ERRORS)
def test_each_kind_of_error_names_the_place_and_the_fix(edit, words):
    with pytest.raises(GraphFormatError, match=words) as caught:
        graph_from_dict(_broken(edit), "bad.graph.json")
    message = str(caught.value)
    assert message.startswith("bad.graph.json: ")
    assert "\n" not in message and ";" in message


def test_json_syntax_error_names_line_and_column(tmp_path):
    path = tmp_path / "broken.graph.json"
    path.write_text('{"format": "remat-graph",\n "nodes": [,]}')
    with pytest.raises(GraphFormatError, match=r"broken.graph.json: line 2, column 12"):
        load_graph(path)


def test_schedule_with_unknown_node_is_a_schedule_error():
    graph = graph_from_dict(SPEC_EXAMPLE)
    doc = {"format": "remat-schedule", "stages": [{"ops": [{"node": "x", "device": "cpu"}]}]}
    with pytest.raises(ScheduleFormatError, match="s.json: stage 0: unknown node 'x'"):
        schedule_from_dict(doc, graph, "s.json")


def test_atomic_save_leaves_no_temporary_files_and_keeps_old_file_on_error(tmp_path):
    graph = graph_from_dict(SPEC_EXAMPLE)
    target = tmp_path / "g.graph.json"
    save_graph(graph, target)
    before = target.read_text()

    class Boom(Exception):
        pass

    import solver.formats as formats

    original = formats.json.dumps
    try:
        formats.json.dumps = lambda *a, **k: (_ for _ in ()).throw(Boom())
        with pytest.raises(Boom):
            save_graph(graph, target)
    finally:
        formats.json.dumps = original
    assert target.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["g.graph.json"]
    assert json.loads(before)["format"] == "remat-graph"

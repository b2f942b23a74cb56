"""Every reported peak against an independent replay (issue 22, "a wrong figure").

The replay (``replay_reference.py``) is written from docs/model.md §2 and docs/spec-notes.md
("Workspace memory", "Offloading") on plain documents; it never calls the simulator. The
simulator's curve once lost the memory held during a zero-cost operation (two records at one
instant, the later won): ``a`` (100 B) -> ``b`` (100 B, cost 0) -> ``c`` (1 B) reported 101 B
for a true 200 B.

Random graphs have several devices, zero-cost nodes, workspaces and links; random schedules
recompute, read from other devices, keep and offload. Both verdicts must agree, and on a valid
schedule every figure must be the replay's: ``Timeline.peaks``, the summary's ``peak_bytes``,
each operation's memory, ``check --json`` and ``solve --json`` (with the schedule it writes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_reference import replay

from solver.cli import main
from solver.document.graph_io import graph_from_dict
from solver.document.schedule_io import schedule_from_dict
from solver.execution.concurrent import concurrent_layout
from solver.execution.simulate import simulate

ZERO_COST = {
    "format": "remat-graph",
    "version": 1,
    "name": "zero-cost",
    "devices": [{"name": "cpu", "memory": 1000}],
    "nodes": [
        {"id": "a", "memory": 100, "cost": {"cpu": 1}},
        {"id": "b", "memory": 100, "cost": {"cpu": 0}, "inputs": ["a"]},
        {"id": "c", "memory": 1, "cost": {"cpu": 1}, "inputs": ["b"]},
    ],
}
"""The issue's hand-derived reproducer: while ``b`` runs, ``a`` and ``b`` are resident."""


# ----- random graphs and schedules -----------------------------------------------------------
@st.composite
def graphs(draw) -> dict:
    devices = [f"d{j}" for j in range(draw(st.integers(1, 3)))]
    nodes = []
    for k in range(draw(st.integers(2, 7))):
        able = draw(st.lists(st.sampled_from(devices), min_size=1, unique=True))
        reads = draw(st.lists(st.integers(0, k - 1), max_size=3, unique=True)) if k else []
        node = {
            "id": f"n{k}",
            "memory": draw(st.integers(0, 120)),
            "cost": {d: draw(st.sampled_from([0, 0, 0.5, 1, 3])) for d in able},
            "inputs": [f"n{i}" for i in reads],
        }
        workspace = draw(st.sampled_from([0, 0, 0, 7, 40]))
        if workspace:
            node["workspace"] = workspace
        nodes.append(node)
    links = [
        {"from": a, "to": b, "bandwidth": draw(st.sampled_from([1e3, 1e6])),
         "latency_ms": draw(st.sampled_from([0.0, 0.25]))}
        for a in devices for b in devices if a != b and draw(st.integers(0, 3))
    ]  # fmt: skip
    budgets = [draw(st.sampled_from([150, 300, 600, 10**6, 10**6])) for _ in devices]
    return {
        "format": "remat-graph",
        "version": 1,
        "name": "random",
        "devices": [{"name": d, "memory": b} for d, b in zip(devices, budgets, strict=True)],
        "links": links,
        "nodes": nodes,
    }


@st.composite
def schedules(draw, graph_doc: dict) -> dict:
    """A schedule that follows the availability rules (inputs resident or recomputed first),
    with random devices, sources, recomputations, keeps and offloading copies; memory is not
    planned, so some break a budget, and a few are damaged on purpose."""
    nodes = graph_doc["nodes"]
    devices = [d["name"] for d in graph_doc["devices"]]
    links = {(x["from"], x["to"]) for x in graph_doc["links"]}
    able = [sorted(node["cost"]) for node in nodes]
    index = {node["id"]: k for k, node in enumerate(nodes)}
    live: dict[str, set[int]] = {d: set() for d in devices}
    stages = []
    for t in range(len(nodes)):
        planned = {(t, draw(st.sampled_from(able[t])))}
        for k in draw(st.lists(st.integers(0, t), max_size=2)):  # extra recomputations
            planned.add((k, draw(st.sampled_from(able[k]))))
        todo = list(planned)
        while todo:  # recompute what no device has at the start of the stage
            k, d = todo.pop()
            for i in (index[x] for x in nodes[k]["inputs"]):
                if not any(i in live[x] for x in devices) and not any(j == i for j, _ in planned):
                    where = d if d in able[i] else draw(st.sampled_from(able[i]))
                    planned.add((i, where))
                    todo.append((i, where))
        ops, computed = [], {d: set() for d in devices}
        for k, d in sorted(planned, key=lambda o: (o[0], devices.index(o[1]))):
            sources = {}
            for i in (index[x] for x in nodes[k]["inputs"]):
                have = [x for x in devices if i in live[x] or i in computed[x]]
                if d not in have and have:  # mostly over a link; now and then without one
                    linked = [x for x in have if (x, d) in links] or have
                    sources[nodes[i]["id"]] = draw(st.sampled_from(linked))
            op = {"node": nodes[k]["id"], "device": d}
            if sources:
                op["inputs"] = sources
            ops.append(op)
            computed[d].add(k)
        keep: dict[str, list] = {}
        kept = {d: set() for d in devices}
        for d in devices:
            held = sorted(live[d] | computed[d])
            kept[d] = set(draw(st.lists(st.sampled_from(held), unique=True))) if held else set()
            keep[d] = [nodes[i]["id"] for i in sorted(kept[d])]
        for d in devices:  # offloading copies into d from a device that holds the tensor
            for i in range(t + 1):
                sources = [s for s in devices if i in live[s] | computed[s] and (s, d) in links]
                if i in live[d] | computed[d] or not sources or draw(st.integers(0, 5)):
                    continue
                keep[d].append({"id": nodes[i]["id"], "from": draw(st.sampled_from(sources))})
                kept[d].add(i)
        stages.append({"ops": ops, "keep": keep})
        live = kept
    if draw(st.integers(0, 9)) == 0:  # damage: drop an operation or a keep
        stage = stages[draw(st.integers(0, len(stages) - 1))]
        if stage["ops"]:
            stage["ops"].pop(draw(st.integers(0, len(stage["ops"]) - 1)))
    return {"format": "remat-schedule", "version": 1, "graph": "random", "stages": stages}


@st.composite
def cases(draw) -> tuple[dict, dict]:
    graph_doc = draw(graphs())
    return graph_doc, draw(schedules(graph_doc))


# ----- the properties ------------------------------------------------------------------------
def test_the_issue_reproducer_peaks_at_200_bytes(tmp_path, capsys):
    graph = graph_from_dict(ZERO_COST)
    doc = {
        "format": "remat-schedule",
        "version": 1,
        "graph": "zero-cost",
        "stages": [
            {"ops": [{"node": "a", "device": "cpu"}], "keep": {"cpu": ["a"]}},
            {"ops": [{"node": "b", "device": "cpu"}], "keep": {"cpu": ["b"]}},
            {"ops": [{"node": "c", "device": "cpu"}]},
        ],
    }
    assert replay(ZERO_COST, doc)[1] == {"cpu": 200}
    timeline = simulate(graph, schedule_from_dict(doc, graph))
    assert timeline.peaks == {"cpu": 200}
    b = timeline.ops[1]
    assert b.duration == 0 and timeline.memory["cpu"].during(b) == (200, ("a", "b"))
    assert timeline.memory["cpu"].during(timeline.ops[2]) == (101, ("b", "c"))
    layout = concurrent_layout(graph, schedule_from_dict(doc, graph), timeline)
    assert layout.timeline.peaks == {"cpu": 200}  # one device: the serial layout
    path = tmp_path / "zero.graph.json"
    path.write_text(json.dumps(ZERO_COST))
    assert main(["solve", str(path), "--no-store"]) == 0
    assert "cpu: peak 200 B of 1000 B (20%)" in capsys.readouterr().out
    # at 150 B the graph is infeasible, as the peak says
    assert main(["solve", str(path), "--no-store", "--budget", "cpu=150"]) == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_peak_of_the_simulator_is_the_independent_replay(case):
    graph_doc, schedule_doc = case
    graph = graph_from_dict(graph_doc)
    valid, peaks, total, memories = replay(graph_doc, schedule_doc)
    timeline = simulate(graph, schedule_from_dict(schedule_doc, graph))
    assert timeline.valid is valid, timeline.violation
    if not valid:
        return
    assert timeline.peaks == peaks
    assert timeline.summary()["peak_bytes"] == peaks
    assert [op.memory for op in timeline.ops] == memories
    assert timeline.total_ms == pytest.approx(total)
    for op in timeline.ops:  # the curve holds each operation's own state, zero-cost ones too
        assert timeline.memory[op.device].during(op)[0] == op.memory
    for device, curve in timeline.memory.items():
        assert int(curve.bytes.max(initial=0)) == peaks[device]
        assert (curve.times[1:] >= curve.times[:-1]).all()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["xengine", "greedy", "checkpoint-all"]))
def test_check_and_solve_report_the_independent_replay(tmp_path_factory, case, method):
    graph_doc, schedule_doc = case
    folder = Path(tmp_path_factory.mktemp("peaks"))
    graph_path, schedule_path = folder / "g.graph.json", folder / "s.schedule.json"
    graph_path.write_text(json.dumps(graph_doc))
    schedule_path.write_text(json.dumps(schedule_doc))
    valid, peaks, _, _ = replay(graph_doc, schedule_doc)
    code, out = _run(["check", str(graph_path), str(schedule_path), "--json"])
    assert code == (0 if valid else 1)
    if valid:
        assert json.loads(out)["peak_bytes"] == peaks
    written = folder / "solved.schedule.json"
    args = ["solve", str(graph_path), "--method", method, "--json", "-o", str(written)]
    code, out = _run([*args, "--no-store", "--time-limit", "10", "--no-improve"])
    if code != 0:
        return
    solved = json.loads(written.read_text())
    valid, peaks, _, _ = replay(graph_doc, solved)
    assert valid
    assert json.loads(out)["summary"]["peak_bytes"] == peaks
    assert solved["summary"]["peak_bytes"] == peaks  # the file's summary too


def _run(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()

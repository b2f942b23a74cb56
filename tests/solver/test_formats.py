"""Graph and schedule files: every field read exactly, every error named with place and fix."""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import replace

import pytest

from solver.document.atomic import atomic_write_bytes, atomic_write_text
from solver.document.examples import bundled_graphs
from solver.document.graph_io import graph_from_dict, graph_to_dict, load_graph, save_graph
from solver.document.json_io import write_json
from solver.document.schedule import SolverInfo
from solver.document.schedule_io import load_schedule, save_schedule, schedule_from_dict
from solver.document.units import parse_size
from solver.errors import FileWriteError, GraphFormatError, ScheduleFormatError
from solver.execution.simulate import check_schedule
from solver.optimize.methods import solve

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
    graph = graph_from_dict(SPEC_EXAMPLE).with_memory_limits({"cpu": 5_000_000, "gpu": 5_000_000})
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

    import solver.document.json_io as json_io

    original = json_io.json.dumps
    try:
        json_io.json.dumps = lambda *a, **k: (_ for _ in ()).throw(Boom())
        with pytest.raises(Boom):
            save_graph(graph, target)
    finally:
        json_io.json.dumps = original
    assert target.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["g.graph.json"]
    assert json.loads(before)["format"] == "remat-graph"


# ----- hostile input (issue 11): refused with one line, fast, never a traceback or a hang ------
def _json_file(tmp_path, text: str, name: str = "x.graph.json"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _load_within(seconds: float, path) -> Exception:
    """Load ``path`` in a thread; fail if it takes longer than ``seconds`` (a hang)."""
    import threading

    outcome: list[BaseException] = []

    def target():
        try:
            load_graph(path)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"loading {path} hangs"
    assert outcome, f"{path} was accepted"
    return outcome[0]


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
def test_read_json_refuses_deep_nesting(tmp_path, depth):
    doc = dict(SPEC_EXAMPLE, meta={"x": 1})
    text = json.dumps(doc).replace('{"x": 1}', "[" * depth + "]" * depth)
    with pytest.raises(GraphFormatError, match=r"x.graph.json: nested more than 64 levels deep"):
        load_graph(_json_file(tmp_path, text))


def test_read_json_accepts_nesting_up_to_the_limit(tmp_path):
    # top level (1), meta (2), then 62 arrays: 64 levels in all
    text = json.dumps(dict(SPEC_EXAMPLE, meta={"x": "@"})).replace('"@"', "[" * 62 + "]" * 62)
    assert json.dumps(load_graph(_json_file(tmp_path, text)).meta["x"]) == "[" * 62 + "]" * 62
    deeper = text.replace("[" * 62, "[" * 63).replace("]" * 62, "]" * 63)
    with pytest.raises(GraphFormatError, match="nested more than 64 levels deep"):
        load_graph(_json_file(tmp_path, deeper))


@pytest.mark.parametrize(
    ("token", "words"),
    [
        ("NaN", "line 2, column 15: NaN is not a JSON number; write a finite number"),
        ("Infinity", "line 2, column 15: Infinity is not a JSON number"),
        ("-Infinity", "line 2, column 15: -Infinity is not a JSON number"),
        ("1e400", "line 2, column 15: 1e400 is out of range; write a number below 1e308"),
        ("9" * 5000, "line 2, column 15: an integer of 5000 digits; write a smaller number"),
    ],
)
def test_read_json_refuses_numbers_json_or_floats_cannot_hold(tmp_path, token, words):
    text = '{"format": "remat-graph",\n "nodes": [1, ' + token + "]}"
    with pytest.raises(GraphFormatError, match=re.escape(f"x.graph.json: {words}")):
        load_graph(_json_file(tmp_path, text))


def test_read_json_refuses_dev_zero_fifo_and_folder_fast(tmp_path):
    fifo = tmp_path / "pipe.graph.json"
    os.mkfifo(fifo)
    for path in ("/dev/zero", fifo, tmp_path):
        error = _load_within(5.0, path)
        assert isinstance(error, GraphFormatError), repr(error)
        assert (
            str(error) == f"{path}: not a regular file (a folder, device or pipe); give a JSON file"
        )


def test_read_json_caps_the_size(tmp_path, monkeypatch):
    import solver.document.json_io as json_io

    monkeypatch.setattr(json_io, "MAX_FILE_BYTES", 1024)
    path = _json_file(tmp_path, json.dumps(dict(SPEC_EXAMPLE, meta={"pad": "x" * 2000})))
    with pytest.raises(GraphFormatError, match=r"x.graph.json: larger than 1.0 KiB; graph and"):
        load_graph(path)


@pytest.mark.parametrize(
    ("size", "words"),
    [
        (2**63, "9223372036854775808 is too large; sizes must be at most 9007199254740992 bytes"),
        (2**53 + 1, "is too large; sizes must be at most 9007199254740992 bytes"),
        ("1e99999999 B", "'1e99999999 B' is too large"),
        ("1e30", "'1e30' is too large"),
        ("1." + "0" * 80 + " B", "has too many digits"),
        (10**400, "an integer of about 401 digits is too large"),
    ],
)
def test_sizes_above_2_to_the_53_are_refused_fast(size, words):
    import time

    doc = _broken(lambda d: d["nodes"][0].update(memory=size))
    start = time.perf_counter()
    with pytest.raises(GraphFormatError, match=r"node 'fc1', field 'memory': ") as caught:
        graph_from_dict(doc)
    assert time.perf_counter() - start < 0.5
    assert words in str(caught.value)


def test_sizes_up_to_2_to_the_53_are_read_exactly():
    doc = _broken(lambda d: d["nodes"][0].update(memory=2**53 - 4_000_000))
    assert graph_from_dict(doc).nodes[0].memory == 2**53 - 4_000_000
    assert parse_size("1e-99999999 B") == 0 and parse_size("8 GiB") == 8 * 1024**3
    many = _broken(lambda d: [n.update(memory=2**52 + 1) for n in d["nodes"]])
    with pytest.raises(GraphFormatError, match=r"field 'nodes': the node sizes add up to"):
        graph_from_dict(many)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda d: d["nodes"][0]["cost"].update(cpu=10**400),
            "cost 'cpu': the number is too large",
        ),
        (
            lambda d: d["links"][0].update(latency_ms=10**400),
            "'latency_ms': the number is too large",
        ),
        (lambda d: d["links"][0].update(bandwidth=10**400), "'bandwidth': an integer of about 401"),
        (lambda d: d["nodes"][0].update(flops=float("nan")), "'flops': nan is not a finite number"),
    ],
)
def test_numbers_too_large_for_a_float_are_refused(edit, words):
    with pytest.raises(GraphFormatError, match=re.escape(words)):
        graph_from_dict(_broken(edit))


def _schedule_doc():
    return {"format": "remat-schedule", "stages": [{"ops": [{"node": "fc1", "device": "cpu"}]}]}


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda s: s["stages"][0]["ops"][0].update(inputs={"fc1": ["cpu"]}),
            "stage 0, node 'fc1', input 'fc1': ['cpu'] is not a device name; write a device name",
        ),
        (
            lambda s: s["stages"][0].update(keep={"cpu": [["fc1"]]}),
            "stage 0, keep 'cpu': ['fc1'] is not a node id; write a node id (a string)",
        ),
        (
            lambda s: s.update(solver={"objective": float("nan")}),
            "field 'solver', 'objective': nan is not a finite number; a finite number, or null",
        ),
        (
            lambda s: s.update(solver={"variables": float("inf")}),
            "field 'solver', 'variables': inf is not a finite number",
        ),
        (
            lambda s: s.update(budgets={"gpu": float("inf")}),
            "budgets, device 'gpu': inf is not a finite number of bytes",
        ),
    ],
)
def test_schedule_fields_of_the_wrong_kind_are_refused(edit, words):
    doc = _schedule_doc()
    edit(doc)
    with pytest.raises(ScheduleFormatError, match=re.escape(f"s.json: {words}")):
        schedule_from_dict(doc, graph_from_dict(SPEC_EXAMPLE), "s.json")


def test_ids_with_newlines_and_escapes_are_echoed_escaped():
    doc = _broken(lambda d: d["nodes"][1].update(inputs=["a\nb\x1b[2J\u202e"]))
    with pytest.raises(GraphFormatError) as caught:
        graph_from_dict(doc, "g.json")
    message = str(caught.value)
    assert "unknown node 'a\\nb\\x1b[2J\\u202e'" in message
    assert message.isprintable()


# ----- atomic writes -----------------------------------------------------------------------------
def test_atomic_write_goes_through_a_symlink_to_its_target(tmp_path):
    real = tmp_path / "real" / "g.graph.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "link.graph.json"
    link.symlink_to(real)
    save_graph(graph_from_dict(SPEC_EXAMPLE), link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert load_graph(real).name == "two-layer chain"
    assert sorted(p.name for p in real.parent.iterdir()) == ["g.graph.json"]


def test_atomic_write_refuses_a_read_only_file(tmp_path):
    target = tmp_path / "locked.graph.json"
    target.write_text("keep me")
    target.chmod(0o444)
    with pytest.raises(FileWriteError) as caught:
        save_graph(graph_from_dict(SPEC_EXAMPLE), target)
    assert str(caught.value) == (
        f"{target}: the file is read-only; save under another name, or make it writable first"
    )
    assert isinstance(caught.value, OSError)
    assert target.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["locked.graph.json"]


def test_atomic_write_removes_old_crash_leftovers_only(tmp_path):
    import time

    from solver.document.atomic import STALE_TEMP_SECONDS

    target = tmp_path / "g.graph.json"
    old = tmp_path / ".g.graph.json.ab_cd123.tmp"
    young = tmp_path / ".g.graph.json.zz9x8y7w.tmp"
    other = tmp_path / ".h.graph.json.ab_cd123.tmp"
    for path in (old, young, other):
        path.write_text("partial")
    past = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(old, (past, past))
    os.utime(other, (past, past))
    save_graph(graph_from_dict(SPEC_EXAMPLE), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [target.name, young.name, other.name]
    )


def test_atomic_write_syncs_the_folder_after_the_rename(tmp_path, monkeypatch):
    import stat

    synced: list[bool] = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    atomic_write_bytes(tmp_path / "a.bin", b"\x00\x01")
    assert synced == [False, True]  # the file's data, then the folder with the new name
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"


def test_atomic_write_reports_a_full_disk_and_keeps_the_old_file(tmp_path, monkeypatch):
    import errno

    target = tmp_path / "a.txt"
    atomic_write_text(target, "old")

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(FileWriteError, match="could not write: No space left on device; free"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_json_writers_never_write_nan(tmp_path):
    target = tmp_path / "x.json"
    with pytest.raises(FileWriteError, match=r"'a\[1\]' \(nan\) is not a finite number"):
        write_json({"a": [1.0, float("nan")]}, target)
    assert not target.exists() and list(tmp_path.iterdir()) == []
    graph = graph_from_dict(SPEC_EXAMPLE)
    result = solve(graph, "checkpoint-all:cpu")
    info = SolverInfo("x", objective=float("inf"), gap=float("nan"), bound=1.0)
    save_schedule(replace(result.schedule, solver=info), target)
    written = json.loads(target.read_text())["solver"]
    assert (written["objective"], written["gap"], written["bound"]) == (None, None, 1.0)
    save_schedule(result.schedule, target, {"total_ms": float("inf"), "peaks": {"cpu": 3}})
    assert json.loads(target.read_text())["summary"] == {"total_ms": None, "peaks": {"cpu": 3}}


def test_one_copys_time_without_the_table_is_the_tables_entry():
    doc = {
        "format": "remat-graph",
        "version": 1,
        "name": "three devices",
        "devices": [{"name": n, "memory": "1 GiB"} for n in ("a", "b", "c")],
        "links": [
            {"from": "a", "to": "b", "bandwidth": 3e9, "latency_ms": 0.1},
            {"from": "b", "to": "a", "bandwidth": 7e8},
            {"from": "a", "to": "c", "bandwidth": 1e9},
        ],
        "nodes": [
            {"id": "x", "memory": 12345, "cost": {"a": 1, "b": 2, "c": 3}},
            {"id": "y", "memory": 999, "cost": {"a": 1, "b": 2, "c": 3}, "inputs": ["x"]},
            {"id": "z", "memory": 7, "cost": {"a": 1, "b": 2, "c": 3}, "inputs": ["x", "y"]},
        ],
        "edges": [{"from": "x", "to": "z", "transfer_ms": {"c->a": 4.5, "a->b": 0.25}}],
    }
    lazy, built = graph_from_dict(doc), graph_from_dict(doc)
    table = built.transfer
    pairs = [(e, s, d) for e in range(len(built.edge_pairs)) for s in range(3) for d in range(3)]
    # bit for bit, inf included (no link c->b), overrides and the diagonal
    assert [lazy.edge_transfer_ms(e, s, d) for e, s, d in pairs] == [
        float(table[e, s, d]) for e, s, d in pairs
    ]
    assert "transfer" not in lazy.__dict__  # nor was the table built to answer

"""Offloading results in the result store and in sweeps (issue 12): the option is part of the
key (both directions), the key without it is the one stored before the option existed, and
``sweep --offload`` passes it through and says so in the CSV."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from handmade import offload_chain

from solver.cli import main
from solver.document.generators import unit_chain
from solver.document.graph_io import graph_to_dict
from solver.optimize.methods import solve
from solver.optimize.solve import SolveOptions
from solver.results.cached import solve_cached
from solver.results.key import result_key
from solver.results.store import ResultStore, default_store_path
from solver.status import SolveStatus

FAST = SolveOptions(time_limit_s=20)
OFFLOAD = replace(FAST, offload=True)


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite3")


def test_key_without_offload_is_the_one_stored_before_the_option_existed():
    # Digests computed with the key of commit dcad6a7 (before the option was keyed).
    chain = unit_chain(3, budget=3)
    assert result_key(chain, "xengine", FAST).digest == (
        "31d1ec1c79ca3b9cf3d94825be29609496f09130f00fab2b0029b11e0bc7abfc"
    )


def test_offload_is_in_the_key_of_the_methods_it_changes_only():
    graph = offload_chain(1.0)
    plain, offload = result_key(graph, "xengine", FAST), result_key(graph, "xengine", OFFLOAD)
    assert plain.digest != offload.digest
    assert (plain.method, offload.method) == ("xengine", "xengine+offload")
    assert result_key(graph, "overlap", OFFLOAD).method == "overlap+offload"
    # a single device has nowhere to offload to, a heuristic never offloads: same answer
    for method in ("checkmate:gpu", "checkmate", "greedy", "checkpoint-all:gpu"):
        assert result_key(graph, method, OFFLOAD) == result_key(graph, method, FAST), method


def test_offloading_result_is_stored_and_served_only_with_the_option(store):
    graph = offload_chain(1.0)  # by hand: 15 ms offloading a, 23 ms recomputing it
    first = solve_cached(graph, "xengine", OFFLOAD, store)
    assert not first.from_store
    assert first.result.status is SolveStatus.OPTIMAL and first.result.timeline.total_ms == 15.0
    assert store.lookup(graph, "xengine", FAST) is None  # never served without the option
    again = solve_cached(graph, "xengine", OFFLOAD, store)
    assert again.from_store and again.result.method == "xengine+offload"
    assert again.result.timeline.total_ms == 15.0
    assert sum(tr.offload for tr in again.result.timeline.transfers) == 2  # replayed copies
    assert again.result.schedule.stages == first.result.schedule.stages

    paper = solve_cached(graph, "xengine", FAST, store)
    assert not paper.from_store and paper.result.timeline.total_ms == 23.0
    # each request finds its own row: the offloading one is not replaced by the paper's
    assert store.lookup(graph, "xengine", FAST).result.timeline.total_ms == 23.0
    assert store.lookup(graph, "xengine", OFFLOAD).result.timeline.total_ms == 15.0
    assert sorted(row.method for row in store.rows()) == ["xengine", "xengine+offload"]


def test_paper_result_is_not_served_for_an_offloading_request(store):
    graph = offload_chain(1.0)
    store.put(graph, "xengine", FAST, solve(graph, "xengine", FAST))
    assert store.lookup(graph, "xengine", OFFLOAD) is None
    found = solve_cached(graph, "xengine", OFFLOAD, store)
    assert not found.from_store and found.result.timeline.total_ms == 15.0


def test_checkmate_ignores_the_option_and_keeps_its_name():
    result = solve(offload_chain(1.0), "checkmate:gpu", OFFLOAD)
    assert result.method == "checkmate:gpu" and result.timeline.total_ms == 23.0
    assert not any(stage.copies for stage in result.schedule.stages)


def test_solve_command_stores_offloading_results(capsys):
    assert main(["solve", "chain", "--offload", "--time-limit", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = ResultStore(default_store_path()).rows()
    assert (row.graph_name, row.method, row.status) == ("chain", "xengine+offload", "optimal")
    assert row.total_ms == pytest.approx(out["summary"]["total_ms"])


def test_offload_is_refused_without_a_method_it_applies_to(capsys):
    assert main(["solve", "chain", "--offload", "--method", "greedy"]) == 2
    assert "--offload is an option of --method xengine and overlap" in capsys.readouterr().err


def _sweep(tmp_path, *extra: str) -> list[list[str]]:
    path = tmp_path / "offload_chain.graph.json"
    path.write_text(json.dumps(graph_to_dict(offload_chain(1.0))))
    out = tmp_path / "sweep.csv"
    args = ["sweep", str(path), "--device", "gpu", "--from", "75%", "--to", "75%"]
    args += ["--steps", "1", "--method", "xengine", "--method", "checkmate", "--jobs", "1"]
    assert main([*args, "--time-limit", "20", "-o", str(out), *extra]) == 0
    rows = list(csv.reader(out.read_text().splitlines()))
    assert rows[0][-1] == "offload"
    return [[r[2], r[3], r[4], r[5], r[8], r[9]] for r in rows[1:]]


def test_sweep_offload_passes_the_option_to_xengine_and_says_so(tmp_path, capsys):
    # 75 % of the 4-byte peak: the GPU budget of 3 bytes at which the chain was derived
    assert _sweep(tmp_path, "--offload") == [
        ["3", "xengine+offload", "optimal", "15", "no", "yes"],
        ["3", "checkmate:gpu", "optimal", "23", "no", "no"],
    ]
    assert _sweep(tmp_path) == [
        ["3", "xengine", "optimal", "23", "no", "no"],
        ["3", "checkmate:gpu", "optimal", "23", "yes", "no"],  # the option changes nothing
    ]
    again = _sweep(tmp_path, "--offload")
    assert [r[1:] for r in again] == [
        ["xengine+offload", "optimal", "15", "yes", "yes"],
        ["checkmate:gpu", "optimal", "23", "yes", "no"],
    ]

"""The result store: keys, round trips, reuse by time limit, corrupt rows, bad databases."""

from __future__ import annotations

import json
import logging
import multiprocessing
import sqlite3
from dataclasses import replace

import pytest

from solver.cli import main
from solver.document.generators import cpu_gpu_devices, unit_chain
from solver.document.graph import Edge, Link
from solver.optimize.methods import solve
from solver.optimize.solve import SolveOptions
from solver.results.cached import solve_cached
from solver.results.key import graph_hash, result_key
from solver.results.store import ResultStore, default_store_path
from solver.status import SolveStatus

FAST = SolveOptions(time_limit_s=20)


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite3")


@pytest.fixture
def chain3():
    """Checkmate's unit chain, 3 layers, budget 3: optimum (2n+1) + n(n-1)/2 = 10 (by hand)."""
    return unit_chain(3, budget=3)


# ----- keys -------------------------------------------------------------------------------------
def test_graph_hash_changes_with_everything_that_changes_the_answer():
    devices, links = cpu_gpu_devices(100, 50)
    base = unit_chain(2, devices=devices)
    base = replace(base, links=tuple(links))
    variants = {
        "node cost": replace(
            base, nodes=(replace(base.nodes[0], cost={"cpu": 2.0, "gpu": 1.0}), *base.nodes[1:])
        ),
        "node size": replace(base, nodes=(replace(base.nodes[0], memory=2), *base.nodes[1:])),
        "node workspace": replace(
            base, nodes=(replace(base.nodes[0], workspace=4), *base.nodes[1:])
        ),
        "node kind": replace(base, nodes=(replace(base.nodes[0], kind="other"), *base.nodes[1:])),
        "transfer override": replace(
            base, edges=(replace(base.edges[0], transfer_ms={"cpu->gpu": 5.0}), *base.edges[1:])
        ),
        "link": replace(base, links=(Link("cpu", "gpu", 1e9, 0.01), links[1])),
        "fixed memory": replace(base, devices=(replace(devices[0], fixed_memory=1), devices[1])),
        "extra edge": replace(base, edges=(*base.edges, Edge("n0", "n2"))),
    }
    hashes = {name: graph_hash(g) for name, g in variants.items()}
    assert all(h != graph_hash(base) for h in hashes.values()), hashes
    assert len(set(hashes.values())) == len(variants)


def test_graph_hash_ignores_name_meta_and_memory_limits():
    base = unit_chain(3, budget=4)
    same = replace(base, name="renamed", meta={"source": "x"}, notes=("a note",))
    assert graph_hash(same) == graph_hash(base) == graph_hash(unit_chain(3, budget=9))


def test_result_key_covers_memory_limits_method_backend_and_gap_but_not_the_time_limit(chain3):
    key = result_key(chain3, "xengine", FAST).digest
    assert result_key(chain3, "xengine", SolveOptions(time_limit_s=999)).digest == key
    assert result_key(chain3, "xengine", SolveOptions(threads=2)).digest == key
    others = [
        result_key(unit_chain(3, budget=4), "xengine", FAST),
        result_key(chain3, "checkmate:cpu", FAST),
        result_key(chain3, "xengine", SolveOptions(backend="highs")),
        result_key(chain3, "xengine", SolveOptions(gap_rel=0.01)),
        result_key(chain3, "xengine", SolveOptions(warm_start=False)),
    ]
    assert len({key, *(k.digest for k in others)}) == 1 + len(others)
    # a heuristic ignores backend and gap: same answer whatever they are
    assert (
        result_key(chain3, "checkpoint-all", SolveOptions(backend="highs")).digest
        == result_key(chain3, "checkpoint-all", FAST).digest
    )


# ----- round trip and reuse ---------------------------------------------------------------------
def test_stored_optimum_comes_back_replayed_and_reusable_for_any_limit(store, chain3):
    result = solve(chain3, "xengine", FAST)
    assert result.status is SolveStatus.OPTIMAL and result.timeline.total_ms == 10.0
    assert store.put(chain3, "xengine", FAST, result)
    stored = store.lookup(chain3, "xengine", SolveOptions(time_limit_s=3600))
    assert stored is not None and stored.final
    assert stored.reusable_for(3600)
    again = stored.result
    assert again.status is SolveStatus.OPTIMAL
    assert again.timeline.valid and again.timeline.total_ms == 10.0
    assert again.schedule.stages == result.schedule.stages
    assert (again.objective, again.bound, again.variables) == (
        result.objective,
        result.bound,
        result.variables,
    )
    assert store.lookup(unit_chain(3, budget=4), "xengine", FAST) is None


def test_shorter_limit_result_is_shown_then_solved_again(store, chain3):
    optimal = solve(chain3, "xengine", FAST)
    short = SolveOptions(time_limit_s=5)
    store.put(chain3, "xengine", short, replace(optimal, status=SolveStatus.FEASIBLE))
    seen = []
    done = solve_cached(chain3, "xengine", FAST, store, on_stored=seen.append)
    assert not done.from_store
    assert done.stored_note == (
        "stored result (row 1) came from a 5 s time limit, shorter than the 20 s asked"
    )
    assert [s.result.status for s in seen] == [SolveStatus.FEASIBLE]
    assert done.result.status is SolveStatus.OPTIMAL
    # the optimum replaced the shorter run, and now answers any limit
    again = solve_cached(chain3, "xengine", SolveOptions(time_limit_s=600), store)
    assert again.from_store and again.result.status is SolveStatus.OPTIMAL


def test_a_better_row_is_not_replaced_by_a_worse_one(store, chain3):
    optimal = solve(chain3, "xengine", FAST)
    store.put(chain3, "xengine", FAST, optimal)
    store.put(
        chain3,
        "xengine",
        SolveOptions(time_limit_s=1),
        replace(optimal, status=SolveStatus.FEASIBLE),
    )
    (row,) = store.rows()
    assert row.status == "optimal" and row.time_limit_s == 20


def test_cancelled_and_error_results_are_not_stored(store, chain3):
    result = solve(chain3, "xengine", FAST)
    assert not store.put(chain3, "xengine", FAST, replace(result, status=SolveStatus.CANCELLED))
    assert not store.put(chain3, "xengine", FAST, replace(result, status=SolveStatus.ERROR))
    assert store.rows() == []


def test_infeasible_result_is_stored_without_a_schedule(store):
    graph = unit_chain(3, budget=2)  # Checkmate: budget 2 is infeasible
    result = solve(graph, "xengine", FAST)
    assert result.status is SolveStatus.INFEASIBLE
    store.put(graph, "xengine", FAST, result)
    stored = store.lookup(graph, "xengine", FAST)
    assert stored.result.status is SolveStatus.INFEASIBLE and stored.result.schedule is None
    assert stored.result.message == result.message


# ----- damage -----------------------------------------------------------------------------------
def test_row_whose_schedule_no_longer_replays_is_skipped_reported_and_removed(
    store, chain3, caplog
):
    store.put(chain3, "xengine", FAST, solve(chain3, "xengine", FAST))
    with sqlite3.connect(store.path) as db:
        doc = json.loads(db.execute("SELECT schedule FROM results").fetchone()[0])
        doc["stages"][0]["ops"] = []  # stage 0 computes nothing: n1 has no input
        db.execute("UPDATE results SET schedule = ?", (json.dumps(doc),))
    with caplog.at_level(logging.WARNING, logger="solver.results.store"):
        assert store.lookup(chain3, "xengine", FAST) is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert "row 1 (xengine) is corrupt: its schedule does not replay" in message
    assert store.rows() == []


def test_row_with_a_changed_time_is_refused(store, chain3, caplog):
    store.put(chain3, "xengine", FAST, solve(chain3, "xengine", FAST))
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE results SET total_ms = 3.0")
    with caplog.at_level(logging.WARNING):
        assert store.lookup(chain3, "xengine", FAST) is None
    assert "replays to 10 ms, not the stored 3 ms" in caplog.text


def test_corrupt_database_never_costs_a_solve(tmp_path, chain3, caplog):
    path = tmp_path / "results.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    store = ResultStore(path)
    with caplog.at_level(logging.WARNING):
        done = solve_cached(chain3, "xengine", FAST, store)
    assert done.result.status is SolveStatus.OPTIMAL and done.result.timeline.total_ms == 10.0
    assert "file is not a database" in store.problem
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert len(caplog.records) == 2  # the lookup and the put, one line each


def test_locked_database_is_reported_and_the_result_still_returned(tmp_path, caplog):
    path = tmp_path / "results.sqlite3"
    ResultStore(path).rows()  # create it
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store = ResultStore(path, timeout_s=0.05, retries=2)
        with caplog.at_level(logging.WARNING):
            done = solve_cached(unit_chain(3, budget=100), "checkpoint-all", FAST, store)
        assert done.result.ok and done.result.timeline.total_ms == 7.0
        assert "database is locked" in store.problem
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ResultStore(path).rows() == []


def test_store_is_in_wal_mode(store):
    graph = unit_chain(3, budget=100)
    assert store.put(graph, "checkpoint-all", FAST, solve(graph, "checkpoint-all", FAST))
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _put_many(path: str, first: int) -> int:
    store = ResultStore(path)
    graph = unit_chain(2, budget=100)
    result = solve(graph, "checkpoint-all", FAST)
    stored = 0
    for budget in range(first, first + 15):
        stored += store.put(
            graph.with_memory_limits({"cpu": budget}), "checkpoint-all", FAST, result
        )
    return stored


def test_several_processes_write_at_once_and_nothing_is_lost(store):
    context = multiprocessing.get_context("forkserver")
    with context.Pool(4) as pool:
        counts = pool.starmap(_put_many, [(str(store.path), 100 * k) for k in range(4)])
    assert counts == [15] * 4
    assert len(store.rows()) == 60


def test_store_path_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("XENGINE_STORE", str(tmp_path / "x.sqlite3"))
    assert default_store_path() == tmp_path / "x.sqlite3"
    monkeypatch.setenv("XENGINE_STORE", "off")
    assert default_store_path() is None
    monkeypatch.delenv("XENGINE_STORE")
    assert default_store_path().name == "results.sqlite3"


# ----- the results command ----------------------------------------------------------------------
def test_results_commands_list_show_export_prune(tmp_path, capsys):
    db = str(tmp_path / "r.sqlite3")
    store = ["results", "--store", db]
    assert main([*store, "list"]) == 0
    assert "0 stored solves" in capsys.readouterr().err
    graph = unit_chain(3, budget=3)
    ResultStore(db).put(graph, "xengine", FAST, solve(graph, "xengine", FAST))
    assert main([*store, "list"]) == 0
    out = capsys.readouterr().out
    assert "unit chain (3 layers" in out and "optimal" in out and "10 ms" in out
    schedule = tmp_path / "s.json"
    assert main([*store, "show", "1", "-o", str(schedule)]) == 0
    assert "status         optimal" in capsys.readouterr().out
    assert json.loads(schedule.read_text())["format"] == "remat-schedule"
    assert main([*store, "show", "7"]) == 1
    assert "no stored solve with id 7" in capsys.readouterr().err
    assert main([*store, "export", "-o", str(tmp_path / "all.json")]) == 0
    (row,) = json.loads((tmp_path / "all.json").read_text())
    assert row["total_ms"] == 10.0 and row["schedule"]["stages"]
    assert main([*store, "export", "-o", str(tmp_path / "all.csv")]) == 0
    assert (tmp_path / "all.csv").read_text().startswith("id,created,graph_name")
    assert main([*store, "prune"]) == 2
    assert "say what to delete" in capsys.readouterr().err
    assert main([*store, "prune", "--older-than", "-1"]) == 2
    assert "--older-than -1: give days >= 0" in capsys.readouterr().err
    assert main([*store, "prune", "--older-than", "1"]) == 0  # the row is minutes old: kept
    assert "deleted 0 stored solves" in capsys.readouterr().out
    assert main([*store, "prune", "--method", "xengine"]) == 0
    assert "deleted 1 stored solves" in capsys.readouterr().out


def test_solve_command_stores_its_result_and_always_solves(capsys):
    args = ["solve", "chain", "--time-limit", "20", "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    (row,) = ResultStore(default_store_path()).rows()
    assert (row.graph_name, row.method, row.status) == ("chain", "xengine", "optimal")
    assert row.total_ms == pytest.approx(first["summary"]["total_ms"])
    assert main(args) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["objective"] == first["objective"]
    assert "result store" not in captured.err  # solve is what people time: never answered
    assert main([*args, "--no-store"]) == 0
    capsys.readouterr()
    assert len(ResultStore(default_store_path()).rows()) == 1

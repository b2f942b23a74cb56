"""Sweeps on a Dask cluster (a LocalCluster in this process): same answers, stored here."""

from __future__ import annotations

import pytest

from solver.document.examples import bundled_graphs
from solver.document.formats import load_graph
from solver.optimize.solve import SolveOptions
from solver.results.store import ResultStore
from solver.sweeps.sweep import run_sweep, sweep_tasks

distributed = pytest.importorskip("distributed")

FAST = SolveOptions(time_limit_s=20)


@pytest.fixture(scope="module")
def scheduler():
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


@pytest.fixture
def tasks():
    graph = load_graph(bundled_graphs()["diamond"])
    return sweep_tasks(graph, "gpu", [1.0, 0.1], ["xengine", "checkmate"], FAST, "diamond")


def test_cluster_sweep_gives_the_local_answers_and_stores_them(scheduler, tasks, tmp_path):
    store = ResultStore(tmp_path / "results.sqlite3")
    arrivals = []
    remote = run_sweep(tasks, store=store, on_point=arrivals.append, scheduler=scheduler)
    local = run_sweep(tasks)
    assert [(p.method, p.fraction, p.total_ms) for p in remote] == [
        (p.method, p.fraction, p.total_ms) for p in local
    ]
    assert remote[0].total_ms == pytest.approx(5.0)  # the diamond's costs summed, no remat
    assert len(arrivals) == len(tasks) == len(store.rows())
    again = run_sweep(tasks, store=store, scheduler=scheduler)
    assert all(p.from_store for p in again)


def test_unreachable_scheduler_is_one_line(monkeypatch, capsys):
    from solver.cli import main
    from solver.sweeps import cluster as sweep_cluster

    monkeypatch.setattr(sweep_cluster, "CONNECT_TIMEOUT_S", 1.0)
    code = main(
        ["sweep", "diamond", "--device", "gpu", "--steps", "1", "--method", "checkpoint-all",
         "--scheduler", "tcp://127.0.0.1:9"]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--scheduler tcp://127.0.0.1:9: cannot reach the Dask scheduler" in err

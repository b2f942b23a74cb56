"""Sweeps on a Dask cluster (a LocalCluster in this process): same answers, stored here."""

from __future__ import annotations

import threading
import time

import pytest

from solver.document.examples import bundled_graphs
from solver.document.graph_io import load_graph
from solver.optimize.solve import SolveOptions
from solver.results.store import ResultStore
from solver.status import SolveStatus
from solver.sweeps.sweep import budget_steps, run_sweep, sweep_tasks

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


def test_cluster_cancel_stops_running_solves_keeps_finished_ones_and_skips_the_rest(
    scheduler, tmp_path
):
    # VGG16 at 60 % runs into its 120 s limit (CBC holds its warm start); the diamond is quick.
    # The cancel comes when the first diamond point arrives: VGG16 is then surely running.
    vgg16 = load_graph(bundled_graphs()["vgg16"])
    long = sweep_tasks(vgg16, "gpu", [0.6], ["xengine"], SolveOptions(time_limit_s=120), "vgg16")
    diamond = load_graph(bundled_graphs()["diamond"])
    fractions = budget_steps(1.0, 0.9, 20)  # each a CBC run of some 50 ms
    quick = sweep_tasks(diamond, "gpu", fractions, ["xengine"], FAST, "diamond", 1)
    store = ResultStore(tmp_path / "results.sqlite3")
    cancel = threading.Event()
    arrivals = []

    def on_point(point):
        arrivals.append(point)
        cancel.set()

    started = time.monotonic()
    points = run_sweep([*long, *quick], store=store, on_point=on_point, cancel=cancel,
                       scheduler=scheduler)  # fmt: skip
    assert time.monotonic() - started < 60  # not the 120 s limit
    (stopped,) = [p for p in points if p.graph == "vgg16"]
    assert stopped.result.status is SolveStatus.CANCELLED
    assert stopped.result.ok and stopped.result.timeline.valid  # its incumbent, replayed
    finished = [p for p in points if p.graph == "diamond"]
    done = [p for p in finished if p.result.status is SolveStatus.OPTIMAL]
    assert done and len(finished) < len(quick)  # tasks queued behind the cancel never started
    # every finished point was stored here, and nothing else (a cancelled solve is not final)
    stored = sorted(r.memory_limits["gpu"] for r in store.rows())
    assert stored == sorted(diamond.device("gpu").fixed_memory + p.activation_budget for p in done)
    assert len(arrivals) == len(points)


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

"""The executor on torch.fx imports (the bundled zoo networks) and offloading schedules: real
training steps by a schedule, checked against torch and the simulator, and the command line."""

from __future__ import annotations

import contextlib
import functools
import json

import pytest

torch = pytest.importorskip("torch")

from solver.cli import main  # noqa: E402
from solver.document.graph_io import save_graph  # noqa: E402
from solver.document.schedule_io import save_schedule  # noqa: E402
from solver.executors import fx_runtime  # noqa: E402
from solver.executors.fx_runtime import execute_fx_schedule, plan_fx  # noqa: E402
from solver.optimize.bounds import no_remat_peak  # noqa: E402
from solver.optimize.methods import solve  # noqa: E402
from solver.optimize.solve import SolveOptions  # noqa: E402

RESNET = "solver.importers.zoo_models:ResNet18"
TRANSFORMER = "solver.importers.zoo_models:TransformerBlock"
#: Zoo networks at small inputs (same layers, smaller tensors): each step well under a second.
SMALL = {RESNET: (2, 3, 64, 64), TRANSFORMER: (2, 16, 512)}


@functools.cache
def plan(spec: str, shape: tuple[int, ...] | None = None):
    return plan_fx(spec, shape or SMALL[spec])


@functools.cache
def scheduled(spec: str, method: str, gpu: float = 0.6, offload: bool = False, shape=None):
    fx = plan(spec, shape)
    graph = fx.graph
    fixed = graph.device("gpu").fixed_memory
    graph = graph.with_memory_limits({"gpu": fixed + int(gpu * no_remat_peak(graph))})
    result = solve(graph, method, SolveOptions(time_limit_s=20, offload=offload))
    assert result.schedule is not None, result.status
    return fx, graph, result


def check_report(report, result, tolerance: float = 0.15) -> None:
    """Issue 9's targets: gradients equal loss.backward(); per device, the measured peak is
    within ``tolerance`` of the simulator's and never above the budget."""
    assert report.gradients_match, report.max_abs_error
    assert report.predicted_peak == result.timeline.peaks
    for device, peak in report.measured_peak.items():
        predicted = report.predicted_peak[device]
        assert abs(peak - predicted) <= tolerance * predicted, (device, peak, predicted)
        assert peak <= report.budgets[device], (device, peak, report.budgets[device])
    assert len(report.op_ms) == len(result.schedule.operations)


def test_recomputation_on_one_device_matches_gradients_and_peak():
    """ResNet-18 at GPU 60 %, every node on the GPU: rematerialization of conv+BN+ReLU layers
    (the BN input and max-pool indices are their bundles) and residual additions."""
    fx, graph, result = scheduled(RESNET, "chen-greedy:gpu")
    assert result.timeline.recomputations > 0 and not result.timeline.transfers
    report = execute_fx_schedule(fx, graph, result.schedule, {"gpu": "cpu"})
    check_report(report, result)
    # the only bytes the graph leaves out are BN's per-channel mean and 1/std (2 x 4 B x C)
    assert report.measured_peak["gpu"] - report.predicted_peak["gpu"] <= 2 * 4 * 2 * 512
    assert report.measured_peak["cpu"] == 0


def test_copies_across_both_devices_match_gradients_and_peak():
    """Greedy on ResNet-18 moves tensors (and their bundles) between the devices and
    recomputes: both devices hold memory, copies take time."""
    fx, graph, result = scheduled(RESNET, "greedy")
    assert result.timeline.recomputations > 0 and result.timeline.transfers
    report = execute_fx_schedule(fx, graph, result.schedule, {"gpu": "cpu"})
    check_report(report, result)
    assert report.copy_ms > 0 and report.measured_peak["cpu"] > 0


def test_op_level_batch_norm_statistics_stay_with_autograd():
    """At op level a BN node's backward reads only BN's input (the graph's rule), but autograd
    also saves BN's per-channel mean and 1/std: they stay with autograd's graph and are
    counted where BN ran (the bench stopped at resnet18-op before)."""
    fx = plan(RESNET, (2, 3, 32, 32))
    assert fx.level == "layer"
    op = plan_fx(RESNET, (2, 3, 32, 32), "op")
    graph = op.graph
    result = solve(graph, "checkpoint-all:gpu")
    report = execute_fx_schedule(op, graph, result.schedule, {"gpu": "cpu"})
    assert report.gradients_match
    channels = sum(n.extra["shape"][1] for n in graph.nodes if n.op == "batch_norm")
    extra = report.measured_peak["gpu"] - report.predicted_peak["gpu"]
    assert 0 < extra <= 2 * 4 * channels


def test_transformer_with_dropout_matches_within_a_kilobyte():
    """Attention written out in ops (matmuls of transposed views, softmax, dropout): autograd's
    reshaped copies of the matmul operands are rebuilt, dropout masks are kept as bool, so
    each device's peak is the simulator's to within LayerNorm's statistics."""
    fx, graph, result = scheduled(TRANSFORMER, "greedy")
    assert result.timeline.transfers
    report = execute_fx_schedule(fx, graph, result.schedule, {"gpu": "cpu"})
    check_report(report, result)
    for device, peak in report.measured_peak.items():
        assert 0 <= peak - report.predicted_peak[device] <= 1024


def test_recomputed_dropout_without_its_generator_state_gives_other_gradients(monkeypatch):
    """The gradient check can fail: a recomputed dropout layer with a fresh mask is caught."""
    fx, graph, result = scheduled(TRANSFORMER, "chen-greedy:gpu", 0.8)
    recomputed = {e.node for e in result.timeline.ops if e.recompute}
    assert recomputed & {"mul", "ff1", "out", "ff2"}  # layers with dropout
    monkeypatch.setattr(fx_runtime, "replay_rng", lambda torch, states, gid: _fresh())
    report = execute_fx_schedule(fx, graph, result.schedule, {"gpu": "cpu"})
    # the block ends in a LayerNorm, so mean(out ** 2) barely moves: every gradient is ~1e-8,
    # and a fixed atol of 1e-5 passed this step; the tolerance follows the gradients' scale
    assert not report.gradients_match
    assert report.max_abs_error > 1e-9


@contextlib.contextmanager
def _fresh():
    yield


def test_freed_layers_release_their_memory():
    """Freeing a layer's output frees its bundle and what autograd saved: after the step the
    executor holds nothing but the last stage's keeps, and the graphs it keeps hold no tensor
    (a leaf is emptied once its layer has run)."""
    fx, graph, result = scheduled(TRANSFORMER, "greedy")
    model, x = fx_runtime.build(torch, fx, 0)
    runtime = fx_runtime.FxRuntime(
        torch, fx, {"cpu": torch.device("cpu")} | {"gpu": torch.device("cpu")}, model, x
    )
    from solver.execution.schedule_walk import order_of, walk_schedule
    from solver.execution.simulate import check_schedule

    timeline = check_schedule(graph, result.schedule)
    walk_schedule(runtime, result.schedule, timeline, *order_of(graph))
    assert all(not held for held in runtime.store.values())
    for record in runtime.records.values():
        assert all(edge.node.variable.numel() == 0 for edge in record.leaves.values())


@pytest.mark.slow
def test_offloading_schedule_executes_with_its_copies():
    """A schedule of ``solve --offload`` (an end-of-stage copy kept on the CPU) runs: gradients
    match and each device's peak is the simulator's, copies and all."""
    shape = (2, 32, 512)
    fx, graph, result = scheduled(TRANSFORMER, "xengine", 0.4, True, shape)
    assert any(tr.offload for tr in result.timeline.transfers)
    report = execute_fx_schedule(fx, graph, result.schedule, {"gpu": "cpu"})
    check_report(report, result)
    for device, peak in report.measured_peak.items():
        assert 0 <= peak - report.predicted_peak[device] <= 2048


# ----- the command line --------------------------------------------------------------------------
def write_graph(tmp_path, spec: str, method: str = "greedy"):
    _, graph, result = scheduled(spec, method)
    schedule = tmp_path / "s.schedule.json"
    save_schedule(result.schedule, schedule)
    graph_file = tmp_path / "net.graph.json"
    save_graph(graph, graph_file)
    return graph_file, schedule, result


def test_execute_command_runs_an_fx_graph_by_its_file(tmp_path, capsys):
    """The graph's meta names the model, the input and the importer: the file is enough."""
    graph_file, schedule, result = write_graph(tmp_path, TRANSFORMER)
    argv = [str(graph_file), "--schedule", str(schedule), "--device-map", "gpu=cpu", "--json"]
    assert main(["execute", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gradients_match"] is True
    assert doc["predicted"]["total_ms"] == pytest.approx(result.timeline.total_ms, abs=1e-3)
    assert doc["predicted"]["peak_bytes"] == result.timeline.peaks


def test_execute_command_with_spec_input_and_graph_predicts_with_measured_costs(tmp_path, capsys):
    """``execute module:Class --input SHAPE --graph FILE``: the graph says it is a torch.fx
    import; ``--cost measured`` predicts with node times measured here."""
    graph_file, schedule, result = write_graph(tmp_path, TRANSFORMER)
    argv = [TRANSFORMER, "--input", "2x16x512", "--graph", str(graph_file)]
    argv += ["--schedule", str(schedule), "--device-map", "gpu=cpu", "--cost", "measured"]
    assert main(["execute", *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gradients_match"] is True
    assert doc["predicted"]["peak_bytes"] == result.timeline.peaks
    # CPU milliseconds of a real step, not the modelled desktop's (about 10x: 7.6 ms against
    # 0.77 on this machine's fastest run, so 10x failed now and then; 3x still tells them apart)
    assert doc["predicted"]["total_ms"] > 3 * result.timeline.total_ms


def test_execute_command_with_spec_and_graph_of_another_shape_is_refused(tmp_path, capsys):
    graph_file, schedule, _ = write_graph(tmp_path, TRANSFORMER)
    argv = [TRANSFORMER, "--input", "2x8x512", "--graph", str(graph_file)]
    assert main(["execute", *argv, "--schedule", str(schedule), "--device-map", "gpu=cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"is not the import of {TRANSFORMER} at 2x8x512, level layer" in err


def test_execute_command_says_a_synthetic_graph_has_no_model(capsys):
    assert main(["execute", "chain", "--schedule", "missing.json"]) == 2
    assert capsys.readouterr().err == (
        "error: chain: graph 'chain' is synthetic (its meta names no model: 'source', "
        "'input_shape'), so there is nothing to run; execute a graph imported from PyTorch "
        "(vgg16, resnet18, encoder-aten, ... or import-torch -o FILE)\n"
    )


def test_bundled_fx_graph_is_the_import_the_executor_makes():
    """``execute vgg16`` imports VGG16 again at the bundled input: the bundled file is that
    import (same nodes, memory, edges), so its schedules run."""
    from solver.document.examples import bundled_graphs
    from solver.document.graph_io import load_graph
    from solver.importers.aten import structure_hash

    bundled = load_graph(bundled_graphs()["transformer"])
    meta = bundled.meta
    again = plan_fx(meta["source"], tuple(meta["input_shape"]), meta["level"])
    assert structure_hash(again.graph) == structure_hash(bundled)


def test_a_finished_runtime_is_collected():
    """Autograd's nodes hold the saved-tensor hooks; hooks bound to the runtime made a cycle
    through C++ that the collector never freed (the bench ran out of 23 GB at its second VGG)."""
    import gc
    import weakref

    fx = plan(TRANSFORMER)
    model, x = fx_runtime.build(torch, fx, 0)
    runtime = fx_runtime.FxRuntime(torch, fx, {"cpu": torch.device("cpu")}, model, x)
    for node in fx.graph.nodes:
        runtime.run_group(node.id, "cpu", {})
    assert runtime.records
    ref = weakref.ref(runtime)
    del runtime
    gc.collect()
    assert ref() is None


def test_gradient_sums_reuse_a_kept_piece_nothing_reads_again():
    """A residual block's input gets two gradients (its conv's and the shortcut's). A schedule
    that keeps every tensor to the end still never reads them again: the sum goes into one of
    them, as autograd's buffer would, instead of a tensor the graph does not count (ResNet-50 at
    GPU 60 % measured 1.012 of its prediction, above the budget, with XEngine's keeps)."""
    from dataclasses import replace

    from solver.execution.simulate import check_schedule

    fx = plan(RESNET)
    graph = fx.graph
    base = solve(graph, "checkpoint-all:cpu").schedule
    stages, done = [], set()
    for stage in base.stages:
        done |= {op.node for op in stage.ops}
        stages.append(replace(stage, keep={"cpu": frozenset(done)}))
    schedule = replace(base, stages=tuple(stages))
    timeline = check_schedule(graph, schedule)
    report = execute_fx_schedule(fx, graph, schedule, {"gpu": "cpu"})
    assert report.gradients_match
    bn = [n for n in graph.nodes if n.kind == "forward" and "batch_norm" in (n.op or "")]
    channels = sum(n.extra["shape"][1] for n in bn)
    assert 0 <= report.measured_peak["cpu"] - timeline.peaks["cpu"] <= 2 * 4 * channels

"""The torch.fx executor's GPU path, without a GPU.

As for the ATen runtime (test_aten_runtime_devices.py), the step runs under ``FakeTensorMode``
(shapes, dtypes and devices, no data): an op that mixes two torch devices raises, so a
heterogeneous schedule checks every placement the executor makes: parameters and the batch per
device, copies between devices, the loss, gradients handed across devices, recomputation,
dropout.

What differs: the fx executor's step *is* autograd, and autograd on a fake CUDA tensor aborts a
CPU-only torch build (the whole process: ``PyTorch is not linked with support for cuda devices``,
raised while autograd records an input's device stream). So the step runs with the schedule's
``gpu`` mapped to ``meta``, a second torch device that autograd accepts, and the clock treats
``meta`` as ``cuda:0`` (every GPU timing is then a CUDA synchronisation). What needs ``cuda``
itself and no autograd is checked with ``cuda:0``: the model's copy and the batch on the GPU,
the CUDA peak calls, TF32 off while the step runs, the refusal of a schedule that splits a
forward and its backward across torch devices.

Not checked here (needs a real GPU):

* CUDA's kernels: on ``meta`` every op runs its meta kernel, which saves for autograd what the
  CPU's kernel saves; a CUDA-only kernel that saves something else (cuDNN's batch norm, fused
  attention) is not seen. Batch norm cannot run on fake CUDA at all (its kernel asks the CUDA
  runtime), so these models have none.
* Values: two decisions of the executor read data: ``_mask_scale`` (is a saved tensor
  dropout's scaled mask?) and ``_derived_match`` (is it a reshaped copy of an input?). The
  fake step is given the answers of the real CPU run of the same schedule, in the order they
  were asked (and must ask exactly as often). Gradients are compared with ``loss.backward()``
  in the CPU run only; that the GPU draws the same dropout masks is checked by running the
  GPU's dropout on the CPU.
* ``torch.cuda.max_memory_allocated`` against the executor's own count, and the times.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from solver.execution.simulate import check_schedule, effective_graph  # noqa: E402
from solver.executors import fx_runtime, harness, host_rng, saved_tensors  # noqa: E402
from solver.executors.fx_runtime import (  # noqa: E402
    execute_fx_schedule,
    plan_fx,
    run_fx_schedule,
)
from solver.executors.harness import ExecutorError  # noqa: E402
from solver.importers.zoo_models import TransformerBlock  # noqa: E402
from solver.optimize.baselines import schedule_with_checkpoints  # noqa: E402


class Net(torch.nn.Module):
    """Conv + max-pool (indices in the pool's bundle), a flatten view read by the next layer,
    dropout (its mask in the bundle; once in place), a residual addition (a gradient summed
    from two consumers); no batch norm."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc1 = torch.nn.Linear(8 * 8 * 8, 64)
        self.fc2 = torch.nn.Linear(64, 64)
        self.drop = torch.nn.Dropout(0.5)
        self.fc3 = torch.nn.Linear(64, 64)
        self.drop3 = torch.nn.Dropout(0.25)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        h = torch.relu(self.fc1(x.flatten(1)))
        y = self.drop(torch.relu(self.fc2(h)))  # on ReLU's output, which autograd saves
        return self.head(torch.relu(self.drop3(self.fc3(y))) + h)  # in place


class SmallBlock(TransformerBlock):
    """The zoo's encoder block, narrow: matmuls of transposed views (autograd saves reshaped
    copies of their operands), softmax, GELU, LayerNorm, four dropouts."""

    def __init__(self) -> None:
        super().__init__(d_model=64, heads=4, d_ff=128)


STAND_IN = torch.device("meta")  # the GPU of the fake step (see the module's docstring)
CUDA = torch.device("cuda:0")
#: model -> (class, input shape, forward nodes placed on the GPU, outputs not kept: recomputed)
CASES = {
    "Net": (Net, (4, 3, 16, 16), {"fc2", "fc3", "add", "head"}, {"conv", "fc2", "fc3"}),
    "SmallBlock": (
        SmallBlock,
        (2, 8, 64),
        {"matmul", "mul", "matmul_1", "out", "ff1", "ff2"},
        {"mul", "ff1", "add"},
    ),
}
VALUED = ("mask_scale", "derived_match")  # the executor's decisions that read values


@functools.cache
def plan(model: str = "Net"):
    return plan_fx(f"{__name__}:{model}", CASES[model][1])


def schedule(model: str = "Net", backward_of_fc3: str = "gpu"):
    """The case's layers on the GPU (the loss too), the others on the CPU, each backward where
    its forward runs (unless ``backward_of_fc3`` says otherwise); the outputs not kept are
    recomputed (Net: conv on the CPU, fc2 and fc3 with their dropouts on the GPU)."""
    graph = plan(model).graph
    _, _, on_gpu, dropped = CASES[model]
    placement = []
    for node in graph.nodes:
        layer = node.of if node.kind == "backward" else node.id
        placement.append("gpu" if layer in on_gpu or node.kind == "loss" else "cpu")
    if model == "Net":
        placement[graph.index["fc3.grad"]] = backward_of_fc3
    keep = lambda i, t, recomputed: graph.nodes[i].id not in dropped  # noqa: E731
    return graph, schedule_with_checkpoints(graph, placement, keep, "by hand")


def run_real(model, graph, sched, monkeypatch):
    """Run ``sched`` with both devices on the CPU: the report, and the answers of the
    decisions that read values, in the order they were asked."""
    answers: dict[str, list] = {name: [] for name in VALUED}
    with monkeypatch.context() as patch:
        for name in VALUED:
            patch.setattr(
                saved_tensors, name, _recording(getattr(saved_tensors, name), answers[name])
            )
        report = execute_fx_schedule(plan(model), graph, sched, {"gpu": "cpu"})
    return report, answers


def _recording(function, answers: list):
    def recorded(*args):
        answers.append(function(*args))
        return answers[-1]

    return recorded


def run_fake(model, graph, sched, monkeypatch, fake_cuda, answers):
    """Run ``sched`` on fake tensors, ``gpu`` on the stand-in device, the decisions that read
    values answered as in the real run. Returns the runtime, the per-operation rows, the
    gradients, the torch devices of every tensor held per schedule device, per operation the
    CUDA synchronisations made while it ran, and the dropouts whose mask the CPU drew."""
    timeline = check_schedule(effective_graph(graph, sched), sched)
    mapping = {"gpu": STAND_IN, "cpu": torch.device("cpu")}
    seen: dict[str, set[str]] = {name: set() for name in mapping}
    measure = fx_runtime.FxRuntime.measure

    def checked(self, device, extra=()):
        tensors = [t for held in self.store[device].values() for t in held.values()]
        tensors += [t for held in self.copies.values() for t in held.values()]
        tensors += [t for where, kept in self.held.values() if where == device for t in kept]
        seen[device] |= {str(t.device) for t in [*tensors, *extra] if t is not None}
        measure(self, device, extra)

    syncs: list[tuple[str, str, int]] = []
    run_group = fx_runtime.FxRuntime.run_group

    def counted(self, gid, device, sources):
        before = len(fake_cuda)
        ms = run_group(self, gid, device, sources)
        syncs.append((gid, device, fake_cuda[before:].count(("sync", str(CUDA)))))
        return ms

    real_clock = harness.clock

    def clock(torch, target):
        return real_clock(torch, CUDA if target == STAND_IN else target)

    drops: list[tuple[str, float, bool]] = []
    host_dropout = host_rng.host_dropout

    def recorded(torch, tensor, p, training, inplace):
        drops.append((str(tensor.device), p, inplace))
        return host_dropout(torch, tensor, p, training, inplace)

    monkeypatch.setattr(host_rng, "host_dropout", recorded)
    monkeypatch.setattr(fx_runtime.FxRuntime, "measure", checked)
    monkeypatch.setattr(fx_runtime.FxRuntime, "run_group", counted)
    monkeypatch.setattr(fx_runtime, "clock", clock)
    monkeypatch.setattr(harness, "clock", clock)
    replays = {name: iter(answers[name]) for name in VALUED}
    for name, replay in replays.items():
        monkeypatch.setattr(saved_tensors, name, lambda *args, replay=replay: next(replay))
    fx = plan(model)
    with FakeTensorMode():
        module, x = fx_runtime.build(torch, fx, 0)
        runtime, op_ms = run_fx_schedule(
            torch, fx, sched, timeline, effective_graph(graph, sched), mapping, module, x
        )
        grads = runtime.gradients()
    assert all(next(replay, None) is None for replay in replays.values())  # all asked
    return runtime, op_ms, grads, seen, syncs, drops


def check_heterogeneous(model, monkeypatch, fake_cuda):
    """What every heterogeneous fake step must show (see the tests); its syncs and drops."""
    graph, sched = schedule(model)
    timeline = check_schedule(effective_graph(graph, sched), sched)
    assert {op.device for _, op in sched.operations} == {"cpu", "gpu"}
    moves = {(t.source, t.target) for t in timeline.transfers}
    assert moves == {("cpu", "gpu"), ("gpu", "cpu")}
    assert {e.device for e in timeline.ops if e.recompute} == {"cpu", "gpu"}
    real, answers = run_real(model, graph, sched, monkeypatch)
    assert real.gradients_match
    assert real.measured_peak["gpu"] > 0 and real.measured_peak["cpu"] > 0
    runtime, op_ms, grads, seen, syncs, drops = run_fake(
        model, graph, sched, monkeypatch, fake_cuda, answers
    )
    assert seen == {"gpu": {"meta"}, "cpu": {"cpu"}}
    rows = [(op.node, op.device) for _, op in sched.operations]
    assert [(row[1], row[2]) for row in op_ms] == rows
    # every GPU operation and every copy from or to the GPU is timed by the synchronised
    # clock (start and end; a forward per fx node it runs); nothing else synchronises
    parts = plan(model).parts
    timed = {op.node: len(parts[op.node]) if op.node in parts else 1 for _, op in sched.operations}
    assert syncs == [
        (op.node, op.device, 2 * len(op.inputs) + (op.device == "gpu") * 2 * timed[op.node])
        for _, op in sched.operations
    ]
    # gradients come back to the CPU, one per parameter, shaped like it, none left out
    params = dict(CASES[model][0]().named_parameters())
    assert {k: (v.device.type, tuple(v.shape)) for k, v in grads.items()} == {
        k: ("cpu", tuple(p.shape)) for k, p in params.items()
    }
    assert set(runtime.param_grads) == set(params)
    # the bytes held per device are the ones the CPU-only run of the same schedule holds
    assert runtime.peak == real.measured_peak
    return sched, syncs, drops


def test_heterogeneous_schedule_places_every_tensor_on_its_mapped_device(fake_cuda, monkeypatch):
    """A small conv net, split over both devices: tensors held per device on its torch
    device, the GPU's work timed by CUDA's clock, dropout's mask drawn on the CPU."""
    sched, syncs, drops = check_heterogeneous("Net", monkeypatch, fake_cuda)
    assert ("fc2.grad", "gpu", 4) in syncs  # fc1's output copied in for the backward
    assert ("fc1.grad", "cpu", 4) in syncs  # two gradients copied out of the GPU
    assert ("fc1", "cpu", 0) in syncs
    # dropout on the GPU: the mask drawn on the CPU, as the reference draws it (the GPU's
    # generator draws others), at each computation of fc2 (not in place) and fc3 (in place)
    runs = [op.node for _, op in sched.operations if op.node in ("fc2", "fc3")]
    assert runs.count("fc2") >= 2 and runs.count("fc3") >= 2  # recomputed
    assert drops == [("meta", 0.5, False) if g == "fc2" else ("meta", 0.25, True) for g in runs]


def test_heterogeneous_transformer_block(fake_cuda, monkeypatch):
    """The zoo's encoder block (narrow), attention on the GPU, projections and the residual
    LayerNorms on the CPU: reshaped copies of the matmuls' operands are rebuilt on the
    backward's device, the GPU's four dropouts draw on the CPU at every computation."""
    sched, syncs, drops = check_heterogeneous("SmallBlock", monkeypatch, fake_cuda)
    # dropout in mul (on softmax's output, which autograd saves), out and ff2 (on the view
    # that a 3-d linear returns), and in place in ff1 (on GELU's output)
    runs = [op.node for _, op in sched.operations if op.node in ("mul", "out", "ff1", "ff2")]
    assert runs.count("mul") >= 2 and runs.count("ff1") >= 2  # recomputed
    assert drops == [("meta", 0.1, g == "ff1") for g in runs]


def test_the_gpu_gets_its_own_copy_of_the_model_and_the_batch_as_fixed_memory(
    fake_cuda, monkeypatch
):
    """With ``cuda:0`` itself (no autograd: the walk is left out): parameters, buffers and the
    batch are made on the GPU, named as on the CPU, and are fixed memory (never counted in a
    peak); the CUDA peak statistics are reset once before the step and read per device; the
    step runs without TF32."""
    graph, sched = schedule()
    sized = effective_graph(graph, sched)
    timeline = check_schedule(sized, sched)
    backends = torch.backends
    tf32 = backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32
    during = []

    def walk(*args):
        during.append((backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32))
        return []

    monkeypatch.setattr(harness, "walk_schedule", walk)
    mapping = {"gpu": CUDA, "cpu": torch.device("cpu")}
    with FakeTensorMode():
        model, x = fx_runtime.build(torch, plan(), 0)
        runtime, op_ms = run_fx_schedule(torch, plan(), sched, timeline, sized, mapping, model, x)
    assert fake_cuda == [("reset", "cuda:0")]
    # full float32 while the step runs (TF32 convolutions miss the reference by ~1e-3)
    assert during == [(False, False)]
    assert (backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32) == tf32
    assert runtime.cuda_peaks() == {"gpu": 12345}
    assert set(runtime.modules) == {"cpu", "cuda:0"}
    on_cpu = dict(runtime.modules["cpu"].named_parameters())
    on_gpu = dict(runtime.modules["cuda:0"].named_parameters())
    assert on_cpu.keys() == on_gpu.keys() == dict(Net().named_parameters()).keys()
    for name, p in on_gpu.items():
        assert (p.device, p.shape, p.requires_grad) == (CUDA, on_cpu[name].shape, True), name
        assert runtime.param_names[id(p)] == name
    assert {str(t.device) for t in runtime.inputs.values()} == {"cpu", "cuda:0"}
    held = [*on_cpu.values(), *on_gpu.values(), *runtime.inputs.values()]
    assert {harness.storage_id(t) for t in held} <= runtime.fixed


def test_a_backward_split_from_its_forward_across_torch_devices_is_refused_in_one_line(fake_cuda):
    """fc3 runs (and is recomputed) on the GPU, its backward on the CPU: autograd's graph of
    fc3 holds the GPU's weights. Refused before anything runs; with ``gpu=cpu`` it runs."""
    graph, sched = schedule(backward_of_fc3="cpu")
    with pytest.raises(ExecutorError) as error:
        execute_fx_schedule(plan(), graph, sched, {"gpu": "cuda:0", "cpu": "cpu"})
    assert str(error.value) == (
        "fc3.grad runs on cpu (cpu), but fc3 was last computed on gpu (cuda:0): the torch.fx "
        "executor runs a backward through autograd's graph on the torch device that built it; "
        "schedule the backward where its forward last ran, map both schedule devices to one "
        "torch device (--device-map gpu=cpu), or import with import-torch (ATen)"
    )
    assert fake_cuda == []  # refused before the model was placed or the clock ran
    report = execute_fx_schedule(plan(), graph, sched, {"gpu": "cpu"})
    assert report.gradients_match
    assert len(report.op_ms) == len(sched.operations)


def test_dropout_off_the_cpu_draws_the_cpu_kernels_mask():
    """The GPU path's dropout (mask drawn on the CPU, applied on the device; run here on the
    CPU) gives the CPU kernel's output and gradient bit for bit, in place or not, for any
    layout, and leaves the generator where the kernel leaves it."""
    dropout = torch.nn.functional.dropout
    for x in (torch.randn(3, 7), torch.randn(2, 4, 5, 5).to(memory_format=torch.channels_last)):
        for p in (0.0, 0.3, 1.0):
            for inplace in (False, True):
                a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
                torch.manual_seed(3)
                ya, after_a = dropout(a * 1, p, True, inplace), torch.rand(4)
                torch.manual_seed(3)
                yb = host_rng.host_dropout(torch, b * 1, p, True, inplace)
                assert torch.equal(ya, yb) and torch.equal(after_a, torch.rand(4))
                (ga,) = torch.autograd.grad((ya * x).sum(), a)
                (gb,) = torch.autograd.grad((yb * x).sum(), b)
                assert torch.equal(ga, gb)


def test_a_step_whose_dropouts_all_draw_on_the_host_matches_torch(monkeypatch):
    """The whole step with every dropout taking the GPU's path (both devices on the CPU):
    recomputed masks replay, in place or not, and the gradients still equal
    ``loss.backward()``; each device holds what the CPU kernel's step holds."""
    graph, sched = schedule()
    kernel = execute_fx_schedule(plan(), graph, sched, {"gpu": "cpu"})
    monkeypatch.setattr(fx_runtime, "dropout", host_rng.host_dropout)
    host = execute_fx_schedule(plan(), graph, sched, {"gpu": "cpu"})
    assert host.gradients_match and kernel.gradients_match
    assert host.measured_peak == kernel.measured_peak


class KeywordDropout(torch.nn.Module):
    """``F.dropout(x, p=..., training=...)``: one positional argument, as a ReLU has."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.out = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.out(torch.nn.functional.dropout(self.fc(x), p=0.1, training=self.training))


def test_functional_dropout_with_keyword_arguments_runs():
    """It ran in place with the arguments of an ``nn.Dropout`` module it does not have
    (``AttributeError: 'function' object has no attribute 'split'``, a traceback)."""
    from solver.optimize.methods import solve

    fx = plan_fx(f"{__name__}:KeywordDropout", (4, 16))
    assert fx.parts["fc"] == ("fc", "dropout")
    result = solve(fx.graph, "checkpoint-all:gpu")
    report = execute_fx_schedule(fx, fx.graph, result.schedule, {"gpu": "cpu"})
    assert report.gradients_match
    assert report.measured_peak == report.predicted_peak

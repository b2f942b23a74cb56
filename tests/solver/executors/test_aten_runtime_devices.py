"""The executor's GPU path, without a GPU: under ``FakeTensorMode`` a device mapped to ``cuda:0``
gets fake CUDA tensors (shapes, dtypes and devices, no data), and any op that mixes devices
raises. So a heterogeneous schedule run this way checks every placement the executor makes for
a real GPU: inputs and parameters per device, copies between devices, factory ops that the
capture recorded with ``device=cpu``, the CUDA clock and peak calls, and the refusal of
CPU-only kernels on a GPU. The joint graph runs without autograd, so fake ``cuda:0`` itself
works here (the torch.fx executor's test needs ``meta`` as its stand-in).

What a gradient check on a real GPU needs, checked here too: dropout's masks drawn on the CPU
from the CPU's generator (the reference's masks: on fake CUDA every draw must be a CPU op, the
same draws in the same order as in the CPU run of the schedule; their values, by running the
GPU's draw path with both devices on the CPU), TF32 off while the step runs, and copies from
or to the GPU timed by its synchronised clock.

Not checked (needs a real GPU): CUDA's own kernels and their values (fake CUDA cannot even run
batch norm: its kernel asks the CUDA runtime, so these models have none), what TF32 would
change, ``max_memory_allocated`` against the executor's count, and the times."""

from __future__ import annotations

import contextlib
import functools

import pytest

torch = pytest.importorskip("torch")

from test_aten_runtime import random_recomputable  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from solver.execution.simulate import check_schedule, effective_graph  # noqa: E402
from solver.executors import aten_runtime, harness, host_rng  # noqa: E402
from solver.executors.aten_runtime import execute_schedule, run_schedule  # noqa: E402
from solver.executors.harness import ExecutorError  # noqa: E402
from solver.importers.aten import capture_model, graph_from_plan  # noqa: E402
from solver.importers.aten_groups import plan_groups  # noqa: E402
from solver.importers.hardware import make_platform  # noqa: E402
from solver.importers.zoo_composite import COMPOSITE  # noqa: E402
from solver.optimize.baselines import schedule_with_checkpoints  # noqa: E402
from solver.optimize.bounds import no_remat_peak  # noqa: E402
from solver.optimize.methods import solve  # noqa: E402
from solver.optimize.solve import SolveOptions  # noqa: E402

SMALL = {"attention": (2, 32, 256), "lstm": (2, 8, 32), "encoder": (2, 16, 64)}


@functools.cache
def scheduled(name: str, method: str, gpu: float):
    plan = plan_groups(capture_model(COMPOSITE[name][0], SMALL[name], name=name), "layer")
    graph = random_recomputable(graph_from_plan(plan, make_platform()))
    fixed = graph.device("gpu").fixed_memory
    graph = graph.with_memory_limits({"gpu": fixed + int(gpu * no_remat_peak(graph))})
    result = solve(graph, method, SolveOptions(time_limit_s=20))
    assert result.schedule is not None, result.status
    return plan, graph, result


class FakeModel:
    """The parameters and buffers of a real model as fake tensors (what the runtime reads)."""

    def __init__(self, mode, model):
        self.params = {k: mode.from_tensor(v) for k, v in model.named_parameters()}
        self.buffers = {k: mode.from_tensor(v) for k, v in model.named_buffers()}

    def named_parameters(self):
        return self.params.items()

    def named_buffers(self):
        return self.buffers.items()


def run_fake(plan, graph, schedule, device_map, monkeypatch, draws=None):
    """Run ``schedule`` on fake tensors; every tensor the executor holds is checked to be on
    the torch device its schedule device maps to. Returns the runtime and the devices seen.
    ``draws`` (a :class:`Draws`) records the step's random ops."""
    timeline = check_schedule(effective_graph(graph, schedule), schedule)
    mapping = harness.map_devices(torch, [d.name for d in graph.devices], device_map)
    aten_runtime.check_kernels(plan, schedule, mapping)
    seen: dict[str, set[str]] = {name: set() for name in mapping}
    measure = aten_runtime.AtenRuntime.measure

    def checked(self, device, env=None):
        env = env or {}
        tensors = [t for held in self.store[device].values() for t in held.values()]
        tensors += [v for k, v in env.items() if k not in self.plan.grads]
        tensors += list(self.copies.values())
        for value in tensors:
            for t in value if isinstance(value, list | tuple) else (value,):
                if isinstance(t, torch.Tensor):
                    seen[device].add(str(t.device))
        measure(self, device, env)

    monkeypatch.setattr(aten_runtime.AtenRuntime, "measure", checked)
    model, xs = aten_runtime.build(torch, plan, 0)
    mode = FakeTensorMode()
    with mode:
        fake = FakeModel(mode, model)
        with draws or contextlib.nullcontext():
            runtime, op_ms = run_schedule(
                torch, plan, schedule, timeline, mapping, fake, [mode.from_tensor(x) for x in xs]
            )
        grads = runtime.gradients()
    return runtime, op_ms, grads, seen


def test_heterogeneous_schedule_places_every_tensor_on_its_mapped_device(fake_cuda, monkeypatch):
    plan, graph, result = scheduled("attention", "greedy", 0.6)
    assert {op.device for _, op in result.schedule.operations} == {"cpu", "gpu"}
    assert result.timeline.transfers  # tensors move both ways
    runtime, op_ms, grads, seen = run_fake(
        plan, graph, result.schedule, {"gpu": "cuda:0", "cpu": "cpu"}, monkeypatch
    )
    assert seen == {"gpu": {"cuda:0"}, "cpu": {"cpu"}}
    assert len(op_ms) == len(result.schedule.operations)
    # the GPU's operations and copies into it are timed by CUDA-synchronised wall clock
    gpu_ops = sum(op.device == "gpu" for _, op in result.schedule.operations)
    assert fake_cuda.count(("sync", "cuda:0")) >= 2 * gpu_ops
    assert fake_cuda.count(("reset", "cuda:0")) == 1
    assert runtime.cuda_peaks() == {"gpu": 12345}
    # the bytes held per device are the ones a CPU-only run of the same schedule holds
    real = execute_schedule(plan, graph, result.schedule, {"gpu": "cpu"})
    assert runtime.peak == real.measured_peak
    # gradients come back to the CPU, one per parameter, shaped like it
    params = dict(plan.capture.factory().named_parameters())
    assert {k: (v.device.type, tuple(v.shape)) for k, v in grads.items()} == {
        k: ("cpu", tuple(p.shape)) for k, p in params.items()
    }


class StateNet(torch.nn.Module):
    """Allocates a state in ``forward`` (``torch.zeros(..., device=x.device)``), as recurrent
    models do: the capture records ``aten.zeros(..., device=cpu)``."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(16, 32)
        self.outer = torch.nn.Linear(32, 8)

    def forward(self, x):
        state = torch.zeros(x.shape[0], 32, device=x.device)
        return self.outer(torch.relu(self.inner(x) + state))


def test_factory_ops_follow_their_node_to_the_gpu(fake_cuda, monkeypatch):
    """On the GPU a captured ``device=cpu`` factory op must allocate there, or the next op
    mixes devices (a fake CUDA tensor and a CPU one raise, as on a real GPU)."""
    plan = plan_groups(capture_model(StateNet, (4, 16), name="state"), "op")
    nodes = plan.capture.gm.graph.nodes
    assert any(str(n.kwargs.get("device")) == "cpu" for n in nodes if n.op == "call_function")
    graph = graph_from_plan(plan, make_platform())
    result = solve(graph, "checkpoint-all:gpu", SolveOptions(time_limit_s=20))
    _, _, _, seen = run_fake(plan, graph, result.schedule, {"gpu": "cuda:0"}, monkeypatch)
    assert seen["gpu"] == {"cuda:0"}
    monkeypatch.setattr(aten_runtime.AtenRuntime, "_placed", lambda self, kwargs, device: kwargs)
    with pytest.raises(RuntimeError, match="same device"):  # without the fix
        run_fake(plan, graph, result.schedule, {"gpu": "cuda:0"}, monkeypatch)


def test_cpu_only_kernel_on_a_gpu_is_refused_in_one_line(fake_cuda):
    plan, graph, result = scheduled("lstm", "chen-greedy:gpu", 1.0)
    with pytest.raises(ExecutorError) as error:
        execute_schedule(plan, graph, result.schedule, {"gpu": "cuda:0"})
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("node 'lstm' runs on gpu (cuda:0), but its op ")
    assert "aten.mkldnn_rnn_layer.default is a CPU-only kernel" in message
    assert message.endswith("map that device to the CPU (--device-map gpu=cpu) or schedule the "
                            "node on the CPU")  # fmt: skip


def test_cuda_mapping_is_checked_and_defaults_to_the_first_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    mapping = harness.map_devices(torch, ["cpu", "gpu"], {})
    assert {k: str(v) for k, v in mapping.items()} == {"cpu": "cpu", "gpu": "cuda:0"}
    mapping = harness.map_devices(torch, ["cpu", "gpu"], {"gpu": "cuda:1", "cpu": "cpu"})
    assert str(mapping["gpu"]) == "cuda:1"
    with pytest.raises(ExecutorError, match="names 'tpu', which is not a device of the graph"):
        harness.map_devices(torch, ["cpu", "gpu"], {"tpu": "cuda:0"})
    with pytest.raises(ExecutorError, match="--device-map gpu=warp9: not a torch device"):
        harness.map_devices(torch, ["cpu", "gpu"], {"gpu": "warp9"})


class Draws(TorchDispatchMode):
    """Every random ATen op the step dispatches (on top of ``FakeTensorMode``, or on real
    tensors): what it is (op, devices of its tensors, their shapes, strides and dtypes, its other
    arguments) and, on real tensors, a copy of what it drew; and every ``copy_`` (devices from
    and to)."""

    def __init__(self) -> None:
        super().__init__()
        self.draws: list[tuple] = []
        self.values: list = []
        self.copies: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is torch.ops.aten.copy_.default:
            self.copies.append((str(args[1].device), str(args[0].device)))
        if host_rng.is_random(torch, func):
            given = [*args, *kwargs.values()]
            tensors = [a for a in given if isinstance(a, torch.Tensor)]
            self.draws.append(
                (
                    str(func),
                    {str(t.device) for t in tensors},
                    [(tuple(t.shape), t.stride(), t.dtype) for t in tensors],
                    [a for a in given if not isinstance(a, torch.Tensor)],
                )
            )
            if not isinstance(out, torch._subclasses.fake_tensor.FakeTensor):
                self.values.append(out.clone())
        return out

    def what(self) -> list[tuple]:
        """The draws without their devices."""
        return [(op, layouts, rest) for op, _, layouts, rest in self.draws]


def draws_of(plan) -> dict[str, int]:
    """Node id -> how many random ops it runs (dropout's ``bernoulli_``), for nodes with any."""
    nodes = {n.name: n for n in plan.capture.gm.graph.nodes}
    counts = {
        g.id: sum(host_rng.is_random(torch, nodes[o].target) for o in g.ops) for g in plan.groups
    }
    return {gid: n for gid, n in counts.items() if n}


@functools.cache
def with_dropout(name: str):
    """A heterogeneous schedule with dropouts on the GPU, some of them recomputed there:
    attention at 60 % (greedy; its three dropouts on the GPU), or the encoder
    (``nn.TransformerEncoder``, four layers of three dropout nodes) with layers 1 and 3, their
    backward nodes too, on the GPU by hand, two of their dropout nodes and one of layer 0
    recomputed."""
    if name == "attention":
        plan, graph, result = scheduled(name, "greedy", 0.6)
        return plan, graph, result.schedule
    plan = plan_groups(capture_model(COMPOSITE[name][0], SMALL[name], name=name), "layer")
    graph = random_recomputable(graph_from_plan(plan, make_platform()))
    placement = [
        "gpu" if n.id.startswith(("enc.layers.1.", "enc.layers.3.")) else "cpu" for n in graph.nodes
    ]
    dropped = {"enc.layers.0.self_attn", "enc.layers.1.self_attn", "enc.layers.3.linear1"}
    keep = lambda i, t, recomputed: graph.nodes[i].id not in dropped  # noqa: E731
    return plan, graph, schedule_with_checkpoints(graph, placement, keep, "by hand")


def run_real(plan, graph, schedule, host_on=None):
    """The step of ``schedule`` with both devices on the CPU (no reference run): its gradients
    and its draws. ``host_on`` names a schedule device whose random ops take the GPU's path
    (:func:`host_rng.host_draw`, drawn on the CPU and copied to the device) although it is
    the CPU; returns how many did."""
    timeline = check_schedule(effective_graph(graph, schedule), schedule)
    mapping = harness.map_devices(torch, [d.name for d in graph.devices], {"gpu": "cpu"})
    model, xs = aten_runtime.build(torch, plan, 0)
    hosted = []
    call = aten_runtime.AtenRuntime._call

    def as_on_a_gpu(self, node, args, kwargs, device):
        if device == host_on and host_rng.is_random(torch, node.target):
            hosted.append(node.name)
            return host_rng.host_draw(torch, node.target, args, kwargs, self.mapping[device])
        return call(self, node, args, kwargs, device)

    draws = Draws()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(aten_runtime.AtenRuntime, "_call", as_on_a_gpu)
        with draws:
            runtime, _ = run_schedule(torch, plan, schedule, timeline, mapping, model, xs)
    return runtime.gradients(), draws, hosted


@pytest.mark.parametrize("name", ["attention", "encoder"])
def test_dropout_on_the_gpu_draws_the_cpu_runs_masks_on_the_cpu(name, fake_cuda, monkeypatch):
    """On fake CUDA every random op of the step runs on the CPU, and they are the CPU run's
    draws in the CPU run's order (the same shapes, strides and probabilities from the same
    generator: the same masks); each GPU draw is written to the GPU. The GPU's kernel would
    draw from the GPU's generator: other masks than the reference ``loss.backward()`` on the
    CPU, and the gradient check fails on a real GPU."""
    plan, graph, schedule = with_dropout(name)
    draws = draws_of(plan)
    ops = [(op.node, op.device) for _, op in schedule.operations if op.node in draws]
    on_gpu = [node for node, device in ops if device == "gpu"]
    if name == "attention":
        assert on_gpu == [node for node, _ in ops] == [f"blocks.{j}.attn" for j in (0, 1, 2, 1, 0)]
    else:
        assert len(on_gpu) == 13 and len(ops) == 23  # 2 dropouts in self_attn, 1 in linear*
    assert len(set(on_gpu)) < len(on_gpu)  # recomputed on the GPU
    fake = Draws()
    run_fake(plan, graph, schedule, {"gpu": "cuda:0", "cpu": "cpu"}, monkeypatch, fake)
    assert [devices for _, devices, _, _ in fake.draws] == [{"cpu"}] * sum(draws[n] for n, _ in ops)
    # each GPU mask written to the GPU; nothing copied to the CPU for it (bernoulli_ only writes)
    assert fake.copies == [("cpu", "cuda:0")] * sum(draws[node] for node in on_gpu)
    _, real, _ = run_real(plan, graph, schedule)
    assert fake.what() == real.what()
    assert {op for op, _, _ in real.what()} == {"aten.bernoulli_.float"}


@pytest.mark.parametrize("name", ["attention", "encoder"])
def test_the_gpus_draw_path_gives_the_cpu_runs_masks_and_gradients_bit_for_bit(name):
    """The same schedules with real values: the GPU's random ops take the GPU's path (drawn
    on the CPU, written back to the device's tensor) while both devices are the CPU. Every
    mask, recomputed ones included, and every gradient equal the plain CPU run's bit for bit,
    which matches ``loss.backward()``."""
    plan, graph, schedule = with_dropout(name)
    draws = draws_of(plan)
    on_gpu = sum(draws.get(op.node, 0) for _, op in schedule.operations if op.device == "gpu")
    every = sum(draws.get(op.node, 0) for _, op in schedule.operations)
    plain, kernel, none = run_real(plan, graph, schedule)
    grads, host, hosted = run_real(plan, graph, schedule, host_on="gpu")
    assert none == [] and len(hosted) == on_gpu >= 5
    assert len(host.values) == len(kernel.values) == every
    assert host.what() == kernel.what()
    assert all(torch.equal(a, b) for a, b in zip(host.values, kernel.values, strict=True))
    assert {float(v.mean()) for v in host.values} != {0.0}  # masks, not zeros
    assert plain.keys() == grads.keys()
    assert all(torch.equal(plain[k], grads[k]) for k in plain)
    with harness.one_thread(torch, {"cpu": torch.device("cpu")}):  # the step's kernels
        reference = aten_runtime.reference_gradients(plan)
    assert harness.compare_gradients(torch, grads, reference) == (True, 0.0)


@pytest.mark.parametrize(
    "op, args, kwargs",
    [
        # zeros, not torch.empty: the test compares the arguments after the draw, and
        # uninitialised memory may hold a NaN, which equals nothing (a flaky failure)
        (torch.ops.aten.bernoulli_.float, (torch.zeros(4, 6),), {"p": 0.9}),
        (torch.ops.aten.bernoulli_.float, (torch.zeros(6, 4).t(),), {"p": 0.3}),
        (torch.ops.aten.native_dropout.default, (torch.ones(3, 5), 0.5, True), {}),
        (torch.ops.aten.rand_like.default, (torch.zeros(2, 3, 4).transpose(0, 2),), {}),
        (torch.ops.aten.randperm.default, (9,), {"device": torch.device("cpu")}),
        (torch.ops.aten.rrelu_with_noise.default, (torch.randn(8), torch.zeros(8)), {}),
    ],
)
def test_a_draw_off_the_cpu_is_the_cpu_kernels_draw(op, args, kwargs):
    """:func:`host_rng.host_draw` against the op itself, from the same generator state: the
    same values and layout, the generator left where the op leaves it, an argument the op
    writes written (and returned where the op returns it)."""
    assert host_rng.is_random(torch, op)
    assert not host_rng.is_random(torch, torch.ops.aten.empty_like.default)
    mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    torch.manual_seed(5)
    expected, after = op(*args, **kwargs), torch.rand(3)
    torch.manual_seed(5)
    got = host_rng.host_draw(torch, op, mine, kwargs, torch.device("cpu"))
    assert torch.equal(after, torch.rand(3))
    pairs = zip(expected, got, strict=True) if isinstance(expected, tuple) else [(expected, got)]
    for e, g in pairs:
        assert torch.equal(e, g) and e.stride() == g.stride()
    for given, ours in zip(args, mine, strict=True):  # written arguments, as the op wrote them
        if isinstance(given, torch.Tensor):
            assert torch.equal(given, ours)
    if op is torch.ops.aten.bernoulli_.float:
        assert got is mine[0]  # in place: the device's own tensor, not the CPU copy


def test_the_gpu_step_has_no_tf32_and_times_its_copies_by_the_gpus_clock(fake_cuda, monkeypatch):
    """TF32 is off while every operation runs and restored after (Ampere's default TF32
    convolutions and matmuls miss the float32 reference by ~1e-3); every copy between the
    devices, and every offloading copy, is timed by the GPU's synchronised clock, a copy to the
    CPU too (the CPU's thread time counts the wait for the GPU only if the driver spins)."""
    backends = torch.backends
    before = backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32
    backends.cudnn.allow_tf32 = backends.cuda.matmul.allow_tf32 = True  # an Ampere's defaults
    try:
        check_tf32_and_copies(fake_cuda, monkeypatch)
    finally:
        backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32 = before


def check_tf32_and_copies(fake_cuda, monkeypatch):
    backends = torch.backends
    flags: list[tuple[bool, bool]] = []
    copies: list[tuple[str, str, int]] = []
    run_group, copy_in, offload = (
        aten_runtime.AtenRuntime.run_group,
        aten_runtime.AtenRuntime._copy_in,
        aten_runtime.AtenRuntime.offload,
    )

    def running(self, gid, device, sources):
        flags.append((backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32))
        return run_group(self, gid, device, sources)

    def timed(copy):
        def copying(self, gid, source, target):
            before = len(fake_cuda)
            copy(self, gid, source, target)
            copies.append((source, target, fake_cuda[before:].count(("sync", "cuda:0"))))

        return copying

    monkeypatch.setattr(aten_runtime.AtenRuntime, "run_group", running)
    monkeypatch.setattr(aten_runtime.AtenRuntime, "_copy_in", timed(copy_in))
    monkeypatch.setattr(aten_runtime.AtenRuntime, "offload", timed(offload))
    plan, graph, result = scheduled("attention", "greedy", 0.6)
    transfers = result.timeline.transfers
    runtime, _, _, _ = run_fake(
        plan, graph, result.schedule, {"gpu": "cuda:0", "cpu": "cpu"}, monkeypatch
    )
    assert flags == [(False, False)] * len(result.schedule.operations)
    assert (backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32) == (True, True)
    assert sorted(copies) == sorted((t.source, t.target, 2) for t in transfers)
    assert {(source, target) for source, target, _ in copies} == {("cpu", "gpu"), ("gpu", "cpu")}
    # offloading copies (none in this schedule), both ways, on the runtime the step left
    copies.clear()
    with FakeTensorMode():
        runtime.store["gpu"]["held"] = {"t": torch.empty(4, 8, device="cuda:0")}
        runtime.offload("held", "gpu", "cpu")
        runtime.offload("held", "cpu", "gpu")
    assert copies == [("gpu", "cpu", 2), ("cpu", "gpu", 2)]
    assert str(runtime.store["cpu"]["held"]["t"].device) == "cpu"

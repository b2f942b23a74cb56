"""The executor's GPU path, without a GPU: under ``FakeTensorMode`` a device mapped to ``cuda:0``
gets fake CUDA tensors (shapes, dtypes and devices, no data), and any op that mixes devices
raises. So a heterogeneous schedule run this way checks every placement the executor makes for
a real GPU: inputs and parameters per device, copies between devices, factory ops that the
capture recorded with ``device=cpu``, the CUDA clock and peak calls, and the refusal of
CPU-only kernels on a GPU. (Fake CUDA cannot run batch norm without CUDA: its kernel asks the
CUDA runtime. So these models have none; what runs on a real GPU is not checked here.)"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from solver.execution.simulate import check_schedule, effective_graph  # noqa: E402
from solver.importers import executor  # noqa: E402
from solver.importers.aten import capture_model, graph_from_plan  # noqa: E402
from solver.importers.aten_groups import plan_groups  # noqa: E402
from solver.importers.executor import ExecutionError, execute_schedule, run_schedule  # noqa: E402
from solver.importers.hardware import make_platform  # noqa: E402
from solver.importers.zoo_composite import COMPOSITE  # noqa: E402
from solver.optimize.bounds import no_remat_peak  # noqa: E402
from solver.optimize.methods import solve  # noqa: E402
from solver.optimize.solve import SolveOptions  # noqa: E402

SMALL = {"attention": (2, 32, 256), "lstm": (2, 8, 32)}


@functools.cache
def scheduled(name: str, method: str, gpu: float):
    plan = plan_groups(capture_model(COMPOSITE[name][0], SMALL[name], name=name), "layer")
    graph = graph_from_plan(plan, make_platform())
    fixed = graph.device("gpu").fixed_memory
    graph = graph.with_memory_limits({"gpu": fixed + int(gpu * no_remat_peak(graph))})
    result = solve(graph, method, SolveOptions(time_limit_s=20))
    assert result.schedule is not None, result.status
    return plan, graph, result


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda as a GPU machine would answer; the calls the executor makes are recorded."""
    calls: list[tuple[str, str]] = []
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        cuda, "synchronize", lambda device=None: calls.append(("sync", str(device)))
    )
    monkeypatch.setattr(
        cuda, "reset_peak_memory_stats", lambda device=None: calls.append(("reset", str(device)))
    )
    monkeypatch.setattr(cuda, "max_memory_allocated", lambda device=None: 12345)
    monkeypatch.setattr(cuda, "get_rng_state_all", lambda: [])
    monkeypatch.setattr(cuda, "set_rng_state_all", lambda states: None)
    return calls


class FakeModel:
    """The parameters and buffers of a real model as fake tensors (what the runtime reads)."""

    def __init__(self, mode, model):
        self.params = {k: mode.from_tensor(v) for k, v in model.named_parameters()}
        self.buffers = {k: mode.from_tensor(v) for k, v in model.named_buffers()}

    def named_parameters(self):
        return self.params.items()

    def named_buffers(self):
        return self.buffers.items()


def run_fake(plan, graph, schedule, device_map, monkeypatch):
    """Run ``schedule`` on fake tensors; every tensor the executor holds is checked to be on
    the torch device its schedule device maps to. Returns the runtime and the devices seen."""
    timeline = check_schedule(effective_graph(graph, schedule), schedule)
    mapping = executor._device_map(torch, [d.name for d in graph.devices], device_map)
    executor._check_kernels(plan, schedule, mapping)
    seen: dict[str, set[str]] = {name: set() for name in mapping}
    measure = executor._Runtime._measure

    def checked(self, device, env):
        tensors = [t for held in self.store[device].values() for t in held.values()]
        tensors += [v for k, v in env.items() if k not in self.plan.grads]
        tensors += list(self.copies.values())
        for value in tensors:
            for t in value if isinstance(value, list | tuple) else (value,):
                if isinstance(t, torch.Tensor):
                    seen[device].add(str(t.device))
        measure(self, device, env)

    monkeypatch.setattr(executor._Runtime, "_measure", checked)
    model, xs = executor._build(torch, plan, 0)
    mode = FakeTensorMode()
    with mode:
        fake = FakeModel(mode, model)
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
    monkeypatch.setattr(executor._Runtime, "_placed", lambda self, kwargs, device: kwargs)
    with pytest.raises(RuntimeError, match="same device"):  # without the fix
        run_fake(plan, graph, result.schedule, {"gpu": "cuda:0"}, monkeypatch)


def test_cpu_only_kernel_on_a_gpu_is_refused_in_one_line(fake_cuda):
    plan, graph, result = scheduled("lstm", "chen-greedy:gpu", 1.0)
    with pytest.raises(ExecutionError) as error:
        execute_schedule(plan, graph, result.schedule, {"gpu": "cuda:0"})
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("node 'lstm' runs on gpu (cuda:0), but its op ")
    assert "aten.mkldnn_rnn_layer.default is a CPU-only kernel" in message
    assert message.endswith("map that device to the CPU (--device-map gpu=cpu) or schedule the "
                            "node on the CPU")  # fmt: skip


def test_cuda_mapping_is_checked_and_defaults_to_the_first_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    mapping = executor._device_map(torch, ["cpu", "gpu"], {})
    assert {k: str(v) for k, v in mapping.items()} == {"cpu": "cpu", "gpu": "cuda:0"}
    mapping = executor._device_map(torch, ["cpu", "gpu"], {"gpu": "cuda:1", "cpu": "cpu"})
    assert str(mapping["gpu"]) == "cuda:1"
    with pytest.raises(ExecutionError, match="names 'tpu', which is not a device of the graph"):
        executor._device_map(torch, ["cpu", "gpu"], {"tpu": "cuda:0"})
    with pytest.raises(ExecutionError, match="--device-map gpu=warp9: not a torch device"):
        executor._device_map(torch, ["cpu", "gpu"], {"gpu": "warp9"})

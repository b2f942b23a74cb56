"""Run one training step by a schedule, on torch devices, and measure it against the simulator.

The graph's nodes are groups of ATen ops of PyTorch's joint graph
(:mod:`solver.importers.aten_groups`), so a node runs by calling its ATen ops on real tensors.
The executor follows the simulator's replay of the schedule
(:func:`solver.execution.simulate.simulate`): stage by stage, each operation runs its node's ops on
the torch device its schedule device is mapped to, an input read from another device is copied with
``.to(copy=True)`` for that operation only, a tensor is released exactly where the timeline frees
it, and whatever a stage does not keep is released at its end. A recomputation runs the node's ops
again; random ops (dropout) replay the generator state of the node's first run, so a recomputed mask
equals the original one.

On a GPU (docs/spec-notes.md, "The PyTorch executor"), a random op draws on the CPU with the
CPU's generator, as the reference ``loss.backward()`` on the CPU draws, and its result is copied
to the GPU (the GPU's kernel would draw other masks from the GPU's generator, and the gradients
would differ); the step runs without TF32 (:func:`solver.importers.gpu_step.full_float32`).

Measured: time per operation and per copy (thread CPU time with one torch thread on the CPU,
wall clock with CUDA synchronisation on a GPU; a copy from or to a GPU on the GPU's clock), and
the peak activation bytes per schedule device, counted as the unique storages of the tensors the
executor holds for that device (kept outputs, the running node's intermediates, copied inputs);
with CUDA, ``torch.cuda.max_memory_allocated`` is reported beside it. Parameters, buffers, the
input and the parameter gradients are fixed memory, not counted, as in the graph. Finally the
parameter gradients are compared with a plain ``loss.backward()`` of the same model, input and seed.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.errors import XEngineError
from solver.execution.simulate import check_schedule, effective_graph
from solver.importers._deps import require_torch
from solver.importers.aten_capture import example_inputs, loss_of
from solver.importers.aten_groups import (
    GroupPlan,
    is_inplace,
    is_view,
    last_uses,
    tensor_inputs,
)
from solver.importers.gpu_step import copy_timer, full_float32
from solver.importers.schedule_walk import order_of, walk_schedule

__all__ = [
    "ExecutionError",
    "ExecutionReport",
    "clock",
    "execute_schedule",
    "host_draw",
    "is_random",
    "one_thread",
    "replay_rng",
    "measure_group_times",
    "reference_gradients",
    "run_schedule",
]

logger = logging.getLogger(__name__)


class ExecutionError(XEngineError):
    """The schedule cannot be executed (wrong graph, unknown device, no CUDA)."""


@dataclass(frozen=True)
class ExecutionReport:
    """Measured and predicted time and peak memory of one executed training step."""

    measured_ms: float
    measured_peak: dict[str, int]
    predicted_ms: float
    predicted_peak: dict[str, int]
    budgets: dict[str, int]
    gradients_match: bool
    max_abs_error: float
    device_map: dict[str, str]
    op_ms: tuple[tuple[int, str, str, float, bool], ...] = ()
    copy_ms: float = 0.0
    cuda_peak: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_step(
        cls,
        runtime: Any,
        op_ms: list[tuple[int, str, str, float, bool]],
        timeline: Any,
        graph: Graph,
        compared: tuple[bool, float],
        mapping: Mapping[str, Any],
        cuda_peak: dict[str, int] | None = None,
    ) -> ExecutionReport:
        """The report of a step both executors ran: the runtime's peaks and copy time, the
        operations' times, and the replay (``timeline`` of ``graph``) it is compared with."""
        return cls(
            measured_ms=sum(row[3] for row in op_ms) + runtime.copy_ms,
            measured_peak=dict(runtime.peak),
            predicted_ms=timeline.total_ms,
            predicted_peak=timeline.peaks,
            budgets={d.name: d.activation_budget for d in graph.devices},
            gradients_match=compared[0],
            max_abs_error=compared[1],
            device_map={k: str(v) for k, v in mapping.items()},
            op_ms=tuple(op_ms),
            copy_ms=runtime.copy_ms,
            cuda_peak=cuda_peak or {},
        )

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document of ``main.py execute``."""
        return {
            "measured": {
                "total_ms": round(self.measured_ms, 3),
                "copy_ms": round(self.copy_ms, 3),
                "peak_bytes": dict(self.measured_peak),
                **({"cuda_max_allocated": dict(self.cuda_peak)} if self.cuda_peak else {}),
            },
            "predicted": {
                "total_ms": round(self.predicted_ms, 3),
                "peak_bytes": dict(self.predicted_peak),
            },
            "budget_bytes": dict(self.budgets),
            "gradients_match": self.gradients_match,
            "max_abs_gradient_error": self.max_abs_error,
            "device_map": dict(self.device_map),
        }


def execute_schedule(
    plan: GroupPlan,
    graph: Graph,
    schedule: Schedule,
    device_map: Mapping[str, str] | None = None,
    *,
    seed: int = 0,
) -> ExecutionReport:
    """Run one training step of ``plan`` by ``schedule`` and compare it with the simulator.

    Parameters
    ----------
    plan
        The grouping the graph was built from (same model, input shape and level).
    graph
        The graph the schedule is for; its node ids must be the plan's group ids.
    schedule
        A valid schedule for ``graph`` (it is replayed strictly first).
    device_map
        Schedule device -> torch device (``{"gpu": "cuda:0", "cpu": "cpu"}``); a device not
        named maps to ``cpu`` if it is called ``cpu`` and to ``cuda:0`` otherwise.

    Raises
    ------
    ExecutionError
        If the graph and the plan differ, or a device cannot be used.
    ScheduleViolation
        If the schedule breaks a rule of the model on ``graph``.
    """
    torch = require_torch("the schedule executor")
    _check_same_nodes(plan, graph)
    sized = effective_graph(graph, schedule)
    timeline = check_schedule(sized, schedule)
    mapping = _device_map(torch, [d.name for d in graph.devices], device_map or {})
    _check_kernels(plan, schedule, mapping)
    model, xs = _build(torch, plan, seed)
    with one_thread(torch, mapping):  # the same kernels as the step: the same rounding
        reference = reference_gradients(plan, seed, model=model, xs=xs)
    runtime, op_ms = run_schedule(
        torch, plan, schedule, timeline, mapping, model, xs, seed, graph=sized
    )
    compared = _compare(torch, runtime.gradients(), reference)
    return ExecutionReport.of_step(
        runtime, op_ms, timeline, sized, compared, mapping, runtime.cuda_peaks()
    )


def run_schedule(
    torch,
    plan: GroupPlan,
    schedule: Schedule,
    timeline,
    mapping,
    model,
    xs: Sequence[Any],
    seed: int = 0,
    graph: Graph | None = None,
) -> tuple[_Runtime, list[tuple[int, str, str, float, bool]]]:
    """The step itself: every operation of ``schedule`` in order, releasing where ``timeline``
    (its replay) frees; the runtime (tensors held, peaks, copies) and the per-operation rows.

    Separate from :func:`execute_schedule` so that the device handling can be tested without
    a GPU: under ``FakeTensorMode`` with ``gpu`` mapped to ``cuda:0``, fake CUDA tensors check
    every device placement (an op mixing devices raises) with no data and no CUDA.
    """
    runtime = _Runtime(torch, plan, mapping, model, xs)
    runtime.reset_cuda_peaks()
    torch.manual_seed(seed + 1)
    if graph is not None:
        position, devices = order_of(graph)
    else:
        position, devices = {g.id: j for j, g in enumerate(plan.groups)}, list(mapping)
    with one_thread(torch, mapping), full_float32(torch, mapping):
        op_ms = walk_schedule(runtime, schedule, timeline, position, devices)
    return runtime, op_ms


def measure_group_times(plan: GroupPlan, *, warmup: int = 1, repeats: int = 3) -> dict[str, float]:
    """Milliseconds of every node on this CPU: the step run node by node, keeping everything,
    median of ``repeats`` runs after ``warmup`` (thread CPU time, one torch thread)."""
    import statistics

    torch = require_torch("measured costs")
    model, xs = _build(torch, plan, 0)
    samples: dict[str, list[float]] = {g.id: [] for g in plan.groups}
    mapping = {"cpu": torch.device("cpu")}
    with one_thread(torch, mapping):
        for run in range(warmup + max(repeats, 1)):
            runtime = _Runtime(torch, plan, mapping, model, xs)
            for group in plan.groups:
                ms = runtime.run_group(group.id, "cpu", {})
                if run >= warmup:
                    samples[group.id].append(ms)
    return {gid: statistics.median(values) for gid, values in samples.items()}


def reference_gradients(
    plan: GroupPlan, seed: int = 0, *, model: Any = None, xs: Sequence[Any] = ()
) -> dict[str, Any]:
    """Parameter gradients of a plain ``loss.backward()`` on the same model, inputs and seed."""
    torch = require_torch("the schedule executor")
    if model is None:
        model, xs = _build(torch, plan, seed)
    model = copy.deepcopy(model)
    torch.manual_seed(seed + 1)
    loss_of(model(*xs)).backward()
    params = dict(model.named_parameters())
    return {
        name: (params[name].grad if params[name].grad is not None else torch.zeros_like(p))
        for name, p in params.items()
    }


# ----- the runtime -----------------------------------------------------------------------------
class _Runtime:
    """Tensors per schedule device, the running node's intermediates, and the byte counts."""

    def __init__(
        self, torch, plan: GroupPlan, mapping: Mapping[str, Any], model, xs: Sequence[Any]
    ) -> None:
        self.torch, self.plan, self.mapping = torch, plan, dict(mapping)
        graph = plan.capture.gm.graph
        self.nodes = {n.name: n for n in graph.nodes}
        self.groups = {g.id: g for g in plan.groups}
        self.output = next(n for n in graph.nodes if n.op == "output")
        placeholders = [n.name for n in graph.nodes if n.op == "placeholder"]
        params = dict(model.named_parameters())
        buffers = {name: b.clone() for name, b in model.named_buffers()}
        values = [*xs, *(params[n].detach() for n in plan.capture.param_names)]
        values += [buffers[n] for n in plan.capture.buffer_names]
        self.inputs: dict[Any, dict[str, Any]] = {}
        for device in {str(d): d for d in self.mapping.values()}.values():
            self.inputs[str(device)] = {
                name: v.to(device) for name, v in zip(placeholders, values, strict=True)
            }
        self.fixed = {  # parameters, buffers and the input (and their views): fixed memory
            _storage_id(t) for held in self.inputs.values() for t in held.values()
        }
        self.store: dict[str, dict[str, dict[str, Any]]] = {d: {} for d in self.mapping}
        self.finals: dict[str, Any] = {}
        self.rng: dict[str, Any] = {}
        self.peak: dict[str, int] = dict.fromkeys(self.mapping, 0)
        self.copies: dict[str, Any] = {}
        self.copy_ms = 0.0
        self.freed_after: frozenset[tuple[str, str]] = frozenset()  # unused: ops free as listed
        self.last_use = {g.id: last_uses(g.ops, self.nodes, plan.owner, g.id) for g in plan.groups}
        self.grad_items: dict[str, set[int]] = {}  # multi-output ops' parameter gradients
        for n in graph.nodes:
            for u in n.users:
                if u.target is operator.getitem and u.name in plan.grads:
                    self.grad_items.setdefault(n.name, set()).add(u.args[1])

    # ----- running a node --------------------------------------------------------------------
    def run_group(self, gid: str, device: str, sources: Mapping[str, str]) -> float:
        """Run node ``gid`` on schedule device ``device``; return its milliseconds."""
        group = self.groups[gid]
        env: dict[str, Any] = {}
        self.copies: dict[str, Any] = {}
        for owner, source in sources.items():  # the schedule's transfers, before the operation
            if source != device:
                self._copy_in(owner, source, device)
        last = self.last_use[gid]
        outputs = set(group.outputs)
        with self._rng_of(gid):
            elapsed = 0.0
            for j, name in enumerate(group.ops):
                node = self.nodes[name]
                start = self._clock(device)
                if node.all_input_nodes and not tensor_inputs(node):  # reads only metadata
                    env[name] = self._like(node, device)
                else:
                    args, kwargs = self.torch.fx.node.map_arg(
                        (node.args, node.kwargs),
                        lambda n: self._resolve(n, env, gid, device, sources),
                    )
                    start = self._clock(device)
                    env[name] = self._call(node, args, kwargs, device)
                elapsed += self._clock(device) - start
                self._measure(device, env)
                for dead in [k for k in env if last.get(k, -1) <= j and k not in outputs]:
                    if dead not in self.plan.grads:
                        del env[dead]
        self.store[device][gid] = {name: env[name] for name in group.outputs}
        self.copies = {}
        for name in self.plan.grads:
            if name in env:
                self.finals[name] = env[name]
        self._measure(device, {})
        return elapsed

    def _call(self, node, args, kwargs: dict, device: str):
        """Run ATen op ``node`` on schedule device ``device``: a random op off the CPU draws
        on the CPU (:func:`host_draw`), any other runs where its arguments are."""
        target = self.mapping[device]
        if target.type != "cpu" and is_random(self.torch, node.target):
            return host_draw(self.torch, node.target, args, kwargs, target)
        return node.target(*args, **self._placed(kwargs, device))

    def _placed(self, kwargs: dict, device: str) -> dict:
        """A factory op's ``device=`` (captured as ``cpu``) becomes the op's own device."""
        if kwargs.get("device") is None:
            return kwargs
        return {**kwargs, "device": self.mapping[device]}

    def _like(self, node, device: str):
        """``empty_like`` / ``zeros_like`` / ``ones_like`` / ``full_like`` from the captured
        shape and dtype: they read no data, so their input need not be resident."""
        val = node.meta["val"]  # strides too: a random fill follows memory order
        out = self.torch.empty_strided(
            val.shape, val.stride(), dtype=val.dtype, device=self.mapping[device]
        )
        op = str(node.target)
        if "ones_like" in op:
            out.fill_(1)
        elif "zeros_like" in op:
            out.zero_()
        elif "full_like" in op:
            out.fill_(node.args[1])
        return out

    def _resolve(self, node, env: dict, gid: str, device: str, sources: Mapping[str, str]):
        name = node.name
        if name in env:
            return env[name]
        if node.op == "placeholder":
            return self.inputs[str(self.mapping[device])][name]
        owner = self.plan.owner.get(name)
        if owner is None or (owner != gid and (is_view(node) or is_inplace(node))):
            if is_inplace(node):  # a mutated tensor of another node: its base, as kept
                value = self._resolve(node.args[0], env, gid, device, sources)
            else:
                args, kwargs = self.torch.fx.node.map_arg(
                    (node.args, node.kwargs), lambda n: self._resolve(n, env, gid, device, sources)
                )
                value = self._call(node, args, kwargs, device)
            env[name] = value
            return value
        source = sources.get(owner, device)
        try:
            value = self.store[source][owner][name]
        except KeyError:
            raise ExecutionError(
                f"{gid} on {device} reads {name} of {owner}, which is not held on {source}; "
                "the schedule and the executor disagree (report this)"
            ) from None
        if source != device:
            if name not in self.copies:
                self._copy_in(owner, source, device)
            value = self.copies[name]  # occupies the device until the operation ends
        env[name] = value
        return value

    def _copy_in(self, owner: str, source: str, device: str) -> None:
        """Copy node ``owner``'s whole output from ``source`` for the running operation.

        As the simulator charges it (model.md §2 rule 3, docs/spec-notes.md "Simulator"): all
        of ``M_i``, not just the values the operation reads, from before the operation starts
        to its end, not from the op that first reads it (a backward whose peak comes before
        that read was measured 1 MiB under its prediction).
        """
        timer = copy_timer(self.mapping[source], self.mapping[device])
        start = clock(self.torch, timer)
        for name, held in self.store[source][owner].items():
            self.copies[name] = held.to(self.mapping[device], copy=True)
        self.copy_ms += clock(self.torch, timer) - start
        self._measure(device, {})

    # ----- releasing -------------------------------------------------------------------------
    def release(self, device: str, gid: str) -> None:
        """Free node ``gid``'s outputs on ``device`` (a ``freed`` entry of the timeline)."""
        self.store[device].pop(gid, None)

    def offload(self, gid: str, source: str, target: str) -> None:
        """An offloading copy at the end of a stage: node ``gid``'s outputs from ``source``
        to ``target``, kept there (docs/spec-notes.md "Offloading")."""
        timer = copy_timer(self.mapping[source], self.mapping[target])
        start = clock(self.torch, timer)
        self.store[target][gid] = {
            name: value.to(self.mapping[target], copy=True)
            for name, value in self.store[source][gid].items()
        }
        self.copy_ms += clock(self.torch, timer) - start
        self._measure(target, {})

    # ----- measuring -------------------------------------------------------------------------
    def _measure(self, device: str, env: Mapping[str, Any]) -> None:
        tensors = [t for held in self.store[device].values() for t in held.values()]
        for k, v in env.items():
            if k in self.plan.grads:  # parameter gradients are fixed memory, as in the graph
                continue
            skip = self.grad_items.get(k)
            if skip and isinstance(v, list | tuple):
                v = [t for j, t in enumerate(v) if j not in skip]
            tensors.append(v)
        tensors += list(self.copies.values())
        used = _storage_bytes(self.torch, tensors, self.fixed)
        self.peak[device] = max(self.peak[device], used)

    def _clock(self, device: str) -> float:
        return clock(self.torch, self.mapping[device])

    def reset_cuda_peaks(self) -> None:
        """Start ``max_memory_allocated`` afresh on every GPU (the reference step came first)."""
        for dev in {str(d): d for d in self.mapping.values() if d.type == "cuda"}.values():
            self.torch.cuda.reset_peak_memory_stats(dev)

    def cuda_peaks(self) -> dict[str, int]:
        """``torch.cuda.max_memory_allocated`` per schedule device mapped to a GPU."""
        return {
            name: int(self.torch.cuda.max_memory_allocated(dev))
            for name, dev in self.mapping.items()
            if dev.type == "cuda"
        }

    def _rng_of(self, gid: str):
        return replay_rng(self.torch, self.rng, gid)

    # ----- results ---------------------------------------------------------------------------
    def gradients(self) -> dict[str, Any]:
        """Parameter gradients, by parameter name, from the joint graph's output."""
        env: dict[str, Any] = dict(self.finals)

        def value(node):
            if node.name in env:
                return env[node.name]
            args, kwargs = self.torch.fx.node.map_arg((node.args, node.kwargs), value)
            env[node.name] = node.target(*args, **kwargs)
            return env[node.name]

        for name, tensor in env.items():  # the last sums may combine gradients of two devices
            if isinstance(tensor, self.torch.Tensor):
                env[name] = tensor.to("cpu")
        _, grads = self.output.args[0]
        names = self.plan.capture.param_names
        return {name: value(g).to("cpu") for name, g in zip(names, grads, strict=True)}


def _storage_id(tensor) -> int:
    """The identity of a tensor's storage, shared by its views: the address of the storage
    object itself (not of its data, which fake tensors do not have)."""
    return tensor.untyped_storage()._cdata


def _storage_bytes(torch, tensors, fixed: set[int]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views count once), except ``fixed``."""
    seen: dict[int, int] = {}
    for t in tensors:
        for tensor in t if isinstance(t, list | tuple) else (t,):
            if isinstance(tensor, torch.Tensor):
                key = _storage_id(tensor)
                if key not in fixed:
                    seen[key] = tensor.untyped_storage().nbytes()
    return sum(seen.values())


def clock(torch, target) -> float:
    """Milliseconds now on torch device ``target``: wall clock after a CUDA synchronisation on
    a GPU, this thread's CPU time on the CPU (one torch thread: the op's whole work)."""
    if target.type == "cuda":
        torch.cuda.synchronize(target)
        return time.perf_counter() * 1000.0
    return time.thread_time_ns() / 1e6


def is_random(torch, op) -> bool:
    """Does ATen op ``op`` draw from a random generator (``bernoulli_`` of dropout's mask,
    ``native_dropout``, ``rand_like``, ...)? ATen tags every such op ``nondeterministic_seeded``."""
    return torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())


#: In-place random ops that only write ``self`` (its values are not read).
_FILLS = frozenset(
    ("bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_")
    + ("log_normal_", "cauchy_")
)


def host_draw(torch, op, args: Sequence[Any], kwargs: Mapping[str, Any], target):
    """Random ATen op ``op`` drawn on the CPU, its result on torch device ``target``.

    The reference step (``loss.backward()`` on the CPU) draws dropout's mask with the CPU's
    kernel from the CPU's generator; a GPU's kernel draws from the GPU's generator, so its
    masks, and the gradients, would differ. Here the op itself runs on the CPU, on tensors of
    the same shape, strides and dtype as its arguments on ``target`` (values copied, a factory's
    ``device=`` the CPU), from the CPU's generator in the state the CPU run has at that draw:
    the same kernel, hence the same values bit for bit. An argument the op writes
    (``bernoulli_``'s ``self``) is written back on ``target`` and returned in place of its CPU
    copy (its values are copied in only if the op reads them: a fill such as ``bernoulli_``
    does not); other results are copied to ``target``. The draw and the copies are the
    operation's time (on the GPU's synchronised clock).
    """
    cpu = torch.device("cpu")
    aten_copy = torch.ops.aten.copy_.default  # the op: Tensor.copy_ onto fake CUDA needs CUDA
    schema = op._schema.arguments
    written = {a.name for a in schema if a.alias_info is not None and a.alias_info.is_write}
    fills = op._schema.name.removeprefix("aten::") in _FILLS
    back: list[tuple[Any, Any]] = []  # (on target, on the CPU) of each written argument

    def host(value, name: str):
        if not isinstance(value, torch.Tensor):
            return value
        if name not in written:
            return value.to(cpu)
        copy = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=cpu)
        if not (fills and name == "self"):
            aten_copy(copy, value)
        back.append((value, copy))
        return copy

    names = [a.name for a in schema]
    host_args = [host(v, names[j] if j < len(names) else "") for j, v in enumerate(args)]
    host_kwargs = {k: host(v, k) for k, v in kwargs.items()}
    if host_kwargs.get("device") is not None:
        host_kwargs["device"] = cpu
    result = op(*host_args, **host_kwargs)
    for on_target, on_cpu in back:
        aten_copy(on_target, on_cpu)
    originals = {id(on_cpu): on_target for on_target, on_cpu in back}

    def placed(value):
        if isinstance(value, list | tuple):
            return type(value)(placed(v) for v in value)
        if not isinstance(value, torch.Tensor):
            return value
        original = originals.get(id(value))
        return value.to(target) if original is None else original

    return placed(result)


@contextlib.contextmanager
def replay_rng(torch, states: dict[str, Any], gid: str):
    """First run of node ``gid``: remember the generator state in ``states``; recomputation:
    replay it (a recomputed dropout mask equals the first one), then restore the state."""
    if gid not in states:
        states[gid] = _rng_state(torch)
        yield
        return
    saved = _rng_state(torch)
    _set_rng_state(torch, states[gid])
    try:
        yield
    finally:
        _set_rng_state(torch, saved)


def _rng_state(torch):
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(torch, state) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _build(torch, plan: GroupPlan, seed: int) -> tuple[Any, list[Any]]:
    """The model and its inputs (every argument of ``forward``, of its dtype: token ids are
    integers), drawn after seeding, as the import drew them."""
    torch.manual_seed(seed)
    model = plan.capture.factory()
    model.train()
    return model, example_inputs(torch, plan.capture.inputs or plan.capture.input_shape)


def _device_map(torch, devices: list[str], given: Mapping[str, str]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(devices))
    if unknown:
        raise ExecutionError(
            f"--device-map names {unknown[0]!r}, which is not a device of the graph; "
            f"devices are {', '.join(devices)}"
        )
    mapping = {}
    for name in devices:
        text = given.get(name, "cpu" if name == "cpu" else "cuda:0")
        try:
            device = torch.device(text)
        except RuntimeError:
            raise ExecutionError(f"--device-map {name}={text}: not a torch device") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ExecutionError(
                f"device {name!r} maps to {text}, but torch sees no CUDA GPU here; "
                f"map it to the CPU with --device-map {name}=cpu"
            )
        mapping[name] = device
    return mapping


#: ATen kernels that exist only on the CPU; the capture picks them for its CPU fake tensors.
_CPU_ONLY = ("_for_cpu", "mkldnn")


def _check_kernels(plan: GroupPlan, schedule: Schedule, mapping: Mapping[str, Any]) -> None:
    """Refuse, before anything runs, an operation on a non-CPU device whose node calls a
    CPU-only kernel (flash attention for the CPU, oneDNN's LSTM layer)."""
    groups = {g.id: g for g in plan.groups}
    nodes = {n.name: n for n in plan.capture.gm.graph.nodes}
    for _, op in schedule.operations:
        target = mapping[op.device]
        if target.type == "cpu":
            continue
        for name in groups[op.node].ops:
            kernel = str(nodes[name].target)
            if any(mark in kernel for mark in _CPU_ONLY):
                raise ExecutionError(
                    f"node {op.node!r} runs on {op.device} ({target}), but its op {kernel} is "
                    "a CPU-only kernel (the capture is made for the CPU); map that device to "
                    f"the CPU (--device-map {op.device}=cpu) or schedule the node on the CPU"
                )


def _check_same_nodes(plan: GroupPlan, graph: Graph) -> None:
    ours = [g.id for g in plan.groups]
    theirs = {n.id for n in graph.nodes}
    missing = [i for i in ours if i not in theirs]
    extra = sorted(theirs - set(ours))
    if missing or extra:
        what = f"node {missing[0]!r} of the import is missing" if missing else ""
        what = what or f"node {extra[0]!r} is not in the import"
        raise ExecutionError(
            f"the graph does not match the imported model ({len(ours)} nodes imported, "
            f"{len(theirs)} in the graph; {what}); solve the schedule on the graph that "
            "'import-torch' writes for the same model, input shape and level"
        )


def _compare(torch, grads: Mapping[str, Any], reference: Mapping[str, Any]) -> tuple[bool, float]:
    """allclose per parameter, with the absolute tolerance scaled to the reference's largest
    entry: a model whose gradients are all tiny (a loss of a LayerNorm output, ~1e-8) would
    pass a fixed ``atol=1e-5`` whatever the step computed."""
    error = 0.0
    match = True
    for name, expected in reference.items():
        got = grads[name]
        if not got.numel():
            continue
        error = max(error, float((got - expected).abs().max()))
        scale = float(expected.abs().max())
        atol = 1e-5 * scale if scale > 0 else 1e-12
        match &= bool(torch.allclose(got, expected, rtol=1e-4, atol=atol))
    return match, error


@contextlib.contextmanager
def one_thread(torch, mapping: Mapping[str, Any]):
    """One torch thread while a CPU device runs, so thread CPU time is an op's whole work."""
    before = torch.get_num_threads()
    if any(d.type == "cpu" for d in mapping.values()):
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)

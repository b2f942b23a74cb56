"""Run one training step of an ATen import by a schedule, on torch devices.

The graph's nodes are groups of ATen ops of PyTorch's joint graph
(:mod:`solver.importers.aten_groups`), so a node runs by calling its ATen ops on real tensors.
The step follows the simulator's replay of the schedule (the driver of
:mod:`solver.executors.harness`, the walk of :mod:`solver.execution.schedule_walk`): stage by
stage, each operation runs its node's ops on the torch device its schedule device is mapped to,
an input read from another device is copied with ``.to(copy=True)`` for that operation only, a
tensor is released exactly where the timeline frees it, and whatever a stage does not keep is
released at its end. A recomputation runs the node's ops again; random ops draw by the rules of
:mod:`solver.executors.host_rng` (on the CPU's generator, replayed when recomputed).

Peaks count the kept outputs, the running node's intermediates and the copied inputs of each
schedule device. Parameters, buffers, the inputs and the parameter gradients are fixed memory,
as in the graph. The parameter gradients are compared with a plain ``loss.backward()`` of the
same model, inputs and seed.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.execution.schedule_walk import StepRow, order_of
from solver.executors import harness
from solver.executors.harness import (
    ExecutorError,
    HeldTensors,
    StepKind,
    StepReport,
    clock,
    execute_step,
    run_step,
    storage_id,
)
from solver.executors.host_rng import host_draw, is_random, replay_rng
from solver.importers._deps import require_torch
from solver.importers.aten_capture import example_inputs
from solver.importers.aten_groups import (
    GroupPlan,
    is_inplace,
    is_view,
    last_uses,
    tensor_inputs,
)

__all__ = ["AtenRuntime", "aten_step", "execute_schedule", "reference_gradients", "run_schedule"]


def execute_schedule(
    plan: GroupPlan,
    graph: Graph,
    schedule: Schedule,
    device_map: Mapping[str, str] | None = None,
    *,
    seed: int = 0,
) -> StepReport:
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
    ExecutorError
        If the graph and the plan differ, or a device cannot be used.
    ScheduleViolation
        If the schedule breaks a rule of the model on ``graph``.
    """
    return execute_step(aten_step(plan), graph, schedule, device_map, seed=seed)


def aten_step(plan: GroupPlan) -> StepKind:
    """The ATen runtime's parts of the driver (:class:`solver.executors.harness.StepKind`)."""
    return StepKind(
        check_graph=lambda graph: _check_same_nodes(plan, graph),
        check_devices=lambda graph, schedule, mapping: check_kernels(plan, schedule, mapping),
        build=lambda torch, seed: build(torch, plan, seed),
        runtime=lambda torch, mapping, model, xs, *_: AtenRuntime(torch, plan, mapping, model, xs),
    )


def run_schedule(
    torch: Any,
    plan: GroupPlan,
    schedule: Schedule,
    timeline: Any,
    mapping: Mapping[str, Any],
    model: Any,
    xs: Sequence[Any],
    seed: int = 0,
    graph: Graph | None = None,
) -> tuple[AtenRuntime, list[StepRow]]:
    """The step itself: every operation of ``schedule`` in order, releasing where ``timeline``
    (its replay) frees; the runtime (tensors held, peaks, copies, and with ``graph`` the bytes
    saved for the backward) and the per-operation rows.

    Separate from :func:`execute_schedule` so that the device handling can be tested without
    a GPU: under ``FakeTensorMode`` with ``gpu`` mapped to ``cuda:0``, fake CUDA tensors check
    every device placement (an op mixing devices raises) with no data and no CUDA.
    """
    runtime = AtenRuntime(torch, plan, mapping, model, xs)
    if graph is not None:
        order, boundary = order_of(graph), graph.boundary
    else:
        order, boundary = ({g.id: j for j, g in enumerate(plan.groups)}, list(mapping)), None
    return runtime, run_step(torch, runtime, schedule, timeline, mapping, order, seed, boundary)


def reference_gradients(
    plan: GroupPlan, seed: int = 0, *, model: Any = None, xs: Sequence[Any] = ()
) -> dict[str, Any]:
    """Parameter gradients of a plain ``loss.backward()`` on the same model, inputs and seed."""
    torch = require_torch("the schedule executor")
    if model is None:
        model, xs = build(torch, plan, seed)
    return harness.reference_gradients(torch, model, xs, seed)


# ----- the runtime -----------------------------------------------------------------------------
class AtenRuntime(HeldTensors):
    """Tensors per schedule device (by node id, its outputs by ATen name), the running node's
    intermediates, and the byte counts. ``copies`` holds the inputs copied in for the running
    operation, by ATen name."""

    def __init__(
        self, torch: Any, plan: GroupPlan, mapping: Mapping[str, Any], model: Any, xs: Sequence[Any]
    ) -> None:
        super().__init__(torch, mapping)
        self.plan = plan
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
            storage_id(t) for held in self.inputs.values() for t in held.values()
        }
        self.finals: dict[str, Any] = {}
        self.rng: dict[str, Any] = {}
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
        self.copies = {}
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
                self.measure(device, env)
                for dead in [k for k in env if last.get(k, -1) <= j and k not in outputs]:
                    if dead not in self.plan.grads:
                        del env[dead]
        self.store[device][gid] = {name: env[name] for name in group.outputs}
        self.copies = {}
        for name in self.plan.grads:
            if name in env:
                self.finals[name] = env[name]
        self.measure(device)
        return elapsed

    def _call(self, node: Any, args: Any, kwargs: dict[str, Any], device: str) -> Any:
        """Run ATen op ``node`` on schedule device ``device``: a random op off the CPU draws
        on the CPU (:func:`host_draw`), any other runs where its arguments are."""
        target = self.mapping[device]
        if target.type != "cpu" and is_random(self.torch, node.target):
            return host_draw(self.torch, node.target, args, kwargs, target)
        return node.target(*args, **self._placed(kwargs, device))

    def _placed(self, kwargs: dict[str, Any], device: str) -> dict[str, Any]:
        """A factory op's ``device=`` (captured as ``cpu``) becomes the op's own device."""
        if kwargs.get("device") is None:
            return kwargs
        return {**kwargs, "device": self.mapping[device]}

    def _like(self, node: Any, device: str) -> Any:
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

    def _resolve(
        self, node: Any, env: dict[str, Any], gid: str, device: str, sources: Mapping[str, str]
    ) -> Any:
        name = node.name
        if name in env:
            return env[name]
        if node.op == "placeholder":
            return self.inputs[str(self.mapping[device])][name]
        if node.op == "get_attr":  # a constant made in forward (torch.tensor(2.0)): fixed
            return self._constant(name, device)
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
            raise ExecutorError(
                f"{gid} on {device} reads {name} of {owner}, which is not held on {source}; "
                "the schedule and the executor disagree (report this)"
            ) from None
        if source != device:
            if name not in self.copies:
                self._copy_in(owner, source, device)
            value = self.copies[name]  # occupies the device until the operation ends
        env[name] = value
        return value

    def _constant(self, name: str, device: str) -> Any:
        """Lifted tensor constant ``name`` of the capture on ``device`` (fixed memory)."""
        held = self.inputs[str(self.mapping[device])]
        if name not in held:
            value = getattr(self.plan.capture.gm, self.nodes[name].target)
            held[name] = value.to(self.mapping[device], copy=True)
            self.fixed.add(storage_id(held[name]))
        return held[name]

    def _copy_in(self, owner: str, source: str, device: str) -> None:
        """Copy node ``owner``'s whole output from ``source`` for the running operation.

        As the simulator charges it (model.md §2 rule 3, docs/spec-notes.md "Simulator"): all
        of ``M_i``, not just the values the operation reads, from before the operation starts
        to its end, not from the op that first reads it (a backward whose peak comes before
        that read was measured 1 MiB under its prediction).
        """
        self.copies.update(self.timed_copy(self.store[source][owner], source, device))
        self.measure(device)

    # ----- measuring -------------------------------------------------------------------------
    def measure(self, device: str, env: Mapping[str, Any] | None = None) -> None:
        """Raise ``peak[device]`` to what is held there now, with the running node's ``env``."""
        tensors = [t for held in self.store[device].values() for t in held.values()]
        for k, v in (env or {}).items():
            if k in self.plan.grads:  # parameter gradients are fixed memory, as in the graph
                continue
            skip = self.grad_items.get(k)
            if skip and isinstance(v, list | tuple):
                v = [t for j, t in enumerate(v) if j not in skip]
            tensors.append(v)
        tensors += list(self.copies.values())
        self.peak[device] = max(self.peak[device], self.held_bytes(tensors))

    def _clock(self, device: str) -> float:
        return clock(self.torch, self.mapping[device])

    def _rng_of(self, gid: str) -> Any:
        return replay_rng(self.torch, self.rng, gid)

    # ----- results ---------------------------------------------------------------------------
    def gradients(self) -> dict[str, Any]:
        """Parameter gradients, by parameter name, from the joint graph's output.

        A gradient may be an in-place op's result (``copy_`` into a fresh tensor: the gradient
        of a parameter that the forward clones and partly overwrites, swin_v2's ``qkv`` bias);
        its node ran the write, so it is the written tensor, held in ``finals`` as its base.
        Recomputing it from its arguments would reach back through values long released."""
        env: dict[str, Any] = dict(self.finals)

        def value(node: Any) -> Any:
            if node.name in env:
                return env[node.name]
            if node.op != "call_function":
                raise ExecutorError(
                    f"the gradient output reads {node.name} ({node.op}), which no node of the "
                    "schedule computed; the plan and the executor disagree (report this)"
                )
            if is_inplace(node):  # its node ran it: the written tensor is the result
                env[node.name] = value(node.args[0])
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


def build(torch: Any, plan: GroupPlan, seed: int) -> tuple[Any, list[Any]]:
    """The model and its inputs (every argument of ``forward``, of its dtype: token ids are
    integers), drawn after seeding, as the import drew them."""
    torch.manual_seed(seed)
    model = plan.capture.factory()
    model.train()
    return model, example_inputs(torch, plan.capture.inputs or plan.capture.input_shape)


#: ATen kernels that exist only on the CPU; the capture picks them for its CPU fake tensors.
_CPU_ONLY = ("_for_cpu", "mkldnn")


def check_kernels(plan: GroupPlan, schedule: Schedule, mapping: Mapping[str, Any]) -> None:
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
                raise ExecutorError(
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
        raise ExecutorError(
            f"the graph does not match the imported model ({len(ours)} nodes imported, "
            f"{len(theirs)} in the graph; {what}); solve the schedule on the graph that "
            "'import-torch' writes for the same model, input shape and level"
        )

"""Run one training step of a torch.fx-imported graph by a schedule (the bundled zoo networks).

A graph from :func:`solver.importers.torch_fx.import_torch` has one forward node per layer
(its fx nodes listed in ``parts``), a ``loss`` node and one backward node per forward node. The
walk is the ATen executor's (:func:`solver.importers.schedule_walk.walk_schedule`: stages,
per-device placement, copies as ``.to()``, frees where the simulator frees, offloading copies
at the end of a stage); what a node does:

* **forward** ``i``: its fx nodes run under autograd from detached copies of its inputs (leaves),
  the modules on the torch device the schedule device maps to; the autograd graph of the latest
  (re)computation is kept as :class:`~torch.autograd.graph.GradientEdge` objects only, so it
  holds no tensor of the executor.
* **loss**: the gradient of ``mean(out ** 2)`` with respect to the last layer's output (the
  node's memory is that gradient, the size of the output).
* **backward** ``i.grad``: ``torch.autograd.grad`` through the graph of ``i``'s latest
  computation, from the sum of the gradients its consumers' backward nodes (or the loss) hand it;
  its output is the gradient of each input of ``i``. Parameter gradients are accumulated on the
  first run of a backward node only (a recomputed one gives them again).

Memory stays honest through :func:`torch.autograd.graph.saved_tensors_hooks`: a tensor autograd
saves that is (the storage of) a graph tensor the executor holds (an input's output, ``i``'s own
output, or a reshaped copy of an input that ``aten::matmul`` makes) is packed as a reference and
unpacked from the executor's resident copy on the backward's device; a parameter, a buffer or
the input batch is fixed memory and stays as it is; anything else (BN's input, max-pool indices,
dropout masks, stored as ``bool`` as the fused GPU kernel does) belongs to node ``i``'s bundle:
held, copied and freed with ``i``'s output, as ``i``'s ``memory`` in the graph counts it.
Peaks are counted as the ATen executor counts them: distinct storages of what the executor holds
for a device (outputs, bundles, the running node's live intermediates and the tensors autograd
saved so far, copied inputs). Tensors autograd allocates inside one ``autograd.grad`` call
(gradients of a layer's internal tensors) are not seen.

On a GPU (docs/spec-notes.md, "torch.fx on a GPU"): the model is copied to each torch device,
dropout's mask is drawn with the CPU's generator (the reference's masks), TF32 is off while the
step runs, and a backward must run on the torch device of its forward's latest computation
(:func:`check_backward_devices`). tests/solver/importers/test_fx_executor_devices.py checks the
placements without a GPU.
"""

from __future__ import annotations

import copy
import inspect
import logging
import statistics
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.execution.simulate import check_schedule, effective_graph
from solver.importers._deps import require_torch
from solver.importers.aten_capture import loss_of
from solver.importers.executor import (
    ExecutionError,
    ExecutionReport,
    _compare,
    _device_map,
    _storage_bytes,
    _storage_id,
    clock,
    one_thread,
    replay_rng,
)
from solver.importers.gpu_step import copy_timer, full_float32
from solver.importers.schedule_walk import order_of, walk_schedule

__all__ = [
    "FxPlan",
    "plan_fx",
    "execute_fx_schedule",
    "run_fx_schedule",
    "check_backward_devices",
    "measure_fx_times",
    "fx_reference_gradients",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FxPlan:
    """A torch.fx import and what is needed to run it: the model spec, the input shape, the
    level and the imported graph (whose forward nodes name their fx nodes)."""

    spec: str
    input_shape: tuple[int, ...]
    level: str
    graph: Graph

    @property
    def parts(self) -> dict[str, tuple[str, ...]]:
        """Forward node id -> the fx nodes it runs, in order."""
        return {
            n.id: tuple(n.extra.get("parts") or (n.id,))
            for n in self.graph.nodes
            if n.kind == "forward"
        }


def plan_fx(
    spec: str, input_shape: tuple[int, ...], level: str = "layer", platform: Any = None
) -> FxPlan:
    """Import ``spec`` with torch.fx again (on the meta device) and keep what the executor needs
    (``platform``: the devices and links of the import, default the desktop pair).

    Raises
    ------
    GraphFormatError
        If the spec cannot be loaded or traced (one line).
    """
    from solver.importers.torch_fx import import_torch

    graph = import_torch(spec, tuple(input_shape), level=level, devices=platform)
    return FxPlan(spec, tuple(input_shape), level, graph)


def execute_fx_schedule(
    plan: FxPlan,
    graph: Graph,
    schedule: Schedule,
    device_map: Mapping[str, str] | None = None,
    *,
    seed: int = 0,
) -> ExecutionReport:
    """Run one training step of ``plan``'s model by ``schedule``; compare with the simulator.

    Parameters
    ----------
    plan
        The torch.fx import the graph was made from (:func:`plan_fx`).
    graph
        The graph the schedule is for (same nodes and edges as ``plan.graph``; its costs and
        budgets give the prediction).
    schedule
        A valid schedule for ``graph`` (replayed strictly first).
    device_map
        Schedule device -> torch device, as for :func:`solver.importers.executor.execute_schedule`.

    Raises
    ------
    ExecutionError
        If the graph is not the import, a device cannot be used, or a backward runs on another
        torch device than its forward's latest computation.
    ScheduleViolation
        If the schedule breaks a rule of the model on ``graph``.
    """
    torch = require_torch("the schedule executor")
    _check_same_graph(plan, graph)
    sized = effective_graph(graph, schedule)
    timeline = check_schedule(sized, schedule)
    mapping = _device_map(torch, [d.name for d in graph.devices], device_map or {})
    check_backward_devices(graph, schedule, mapping)  # before minutes of work, not after
    model, x = _build(torch, plan, seed)
    with one_thread(torch, mapping):  # the same kernels as the step: same rounding
        reference = fx_reference_gradients(plan, seed, model=model, x=x)
    runtime, op_ms = run_fx_schedule(
        torch, plan, schedule, timeline, sized, mapping, model, x, seed
    )
    compared = _compare(torch, runtime.gradients(), reference)
    cuda_peak = runtime.cuda_peaks()
    runtime.close()
    return ExecutionReport.of_step(runtime, op_ms, timeline, sized, compared, mapping, cuda_peak)


def run_fx_schedule(
    torch,
    plan: FxPlan,
    schedule: Schedule,
    timeline,
    graph: Graph,
    mapping: Mapping[str, Any],
    model,
    x,
    seed: int = 0,
) -> tuple[_FxRuntime, list[tuple[int, str, str, float, bool]]]:
    """The step itself: every operation of ``schedule`` in order, releasing where ``timeline``
    (its replay on ``graph``, the effective graph) frees; the runtime (tensors held, peaks,
    gradients) and the per-operation rows.

    Separate from :func:`execute_fx_schedule` so that the device handling can be tested
    without a GPU, as :func:`solver.importers.executor.run_schedule` is: under
    ``FakeTensorMode``, with a fake ``model`` and ``x``, a device mapped to ``cuda:0`` holds
    fake CUDA tensors and an op that mixes devices raises.
    """
    check_backward_devices(graph, schedule, mapping)
    runtime = _FxRuntime(torch, plan, mapping, model, x)
    runtime.last_reads = _last_reads(graph, schedule)
    runtime.reset_cuda_peaks()
    torch.manual_seed(seed + 1)
    position, devices = order_of(graph)
    with one_thread(torch, mapping), full_float32(torch, mapping):
        op_ms = walk_schedule(runtime, schedule, timeline, position, devices)
    return runtime, op_ms


def check_backward_devices(graph: Graph, schedule: Schedule, mapping: Mapping[str, Any]) -> None:
    """Refuse a schedule whose backward node runs on another torch device than the latest
    computation of its forward node before it: the backward runs through the autograd graph
    that computation built, which holds the parameters (and saved tensors) of that device.

    Raises
    ------
    ExecutionError
        Naming the first such backward, in one line.
    """
    latest: dict[str, str] = {}
    for _, op in schedule.operations:
        node = graph.node(op.node)
        if node.kind == "forward":
            latest[node.id] = op.device
            continue
        where = latest.get(node.of or "")
        if node.kind == "backward" and where is not None:
            if mapping[where] != mapping[op.device]:
                raise ExecutionError(
                    f"{node.id} runs on {op.device} ({mapping[op.device]}), but {node.of} was "
                    f"last computed on {where} ({mapping[where]}): the torch.fx executor runs "
                    "a backward through autograd's graph on the torch device that built it; "
                    "schedule the backward where its forward last ran, map both schedule "
                    "devices to one torch device (--device-map gpu=cpu), or import with "
                    "import-torch (ATen)"
                )


def measure_fx_times(plan: FxPlan, *, warmup: int = 1, repeats: int = 3) -> dict[str, float]:
    """Milliseconds of every node on this CPU: the step run node by node, keeping everything,
    median of ``repeats`` runs after ``warmup`` (thread CPU time, one torch thread).

    Each node runs twice and the second run is timed, its first output released just before:
    a step that keeps everything allocates every tensor in memory never touched before, and
    the page faults of that (not of the layer) made ResNet-50's prediction 1.45x its step,
    which reuses what it frees.
    """
    torch = require_torch("measured costs")
    model, x = _build(torch, plan, 0)
    samples: dict[str, list[float]] = {n.id: [] for n in plan.graph.nodes}
    mapping = {"cpu": torch.device("cpu")}
    with one_thread(torch, mapping):
        for run in range(warmup + max(repeats, 1)):
            runtime = _FxRuntime(torch, plan, mapping, model, x)
            for node in plan.graph.nodes:
                runtime.run_group(node.id, "cpu", {})
                runtime.release("cpu", node.id)
                ms = runtime.run_group(node.id, "cpu", {})
                if run >= warmup:
                    samples[node.id].append(ms)
            runtime.close()
    return {gid: statistics.median(values) for gid, values in samples.items()}


def fx_reference_gradients(
    plan: FxPlan, seed: int = 0, *, model: Any = None, x: Any = None
) -> dict[str, Any]:
    """Parameter gradients of a plain ``loss.backward()`` on the same model, input and seed."""
    torch = require_torch("the schedule executor")
    if model is None:
        model, x = _build(torch, plan, seed)
    model = copy.deepcopy(model)
    torch.manual_seed(seed + 1)
    loss_of(model(x)).backward()
    return {
        name: p.grad if p.grad is not None else torch.zeros_like(p)
        for name, p in model.named_parameters()
    }


# ----- saved tensors ---------------------------------------------------------------------------
class _Saved:
    """What autograd keeps for one saved tensor: the tensor itself (fixed memory, or until the
    forward ends), or a way to find it again in the executor's resident tensors."""

    __slots__ = ("tensor", "part", "kind", "ref", "geometry", "dtype")

    def __init__(self, tensor, part: str) -> None:
        self.tensor: Any = tensor
        self.part = part
        self.kind = "pending"
        self.ref: Any = None
        self.geometry: Any = None
        self.dtype: Any = None

    def point_at(self, kind: str, ref: Any, geometry: Any = None) -> None:
        self.kind, self.ref, self.geometry = kind, ref, geometry
        self.dtype = self.tensor.dtype
        self.tensor = None


def _geometry(tensor) -> tuple:
    return tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset()


@dataclass
class _Record:
    """The autograd graph of a forward node's latest computation, tensor-free."""

    device: Any
    out: Any  # GradientEdge of the output
    leaves: dict[str, Any]  # input node id -> GradientEdge of its leaf
    params: list[tuple[str, Any]]  # (name, GradientEdge) of the parameters it used


# ----- the runtime -----------------------------------------------------------------------------
class _FxRuntime:
    """Tensors per schedule device (by node id, a dict of named tensors), the autograd graphs
    of the forward nodes, the parameter gradients, and the byte counts."""

    def __init__(self, torch, plan: FxPlan, mapping: Mapping[str, Any], model, x) -> None:
        self.torch, self.plan, self.mapping = torch, plan, dict(mapping)
        self.graph = plan.graph
        self.parts = plan.parts
        self.owner = {name: gid for gid, names in self.parts.items() for name in names}
        gm = torch.fx.symbolic_trace(model)
        self.fx = {n.name: n for n in gm.graph.nodes}
        self.modules: dict[str, Any] = {}
        self.inputs: dict[str, Any] = {}
        for device in {str(d): d for d in self.mapping.values()}.values():
            here = device == x.device
            self.modules[str(device)] = gm if here else _module_on(torch, gm, device)
            self.inputs[str(device)] = x if here else x.to(device)
        self.fixed = {_storage_id(t) for t in self.inputs.values()}
        self.param_names: dict[int, str] = {}
        for module in self.modules.values():
            for name, p in module.named_parameters():
                self.fixed.add(_storage_id(p))
                self.param_names[id(p)] = name
            self.fixed |= {_storage_id(b) for _, b in module.named_buffers()}
        self.store: dict[str, dict[str, dict[str, Any]]] = {d: {} for d in self.mapping}
        self.records: dict[str, _Record] = {}
        self.param_grads: dict[str, Any] = {}
        self.backward_done: set[str] = set()
        self.rng: dict[str, Any] = {}
        self.peak: dict[str, int] = dict.fromkeys(self.mapping, 0)
        self.copies: dict[str, Any] = {}
        self.copy_ms = 0.0
        self.pending: list[_Saved] = []
        self.derived: dict[str, Any] = {}  # views of the inputs made in the running node
        self.input_storages: set[int] = set()
        self.part = ""
        self.context: dict[str, Any] = {}
        self.freed_after: frozenset[tuple[str, str]] = frozenset()
        self.held: dict[str, tuple[str, list[Any]]] = {}
        self.position = -1  # of the running operation in the schedule
        self.last_reads: dict[int, set[str]] = {}  # position -> ids nothing reads after it
        graph = self.graph
        self.reads_self = {
            graph.nodes[i].id
            for k, node in enumerate(graph.nodes)
            if node.kind == "backward"
            for i in graph.inputs[k]
            if graph.nodes[i].id == node.of
        }
        self._needed: dict[str, list[set[str]]] = {}

    # ----- running a node --------------------------------------------------------------------
    def run_group(self, gid: str, device: str, sources: Mapping[str, str]) -> float:
        """Run node ``gid`` on schedule device ``device``; return its milliseconds."""
        node = self.graph.node(gid)
        self.position += 1
        self.copies = {}
        values = {
            self.graph.nodes[i].id: self._read(self.graph.nodes[i].id, device, sources)
            for i in self.graph.inputs[self.graph.index[gid]]
        }
        if node.kind == "forward":
            ms, result = self._forward(gid, device, values)
        elif node.kind == "loss":
            ms, result = self._loss(device, values)
        else:
            ms, result = self._backward(gid, node.of or "", device, values)
        self.store[device][gid] = result
        self._measure(device)
        self.copies = {}
        return ms

    def _read(self, gid: str, device: str, sources: Mapping[str, str]) -> dict[str, Any]:
        """Node ``gid``'s tensors on ``device``: resident, or copied from its source device
        for this operation only."""
        source = sources.get(gid, device)
        try:
            value = self.store[source][gid]
        except KeyError:
            raise ExecutionError(
                f"reading {gid} on {source}, where it is not held; the schedule and the "
                "executor disagree (report this)"
            ) from None
        if source == device:
            return value
        timer = copy_timer(self.mapping[source], self.mapping[device])
        start = clock(self.torch, timer)
        copied = _copied(value, self.mapping[device])
        self.copy_ms += clock(self.torch, timer) - start
        self.copies[gid] = copied
        return copied

    def _forward(self, gid: str, device: str, values: Mapping[str, dict]) -> tuple[float, dict]:
        torch = self.torch
        target = self.mapping[device]
        module = self.modules[str(target)]
        leaves = {g: v["out"].detach().requires_grad_() for g, v in values.items()}
        parts = self.parts[gid]
        needed = self._needed_after(gid)
        env: dict[str, Any] = {}
        derived: dict[str, Any] = {}
        self.derived = derived
        self.input_storages = {_storage_id(leaf) for leaf in leaves.values()}
        self.pending = []
        elapsed = 0.0
        # weakly: autograd's nodes hold the hooks, and a runtime holding those nodes through
        # its records would be a cycle through C++ that the collector never frees
        me = weakref.ref(self)
        hooks = torch.autograd.graph.saved_tensors_hooks(
            lambda t: me()._pack(t),  # type: ignore[union-attr]
            lambda saved: me()._unpack(saved),  # type: ignore[union-attr]
        )
        with replay_rng(torch, self.rng, gid), torch.enable_grad(), hooks:
            for j, name in enumerate(parts):
                self.part = name
                node = self.fx[name]
                args, kwargs = torch.fx.node.map_arg(
                    (node.args, node.kwargs),
                    lambda n: self._resolve(n, env, derived, leaves, target, gid),
                )
                inplace = self._in_place(node, args, kwargs, env, needed[j], module)
                start = clock(torch, target)
                env[name] = inplace(args[0]) if inplace else self._call(node, args, kwargs, module)
                elapsed += clock(torch, target) - start
                del args, kwargs
                for dead in [k for k in env if k not in needed[j]]:
                    del env[dead]
                for dead in [k for k in derived if k not in needed[j]]:
                    del derived[dead]
                held = [*env.values(), *derived.values(), *(s.tensor for s in self.pending)]
                self._measure(device, held)
        out = env.pop(parts[-1])
        result = {"out": out.detach()}
        self._classify(gid, device, result, out, values)
        self.records[gid] = self._record(target, out, leaves)
        for leaf in leaves.values():  # autograd's AccumulateGrad holds the leaf: empty it
            leaf.data = torch.empty(0, dtype=leaf.dtype, device=leaf.device)
        self.pending, self.derived = [], {}
        return elapsed, result

    def _resolve(self, n, env, derived, leaves, target, gid: str):
        """An fx argument of node ``gid``'s forward: computed here, an input's leaf, the batch,
        or a view (or size, attribute) evaluated from those; such a view, if it does not
        descend from ``gid``'s own fx nodes, is a view of the inputs (``derived``)."""

        def leaf(owner: str, name: str):
            if owner == gid or owner not in leaves:
                raise ExecutionError(
                    f"node {gid!r} reads fx node {name!r} of {owner!r}, which is not one of "
                    "its inputs in the graph; import the model again (report this)"
                )
            return leaves[owner]

        def computed(node, value) -> None:
            if not any(a.name in self.parts[gid] for a in _ancestors_here(node, self.owner)):
                derived[node.name] = value

        return self._evaluate(n, env, target, leaf, computed)

    def _evaluate(self, n, env: dict[str, Any], target, owned, computed=None):
        """The value of fx node ``n`` on torch device ``target``: memoised in ``env``, the
        batch for the placeholder, ``owned(owner, name)`` for an fx node that graph node
        ``owner`` computes; any other is evaluated from its arguments, and ``computed(node,
        value)`` is told. The walk of a forward's arguments and of a rebuilt view."""
        if n.name in env:
            return env[n.name]
        if n.op == "placeholder":
            return self.inputs[str(target)]
        owner = self.owner.get(n.name)
        if owner is not None:
            return owned(owner, n.name)
        args, kwargs = self.torch.fx.node.map_arg(
            (n.args, n.kwargs), lambda a: self._evaluate(a, env, target, owned, computed)
        )
        env[n.name] = value = self._call(n, args, kwargs, self.modules[str(target)])
        if computed is not None:
            computed(n, value)
        return value

    def _call(self, node, args, kwargs, module):
        if _activation(node, module) == "dropout":
            drop = _dropout_arguments(self.torch, node, args, kwargs, module)
            if drop is not None:
                return _dropout(self.torch, *drop)
        if node.op == "call_module":
            return module.get_submodule(node.target)(*args, **kwargs)
        if node.op == "call_function":
            return node.target(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **kwargs)
        if node.op == "get_attr":
            value = module
            for attr in node.target.split("."):
                value = getattr(value, attr)
            return value
        raise ExecutionError(f"fx node {node.name!r} ({node.op}) cannot be run")

    def _in_place(self, node, args, kwargs, env, needed: set[str], module):
        """ReLU or dropout in place on a tensor of this node that nothing reads afterwards and
        autograd has not saved (BN's output before a ReLU): the fused kernel a framework runs,
        without the transient second copy that the node's memory does not count."""
        torch = self.torch
        source = node.args[0] if node.args else None
        if (
            len(args) != 1
            or not isinstance(source, torch.fx.Node)
            or source.name not in env
            or source.name in needed
            or env[source.name] is not args[0]
            or args[0]._base is not None
        ):
            return None
        sid = _storage_id(args[0])
        if any(s.tensor is not None and _storage_id(s.tensor) == sid for s in self.pending):
            return None
        kind = _activation(node, module)
        if kind == "relu":
            return torch.relu_
        if kind == "dropout":
            drop = _dropout_arguments(torch, node, args, kwargs, module)
            if drop is None:
                return None
            _, p, training, _ = drop
            return lambda t: _dropout(torch, t, p, training, True)
        return None

    def _needed_after(self, gid: str) -> list[set[str]]:
        """Per part j, the fx names still needed after it: the output, and whatever the later
        parts read (through views and sizes) that is computed in this node."""
        if gid in self._needed:
            return self._needed[gid]
        parts = self.parts[gid]
        result = []
        for j in range(len(parts)):
            keep = {parts[-1]}
            stack = [a for p in parts[j + 1 :] for a in self.fx[p].all_input_nodes]
            while stack:
                n = stack.pop()
                if n.name in keep or n.op == "placeholder":
                    continue
                owner = self.owner.get(n.name)
                if owner is not None and owner != gid:
                    continue
                keep.add(n.name)
                if owner is None:
                    stack.extend(n.all_input_nodes)
            result.append(keep)
        self._needed[gid] = result
        return result

    # ----- autograd's saved tensors ----------------------------------------------------------
    def _pack(self, tensor) -> _Saved:
        saved = _Saved(tensor, self.part)
        if _storage_id(tensor) not in self.fixed | self.input_storages:
            name = _derived_match(self.torch, tensor, self.derived)
            if name is not None:  # a reshaped copy of an input: dropped now, rebuilt later
                saved.point_at("derived", (name, tuple(tensor.shape)))
                self.pending.append(saved)
                return saved
        if _activation(self.fx[self.part], self._module()) == "dropout":
            scale = _mask_scale(self.torch, tensor)
            if scale is not None and _storage_id(tensor) not in self.fixed:
                # the mask as bool (as the fused GPU kernel keeps it) and its scale
                saved.kind, saved.dtype, saved.ref = "mask", tensor.dtype, scale
                saved.tensor = tensor != 0
        self.pending.append(saved)
        return saved

    def _module(self):
        return next(iter(self.modules.values()))

    def _unpack(self, saved: _Saved):
        if saved.kind in ("fixed", "pending", "held"):
            return saved.tensor
        ctx = self.context
        if saved.kind == "out":
            return ctx["self"]["out"].as_strided(*saved.geometry)
        if saved.kind == "in":
            return ctx["inputs"][saved.ref]["out"].as_strided(*saved.geometry)
        if saved.kind == "derived":
            name, shape = saved.ref
            return self._rederive(name, ctx).reshape(shape)
        if saved.kind == "mask":
            key, scale = saved.ref
            return ctx["self"][key].to(saved.dtype) * scale
        return ctx["self"][saved.ref]

    def _classify(self, gid: str, device: str, result: dict, out, values) -> None:
        """Turn every tensor autograd saved during the forward into a reference, a fixed
        tensor, or a member of the node's bundle (``result["s0"]``, ...). Where the graph's
        backward node does not read this node (BN's per-channel statistics at op level), the
        tensor stays with autograd's graph, counted on ``device`` until the node runs again."""
        held: list[Any] = []
        out_id = _storage_id(out)
        inputs = {_storage_id(v["out"]): g for g, v in values.items()}
        for saved in self.pending:
            t = saved.tensor
            if saved.kind == "derived":
                continue
            sid = _storage_id(t)
            if saved.kind == "mask":
                key = f"s{len(result) - 1}"
                result[key] = t
                saved.ref, saved.tensor = (key, saved.ref), None
            elif sid in self.fixed:
                saved.kind = "fixed"
            elif sid == out_id:
                saved.point_at("out", None, _geometry(t))
            elif sid in inputs:
                saved.point_at("in", inputs[sid], _geometry(t))
            elif gid in self.reads_self:
                key = f"s{len(result) - 1}"
                result[key] = t
                saved.point_at("bundle", key)
            else:  # the graph's backward does not read this node: autograd's graph keeps it
                saved.kind = "held"
                held.append(t)
        self.held[gid] = (device, held)

    def _rederive(self, name: str, ctx: Mapping[str, Any]):
        """Evaluate fx node ``name`` (views of inputs) again from the inputs resident on the
        backward's device."""
        with self.torch.no_grad():
            return self._evaluate(
                self.fx[name], {}, ctx["device"], lambda owner, _: ctx["inputs"][owner]["out"]
            )

    def _record(self, target, out, leaves: Mapping[str, Any]) -> _Record:
        from torch.autograd.graph import get_gradient_edge

        by_leaf = {id(leaf): g for g, leaf in leaves.items()}
        params: list[tuple[str, Any]] = []
        seen: set[int] = set()
        stack = [out.grad_fn]
        while stack:
            fn = stack.pop()
            if fn is None or id(fn) in seen:
                continue
            seen.add(id(fn))
            variable = getattr(fn, "variable", None)
            if variable is not None:
                if id(variable) in self.param_names:
                    params.append((self.param_names[id(variable)], get_gradient_edge(variable)))
                continue
            stack.extend(f for f, _ in fn.next_functions)
        edges = {g: get_gradient_edge(leaf) for g, leaf in leaves.items() if id(leaf) in by_leaf}
        return _Record(target, get_gradient_edge(out), edges, params)

    # ----- loss and backward -----------------------------------------------------------------
    def _loss(self, device: str, values: Mapping[str, dict]) -> tuple[float, dict]:
        torch = self.torch
        (gid, value), *_ = values.items()
        target = self.mapping[device]
        start = clock(torch, target)
        with torch.enable_grad():
            leaf = value["out"].detach().requires_grad_()
            (grad,) = torch.autograd.grad(loss_of(leaf), [leaf])
        return clock(torch, target) - start, {gid: grad}

    def _backward(
        self, gid: str, of: str, device: str, values: Mapping[str, dict]
    ) -> tuple[float, dict]:
        torch = self.torch
        target = self.mapping[device]
        record = self.records[of]
        if record.device != target:  # check_backward_devices refuses such a schedule first
            raise ExecutionError(
                f"{gid} runs on {target}, but autograd's graph of {of} is on {record.device}; "
                "the schedule and the executor disagree (report this)"
            )
        kinds = {g: self.graph.node(g).kind for g in values}
        pieces = [v[of] for g, v in values.items() if kinds[g] != "forward" and of in v]
        start = clock(torch, target)
        incoming = self._sum(pieces, of, device, values, kinds)
        self.context = {
            "device": target,
            "inputs": {g: v for g, v in values.items() if kinds[g] == "forward" and g != of},
            "self": values.get(of, {}),
        }
        names = list(record.leaves)
        edges = [record.leaves[g] for g in names] + [edge for _, edge in record.params]
        try:
            grads = torch.autograd.grad(
                [record.out], edges, [incoming], retain_graph=True, allow_unused=True
            )
        except KeyError as exc:
            raise ExecutionError(
                f"{gid} needs {exc.args[0]!r}, which the graph does not give it (autograd "
                "saves more than the import says); report this"
            ) from None
        finally:
            self.context = {}
        elapsed = clock(torch, target) - start
        result = {g: t for g, t in zip(names, grads, strict=False) if t is not None}
        if gid not in self.backward_done:
            self.backward_done.add(gid)
            for (name, _), grad in zip(record.params, grads[len(names) :], strict=True):
                if grad is not None:
                    grad = grad.to("cpu")
                    old = self.param_grads.get(name)
                    self.param_grads[name] = grad if old is None else old + grad
        extra = [incoming] if len(pieces) > 1 else []
        self._measure(device, [*result.values(), *extra])
        return elapsed, result

    def _sum(self, pieces: list, of: str, device: str, values: Mapping[str, dict], kinds) -> Any:
        """The gradient of ``of``'s output: the sum of what its consumers hand it, added in
        place into a piece whose value nothing needs afterwards (a copy, a tensor the replay
        frees right after this operation, or one the schedule keeps but never reads again) and
        that no other node's tensors share, as autograd accumulates into its buffer. Else the
        sum is a new tensor: memory the graph does not count."""
        if len(pieces) == 1:
            return pieces[0]
        spare = None
        for g, v in values.items():
            if kinds[g] == "forward" or of not in v:
                continue
            dies = (
                g in self.copies
                or (device, g) in self.freed_after
                or g in self.last_reads.get(self.position, ())
            )
            if dies and not self._shared(v[of], g):
                spare = v[of]
                break
        if spare is None:
            return sum(pieces[1:], pieces[0])
        for piece in pieces:
            if piece is not spare:
                spare.add_(piece)
        return spare

    def _shared(self, tensor, owner: str) -> bool:
        """Whether another node's held tensors share ``tensor``'s storage."""
        sid = _storage_id(tensor)
        for held in (*self.store.values(), self.copies):
            for gid, value in held.items():
                if gid != owner and any(_storage_id(t) == sid for t in value.values()):
                    return True
        return False

    # ----- releasing and offloading ----------------------------------------------------------
    def release(self, device: str, gid: str) -> None:
        """Free node ``gid``'s tensors on ``device`` (output and bundle)."""
        self.store[device].pop(gid, None)

    def offload(self, gid: str, source: str, target: str) -> None:
        """An offloading copy at the end of a stage, kept on ``target``."""
        timer = copy_timer(self.mapping[source], self.mapping[target])
        start = clock(self.torch, timer)
        self.store[target][gid] = _copied(self.store[source][gid], self.mapping[target])
        self.copy_ms += clock(self.torch, timer) - start
        self._measure(target)

    def close(self) -> None:
        """Drop every tensor and autograd graph now (a step keeps the whole training state)."""
        for held in self.store.values():
            held.clear()
        self.records.clear()
        self.held.clear()
        self.copies = {}

    # ----- measuring -------------------------------------------------------------------------
    def _measure(self, device: str, extra: list | tuple = ()) -> None:
        tensors = [t for held in self.store[device].values() for t in held.values()]
        tensors += [t for held in self.copies.values() for t in held.values()]
        tensors += [t for t in extra if t is not None]
        tensors += [t for where, kept in self.held.values() if where == device for t in kept]
        used = _storage_bytes(self.torch, tensors, self.fixed)
        self.peak[device] = max(self.peak[device], used)

    def reset_cuda_peaks(self) -> None:
        """Start ``torch.cuda.max_memory_allocated`` afresh on every GPU the step uses."""
        for dev in {str(d): d for d in self.mapping.values() if d.type == "cuda"}.values():
            self.torch.cuda.reset_peak_memory_stats(dev)

    def cuda_peaks(self) -> dict[str, int]:
        """``torch.cuda.max_memory_allocated`` per schedule device mapped to a GPU (fixed
        memory included: the model's copy on that GPU and the batch)."""
        return {
            name: int(self.torch.cuda.max_memory_allocated(dev))
            for name, dev in self.mapping.items()
            if dev.type == "cuda"
        }

    def gradients(self) -> dict[str, Any]:
        """Parameter gradients by name (zeros for a parameter no node reached)."""
        module = next(iter(self.modules.values()))
        return {
            name: self.param_grads.get(name, self.torch.zeros_like(p, device="cpu"))
            for name, p in module.named_parameters()
        }


def _last_reads(graph: Graph, schedule: Schedule) -> dict[int, set[str]]:
    """Operation position -> the node ids that no later operation or offloading copy reads."""
    last: dict[str, float] = {}
    for p, (t, op) in enumerate(schedule.operations):
        for i in graph.inputs[graph.index[op.node]]:
            last[graph.nodes[i].id] = float(p)
        if schedule.stages[t].ops[-1] is op:  # the stage's copies read their sources after it
            for gid, _, _ in schedule.stages[t].offload_copies():
                last[gid] = p + 0.5
    result: dict[int, set[str]] = {}
    for gid, at in last.items():
        if at.is_integer():
            result.setdefault(int(at), set()).add(gid)
    return result


def _copied(value: Mapping[str, Any], device) -> dict[str, Any]:
    """A copy of a node's tensors on ``device``; tensors that are one tensor (the gradient an
    addition hands both its inputs) stay one."""
    done: dict[tuple, Any] = {}
    result = {}
    for key, tensor in value.items():
        ident = (_storage_id(tensor), _geometry(tensor))
        if ident not in done:
            done[ident] = tensor.to(device, copy=True)
        result[key] = done[ident]
    return result


def _module_on(torch, gm, device):
    """A copy of ``gm`` whose parameters and buffers are made directly on ``device`` (not
    copied on the host first, then moved: that held a second host copy of every weight, and
    under ``FakeTensorMode`` a deep copy leaves the mode that the step runs in)."""
    memo: dict[int, Any] = {}
    for p in gm.parameters():
        memo[id(p)] = torch.nn.Parameter(p.detach().to(device), requires_grad=p.requires_grad)
    for b in gm.buffers():
        memo[id(b)] = b.to(device)
    return copy.deepcopy(gm, memo)


def _ancestors_here(node, owner: Mapping[str, str]):
    """fx nodes this non-compute node is computed from, up to compute nodes and inputs."""
    stack, seen = list(node.all_input_nodes), set()
    while stack:
        n = stack.pop()
        if n.name in seen:
            continue
        seen.add(n.name)
        yield n
        if n.name not in owner and n.op != "placeholder":
            stack.extend(n.all_input_nodes)


def _derived_match(torch, tensor, derived: Mapping[str, Any]) -> str | None:
    """The view of an input that ``tensor`` is a reshaped copy of (``aten::matmul`` saves its
    operands reshaped to 3-d, copying a transposed one), if any."""
    for name, value in derived.items():
        if (
            isinstance(value, torch.Tensor)
            and value.numel() == tensor.numel()
            and value.dtype == tensor.dtype
            and torch.equal(value.reshape(tensor.shape), tensor)
        ):
            return name
    return None


def _activation(node, module) -> str:
    """``relu``, ``dropout`` or ``""`` for an fx node (module, function or method)."""
    torch = require_torch("the schedule executor")
    if node.op == "call_module":
        sub = module.get_submodule(node.target)
        if type(sub) is torch.nn.ReLU:
            return "relu"
        return "dropout" if type(sub) is torch.nn.Dropout else ""
    name = str(node.target) if node.op == "call_method" else getattr(node.target, "__name__", "")
    return name if name in ("relu", "dropout") else ""


def _dropout_arguments(torch, node, args, kwargs, module) -> tuple | None:
    """``(input, p, training, inplace)`` of a dropout fx node (an ``nn.Dropout`` or a call of
    ``torch.nn.functional.dropout``, positional or by keyword), or ``None`` for another form
    (run as written)."""
    if node.op == "call_module":
        sub = module.get_submodule(node.target)
        return args[0], sub.p, sub.training, sub.inplace
    if node.op != "call_function" or node.target is not torch.nn.functional.dropout:
        return None
    bound = inspect.signature(torch.nn.functional.dropout).bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    return a["input"], a["p"], a["training"], a["inplace"]


def _dropout(torch, tensor, p: float, training: bool, inplace: bool):
    """Dropout whose mask the CPU's generator draws, on any device: on the CPU the kernel
    itself, elsewhere :func:`_host_dropout`. A GPU's own kernel draws from the GPU's
    generator: other masks than ``loss.backward()`` on the CPU (the reference) draws, other
    gradients, and the comparison would fail on every network with dropout."""
    if tensor.device.type == "cpu":
        return torch.nn.functional.dropout(tensor, p, training, inplace)
    return _host_dropout(torch, tensor, p, training, inplace)


def _host_dropout(torch, tensor, p: float, training: bool, inplace: bool):
    """What the CPU's dropout kernel does (ATen's ``_dropout_impl``), its mask drawn on the
    CPU and applied where ``tensor`` is: ``bernoulli_(1 - p)`` on a tensor like the input,
    divided by ``1 - p``, multiplied in. Autograd saves the scaled mask, as on the CPU; the
    draw and the copy of the mask are in the layer's time."""
    if p == 0 or not training or tensor.numel() == 0:
        return tensor
    if p == 1:
        noise = torch.zeros((), dtype=tensor.dtype, device=tensor.device)
    else:
        noise = torch.empty_like(tensor, device="cpu").bernoulli_(1 - p).div_(1 - p)
        noise = noise.to(tensor.device)
    return tensor.mul_(noise) if inplace else tensor * noise


def _mask_scale(torch, tensor) -> float | None:
    """``c`` if ``tensor`` holds only 0 and one value ``c`` (CPU dropout's scaled noise), else
    ``None``: such a tensor is kept as ``bool`` and rebuilt exactly as ``mask * c``."""
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return None
    top = float(tensor.max())
    if top == 0 or not bool(((tensor == 0) | (tensor == top)).all()):
        return None
    return top


def _build(torch, plan: FxPlan, seed: int):
    from solver.importers.torch_fx import load_factory

    torch.manual_seed(seed)
    model = load_factory(plan.spec)()
    model.train()
    x = torch.randn(plan.input_shape)
    return model, x


def _check_same_graph(plan: FxPlan, graph: Graph) -> None:
    from solver.importers.aten import structure_hash

    if structure_hash(graph) != structure_hash(plan.graph):
        raise ExecutionError(
            f"graph '{graph.name}' ({graph.n} nodes) is not the torch.fx import of {plan.spec} "
            f"at {'x'.join(map(str, plan.input_shape))}, level {plan.level} "
            f"({plan.graph.n} nodes); import it again with the same input shape and level, "
            "and solve on that file"
        )

"""Run one training step of a torch.fx-imported graph by a schedule (the bundled zoo networks).

A graph from :func:`solver.importers.torch_fx.import_torch` has one forward node per layer
(its fx nodes listed in ``parts``), a ``loss`` node and one backward node per forward node. The
driver and the walk are the ATen runtime's (:mod:`solver.executors.harness`,
:func:`solver.execution.schedule_walk.walk_schedule`: stages, per-device placement, copies as
``.to()``, frees where the simulator frees, offloading copies at the end of a stage); what a
node does:

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

Memory stays honest through autograd's saved-tensor hooks (:mod:`solver.executors.saved_tensors`):
a saved tensor is a reference to a tensor the runtime holds, fixed memory, or a member of node
``i``'s bundle, held, copied and freed with ``i``'s output, as ``i``'s ``memory`` counts it.
Peaks are counted as the ATen executor counts them: distinct storages of what the executor holds
for a device (outputs, bundles, the running node's live intermediates and the tensors autograd
saved so far, copied inputs). Tensors autograd allocates inside one ``autograd.grad`` call
(gradients of a layer's internal tensors) are not seen.

On a GPU (docs/spec-notes.md, "torch.fx on a GPU"): the model is copied to each torch device,
dropout's mask is drawn with the CPU's generator (:mod:`solver.executors.host_rng`), TF32 is off
while the step runs, and a backward must run on the torch device of its forward's latest
computation (:func:`check_backward_devices`). tests/solver/executors/test_fx_runtime_devices.py
checks the placements without a GPU.
"""

from __future__ import annotations

import copy
import inspect
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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
    one_thread,
    run_step,
    storage_id,
)
from solver.executors.host_rng import dropout, replay_rng
from solver.executors.saved_tensors import SavedTensors
from solver.importers._deps import require_torch
from solver.importers.aten_capture import loss_of

__all__ = [
    "FxPlan",
    "FxRuntime",
    "fx_step",
    "plan_fx",
    "execute_fx_schedule",
    "run_fx_schedule",
    "check_backward_devices",
    "measure_fx_times",
    "fx_reference_gradients",
]


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
) -> StepReport:
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
        Schedule device -> torch device, as for
        :func:`solver.executors.aten_runtime.execute_schedule`.

    Raises
    ------
    ExecutorError
        If the graph is not the import, a device cannot be used, or a backward runs on another
        torch device than its forward's latest computation.
    ScheduleViolation
        If the schedule breaks a rule of the model on ``graph``.
    """
    return execute_step(fx_step(plan), graph, schedule, device_map, seed=seed)


def fx_step(plan: FxPlan) -> StepKind:
    """The torch.fx runtime's parts of the driver (:class:`solver.executors.harness.StepKind`)."""
    return StepKind(
        check_graph=lambda graph: _check_same_graph(plan, graph),
        check_devices=check_backward_devices,
        build=lambda torch, seed: _model_and_batch(torch, plan, seed),
        runtime=lambda torch, mapping, model, inputs, graph, schedule: _fresh_runtime(
            torch, plan, mapping, model, inputs, graph, schedule
        ),
    )


def _model_and_batch(torch: Any, plan: FxPlan, seed: int) -> tuple[Any, list[Any]]:
    model, x = build(torch, plan, seed)
    return model, [x]


def _fresh_runtime(
    torch: Any,
    plan: FxPlan,
    mapping: Mapping[str, Any],
    model: Any,
    inputs: Sequence[Any],
    graph: Graph,
    schedule: Schedule,
) -> FxRuntime:
    (x,) = inputs
    runtime = FxRuntime(torch, plan, mapping, model, x)
    runtime.last_reads = _last_reads(graph, schedule)
    return runtime


def run_fx_schedule(
    torch: Any,
    plan: FxPlan,
    schedule: Schedule,
    timeline: Any,
    graph: Graph,
    mapping: Mapping[str, Any],
    model: Any,
    x: Any,
    seed: int = 0,
) -> tuple[FxRuntime, list[StepRow]]:
    """The step itself: every operation of ``schedule`` in order, releasing where ``timeline``
    (its replay on ``graph``, the effective graph) frees; the runtime (tensors held, peaks,
    gradients) and the per-operation rows.

    Separate from :func:`execute_fx_schedule` so that the device handling can be tested
    without a GPU, as :func:`solver.executors.aten_runtime.run_schedule` is: under
    ``FakeTensorMode``, with a fake ``model`` and ``x``, a device mapped to ``cuda:0`` holds
    fake CUDA tensors and an op that mixes devices raises.
    """
    check_backward_devices(graph, schedule, mapping)
    runtime = _fresh_runtime(torch, plan, mapping, model, [x], graph, schedule)
    order, boundary = order_of(graph), graph.boundary
    return runtime, run_step(torch, runtime, schedule, timeline, mapping, order, seed, boundary)


def check_backward_devices(graph: Graph, schedule: Schedule, mapping: Mapping[str, Any]) -> None:
    """Refuse a schedule whose backward node runs on another torch device than the latest
    computation of its forward node before it: the backward runs through the autograd graph
    that computation built, which holds the parameters (and saved tensors) of that device.

    Raises
    ------
    ExecutorError
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
                raise ExecutorError(
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
    model, x = build(torch, plan, 0)
    samples: dict[str, list[float]] = {n.id: [] for n in plan.graph.nodes}
    mapping = {"cpu": torch.device("cpu")}
    with one_thread(torch, mapping):
        for run in range(warmup + max(repeats, 1)):
            runtime = FxRuntime(torch, plan, mapping, model, x)
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
        model, x = build(torch, plan, seed)
    return harness.reference_gradients(torch, model, [x], seed)


@dataclass
class _Record:
    """The autograd graph of a forward node's latest computation, tensor-free."""

    device: Any
    out: Any  # GradientEdge of the output
    leaves: dict[str, Any]  # input node id -> GradientEdge of its leaf
    params: list[tuple[str, Any]]  # (name, GradientEdge) of the parameters it used


# ----- the runtime -----------------------------------------------------------------------------
class FxRuntime(HeldTensors):
    """Tensors per schedule device (by node id, a dict of named tensors: ``out`` and the
    bundle), the autograd graphs of the forward nodes, the parameter gradients, and the byte
    counts. ``copies`` holds the inputs copied in for the running operation, by node id."""

    def __init__(
        self, torch: Any, plan: FxPlan, mapping: Mapping[str, Any], model: Any, x: Any
    ) -> None:
        super().__init__(torch, mapping)
        self.plan = plan
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
        self.fixed = {storage_id(t) for t in self.inputs.values()}
        self.param_names: dict[int, str] = {}
        for module in self.modules.values():
            for name, p in module.named_parameters():
                self.fixed.add(storage_id(p))
                self.param_names[id(p)] = name
            self.fixed |= {storage_id(b) for _, b in module.named_buffers()}
        self.records: dict[str, _Record] = {}
        self.param_grads: dict[str, Any] = {}
        self.backward_done: set[str] = set()
        self.rng: dict[str, Any] = {}
        self.saved = SavedTensors(torch, self.fixed, self._rederive)
        self.held = self.saved.held  # node id -> (device, tensors autograd's graph keeps)
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
        self.measure(device)
        self.copies = {}
        return ms

    def _read(self, gid: str, device: str, sources: Mapping[str, str]) -> dict[str, Any]:
        """Node ``gid``'s tensors on ``device``: resident, or copied from its source device
        for this operation only."""
        source = sources.get(gid, device)
        try:
            value = self.store[source][gid]
        except KeyError:
            raise ExecutorError(
                f"reading {gid} on {source}, where it is not held; the schedule and the "
                "executor disagree (report this)"
            ) from None
        if source == device:
            return value
        self.copies[gid] = self.timed_copy(value, source, device)
        return self.copies[gid]

    def _forward(self, gid: str, device: str, values: Mapping[str, dict]) -> tuple[float, dict]:
        torch = self.torch
        target = self.mapping[device]
        module = self.modules[str(target)]
        leaves = {g: v["out"].detach().requires_grad_() for g, v in values.items()}
        parts = self.parts[gid]
        needed = self._needed_after(gid)
        env: dict[str, Any] = {}
        derived: dict[str, Any] = {}
        saved = self.saved
        saved.begin(derived, {storage_id(leaf) for leaf in leaves.values()})
        elapsed = 0.0
        with replay_rng(torch, self.rng, gid), torch.enable_grad(), saved.hooks():
            for j, name in enumerate(parts):
                node = self.fx[name]
                saved.at_part(name, activation(node, module) == "dropout")
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
                self.measure(device, [*env.values(), *derived.values(), *saved.pending_tensors()])
        out = env.pop(parts[-1])
        result = {"out": out.detach()}
        saved.classify(gid, device, result, out, values, gid in self.reads_self)
        self.records[gid] = self._record(target, out, leaves)
        for leaf in leaves.values():  # autograd's AccumulateGrad holds the leaf: empty it
            leaf.data = torch.empty(0, dtype=leaf.dtype, device=leaf.device)
        saved.end()
        return elapsed, result

    def _resolve(
        self,
        n: Any,
        env: dict[str, Any],
        derived: dict[str, Any],
        leaves: Mapping[str, Any],
        target: Any,
        gid: str,
    ) -> Any:
        """An fx argument of node ``gid``'s forward: computed here, an input's leaf, the batch,
        or a view (or size, attribute) evaluated from those; such a view, if it does not
        descend from ``gid``'s own fx nodes, is a view of the inputs (``derived``)."""

        def leaf(owner: str, name: str) -> Any:
            if owner == gid or owner not in leaves:
                raise ExecutorError(
                    f"node {gid!r} reads fx node {name!r} of {owner!r}, which is not one of "
                    "its inputs in the graph; import the model again (report this)"
                )
            return leaves[owner]

        def computed(node: Any, value: Any) -> None:
            if not any(a.name in self.parts[gid] for a in _ancestors_here(node, self.owner)):
                derived[node.name] = value

        return self._evaluate(n, env, target, leaf, computed)

    def _evaluate(
        self,
        n: Any,
        env: dict[str, Any],
        target: Any,
        owned: Callable[[str, str], Any],
        computed: Callable[[Any, Any], None] | None = None,
    ) -> Any:
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

    def _call(self, node: Any, args: Any, kwargs: Any, module: Any) -> Any:
        if activation(node, module) == "dropout":
            drop = _dropout_arguments(self.torch, node, args, kwargs, module)
            if drop is not None:
                return dropout(self.torch, *drop)
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
        raise ExecutorError(f"fx node {node.name!r} ({node.op}) cannot be run")

    def _in_place(
        self,
        node: Any,
        args: Any,
        kwargs: Any,
        env: Mapping[str, Any],
        needed: set[str],
        module: Any,
    ) -> Callable[[Any], Any] | None:
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
        if self.saved.saves_storage_of(args[0]):
            return None
        kind = activation(node, module)
        if kind == "relu":
            return torch.relu_
        if kind == "dropout":
            drop = _dropout_arguments(torch, node, args, kwargs, module)
            if drop is None:
                return None
            _, p, training, _ = drop
            return lambda t: dropout(torch, t, p, training, True)
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

    def _rederive(self, name: str, ctx: Mapping[str, Any]) -> Any:
        """Evaluate fx node ``name`` (views of inputs) again from the inputs resident on the
        backward's device."""
        with self.torch.no_grad():
            return self._evaluate(
                self.fx[name], {}, ctx["device"], lambda owner, _: ctx["inputs"][owner]["out"]
            )

    def _record(self, target: Any, out: Any, leaves: Mapping[str, Any]) -> _Record:
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
            raise ExecutorError(
                f"{gid} runs on {target}, but autograd's graph of {of} is on {record.device}; "
                "the schedule and the executor disagree (report this)"
            )
        kinds = {g: self.graph.node(g).kind for g in values}
        pieces = [v[of] for g, v in values.items() if kinds[g] != "forward" and of in v]
        start = clock(torch, target)
        incoming = self._sum(pieces, of, device, values, kinds)
        self.saved.context = {
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
            raise ExecutorError(
                f"{gid} needs {exc.args[0]!r}, which the graph does not give it (autograd "
                "saves more than the import says); report this"
            ) from None
        finally:
            self.saved.context = {}
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
        self.measure(device, [*result.values(), *extra])
        return elapsed, result

    def _sum(
        self,
        pieces: list[Any],
        of: str,
        device: str,
        values: Mapping[str, dict[str, Any]],
        kinds: Mapping[str, str],
    ) -> Any:
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

    def _shared(self, tensor: Any, owner: str) -> bool:
        """Whether another node's held tensors share ``tensor``'s storage."""
        sid = storage_id(tensor)
        for held in (*self.store.values(), self.copies):
            for gid, value in held.items():
                if gid != owner and any(storage_id(t) == sid for t in value.values()):
                    return True
        return False

    def close(self) -> None:
        """Drop every tensor and autograd graph now (a step keeps the whole training state)."""
        super().close()
        self.records.clear()
        self.held.clear()

    # ----- measuring -------------------------------------------------------------------------
    def measure(self, device: str, extra: Sequence[Any] = ()) -> None:
        """Raise ``peak[device]`` to what is held there now, with the running node's
        ``extra`` tensors (its live intermediates and what autograd saved so far)."""
        tensors = [t for held in self.store[device].values() for t in held.values()]
        tensors += [t for held in self.copies.values() for t in held.values()]
        tensors += [t for t in extra if t is not None]
        tensors += [t for where, kept in self.held.values() if where == device for t in kept]
        self.peak[device] = max(self.peak[device], self.held_bytes(tensors))

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


def _module_on(torch: Any, gm: Any, device: Any) -> Any:
    """A copy of ``gm`` whose parameters and buffers are made directly on ``device`` (not
    copied on the host first, then moved: that held a second host copy of every weight, and
    under ``FakeTensorMode`` a deep copy leaves the mode that the step runs in)."""
    memo: dict[int, Any] = {}
    for p in gm.parameters():
        memo[id(p)] = torch.nn.Parameter(p.detach().to(device), requires_grad=p.requires_grad)
    for b in gm.buffers():
        memo[id(b)] = b.to(device)
    return copy.deepcopy(gm, memo)


def _ancestors_here(node: Any, owner: Mapping[str, str]) -> Iterator[Any]:
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


def activation(node: Any, module: Any) -> str:
    """``relu``, ``dropout`` or ``""`` for an fx node (module, function or method)."""
    torch = require_torch("the schedule executor")
    if node.op == "call_module":
        sub = module.get_submodule(node.target)
        if type(sub) is torch.nn.ReLU:
            return "relu"
        return "dropout" if type(sub) is torch.nn.Dropout else ""
    name = str(node.target) if node.op == "call_method" else getattr(node.target, "__name__", "")
    return name if name in ("relu", "dropout") else ""


def _dropout_arguments(
    torch: Any, node: Any, args: Any, kwargs: Any, module: Any
) -> tuple[Any, float, bool, bool] | None:
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


def build(torch: Any, plan: FxPlan, seed: int) -> tuple[Any, Any]:
    """The model (train mode) and its one float input, drawn after seeding."""
    from solver.importers.torch_fx import load_factory

    torch.manual_seed(seed)
    model = load_factory(plan.spec)()
    model.train()
    x = torch.randn(plan.input_shape)
    return model, x


def _check_same_graph(plan: FxPlan, graph: Graph) -> None:
    from solver.importers.aten import structure_hash

    if structure_hash(graph) != structure_hash(plan.graph):
        raise ExecutorError(
            f"graph '{graph.name}' ({graph.n} nodes) is not the torch.fx import of {plan.spec} "
            f"at {'x'.join(map(str, plan.input_shape))}, level {plan.level} "
            f"({plan.graph.n} nodes); import it again with the same input shape and level, "
            "and solve on that file"
        )

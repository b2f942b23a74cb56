"""Measure every op of a torch module on the local CPU, forward and backward separately.

An ``fx.Interpreter`` runs the traced network on real tensors; at each compute node it times
the op without autograd (forward), then reruns it on leaf copies of its inputs and times
``torch.autograd.grad`` of its output (backward, gradients for the inputs that need one and for
the op's parameters). This is XEngine's "benchmark each primitive on each device" done with
torch. Times are the median of repeats of *thread CPU time* with torch
limited to one thread: on a shared machine wall clock was 2-5x inflated, CPU time was not.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager

from solver.errors import XEngineError
from solver.importers._deps import require_torch
from solver.importers.aten_capture import example_inputs
from solver.importers.aten_groups import GroupPlan, value_bytes
from solver.importers.costmodel import LOSS_KEY, OpTime
from solver.importers.ops import OpGraph

try:  # optional extra; the interpreter subclass below needs the base class at import time
    import torch
    from torch import fx
except ModuleNotFoundError:  # pragma: no cover - exercised in a subprocess test
    torch = fx = None

__all__ = [
    "available_memory",
    "measure_group_times",
    "median_cpu_ms",
    "profile_ops",
    "require_memory",
    "time_training_step",
]

logger = logging.getLogger(__name__)


def median_cpu_ms(fn: Callable[[], object], warmup: int = 1, repeats: int = 3) -> float:
    """Median thread CPU time of ``fn()`` in ms, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(max(repeats, 1)):
        start = time.thread_time_ns()
        fn()
        samples.append((time.thread_time_ns() - start) / 1e6)
    return statistics.median(samples)


@contextmanager
def _threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def profile_ops(
    graph: OpGraph,
    *,
    warmup: int = 1,
    repeats: int = 3,
    threads: int = 1,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, OpTime]:
    """Forward and backward ms of every op of ``graph`` (built from ``graph.source``).

    The module is built again with real weights on the CPU and traced; fx names nodes
    deterministically, so the names match those of ``graph``.
    """
    require_torch("measured costs")
    source = graph.source
    torch.manual_seed(0)
    model = source.factory().train()
    gm = fx.symbolic_trace(model)
    wanted = {op.name for op in graph.ops}
    profiler = _OpProfiler(gm, wanted, warmup, repeats, on_progress)
    example = torch.randn(source.input_shape)
    with _threads(threads), torch.no_grad():
        output = profiler.run(example)
    missing = wanted - set(profiler.times)
    if missing:
        logger.warning(
            "no timing for %d ops (e.g. %s); counted as 0", len(missing), sorted(missing)[0]
        )
    times = {name: profiler.times.get(name, OpTime(0.0, 0.0)) for name in wanted}
    with _threads(threads):
        _add_fan_out(graph, times, warmup, repeats)
        times[LOSS_KEY] = OpTime(_loss_ms(output, warmup, repeats), 0.0)
    return times


def _add_fan_out(graph: OpGraph, times: dict[str, OpTime], warmup: int, repeats: int) -> None:
    """Charge gradient accumulation to the producer of a tensor with several consumers.

    Autograd sums the incoming gradients (one add per extra consumer) before it runs the
    producer's backward; no single op's measurement contains that work.
    """
    for name, users in graph.users().items():
        if len(users) > 1:
            op = graph.op(name)
            a, b = torch.randn(op.shape), torch.randn(op.shape)
            ms = median_cpu_ms(lambda a=a, b=b: a + b, warmup, repeats) * (len(users) - 1)
            times[name] = OpTime(times[name].forward_ms, times[name].backward_ms + ms)


def _loss_ms(output, warmup: int, repeats: int) -> float:
    """Cross-entropy forward + gradient of the logits (what the loss node produces)."""
    logits = output.detach().requires_grad_(True)
    target = torch.zeros((logits.shape[0], *logits.shape[2:]), dtype=torch.long)

    def step():
        loss = torch.nn.functional.cross_entropy(logits, target)
        torch.autograd.grad(loss, logits)

    return median_cpu_ms(step, warmup, repeats)


class _OpProfiler(fx.Interpreter if fx is not None else object):
    """Runs the graph, timing every call node; a view's time goes to the op that owns it.

    Views get no node of their own, but some copy (``reshape`` of a transposed tensor), so
    their time is charged to the op they are folded into. ``owner`` maps ``id(tensor)`` to
    that op, ``None`` for the graph input and its views (no gradient flows into the image).
    """

    def __init__(self, gm, wanted, warmup, repeats, on_progress) -> None:
        super().__init__(gm)
        self.wanted, self.warmup, self.repeats = wanted, warmup, repeats
        self.on_progress = on_progress
        self.times: dict[str, OpTime] = {}
        self.owner: dict[int, str | None] = {}

    def placeholder(self, target, args, kwargs):
        value = super().placeholder(target, args, kwargs)
        self.owner[id(value)] = None
        return value

    def run_node(self, n):
        if n.op not in ("call_module", "call_function", "call_method"):
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        owners = [self.owner.get(id(t), "") for t in _tensors([args, kwargs])]
        owner = n.name if n.name in self.wanted else next((o for o in owners if o), None)
        call = getattr(self, n.op)
        value = None if n.name in self.wanted else call(n.target, args, kwargs)
        if value is not None and _shares_storage(value, args):
            owner = None  # a true view: metadata only, nothing to time
        if owner is not None:
            forward_ms, backward_ms, value = self._measure(n, call, args, kwargs)
            before = self.times.get(owner, OpTime(0.0, 0.0))
            self.times[owner] = OpTime(
                before.forward_ms + forward_ms, before.backward_ms + backward_ms
            )
        for t in [value, *_tensors(value)]:
            self.owner[id(t)] = owner
        if n.name in self.wanted and self.on_progress is not None:
            self.on_progress(len(self.times), len(self.wanted), n.name)
        return value

    def _needs_grad(self, a) -> bool:
        """Floating tensors made by ops get gradients; the image and its views do not."""
        return (
            torch.is_tensor(a) and a.is_floating_point() and self.owner.get(id(a), "") is not None
        )

    def _measure(self, n, call, args, kwargs):
        """Forward as in training (grad mode, recording what the backward needs), then backward."""
        leaves: dict[int, object] = {}

        def leaf(a):
            if self._needs_grad(a):
                if id(a) not in leaves:
                    leaves[id(a)] = a.detach().requires_grad_(True)
                return leaves[id(a)]
            return a

        grad_args = fx.node.map_aggregate(args, leaf)
        if _in_place(n, self.module):  # a leaf cannot be changed in place: give it a copy
            copies = {id(t) for t in leaves.values()}
            base = grad_args

            def fresh():
                return fx.node.map_aggregate(base, lambda a: a.clone() if id(a) in copies else a)
        else:

            def fresh():
                return grad_args

        params = []
        if n.op == "call_module":
            params = [p for p in self.module.get_submodule(n.target).parameters()]
        params += [a for a in args if isinstance(a, torch.nn.Parameter)]
        with torch.enable_grad():
            forward_ms = median_cpu_ms(
                lambda: call(n.target, fresh(), kwargs), self.warmup, self.repeats
            )
            out = call(n.target, fresh(), kwargs)
        outs = [
            t
            for t in (out if isinstance(out, tuple | list) else [out])
            if torch.is_tensor(t) and t.requires_grad
        ]
        wrt = [t for t in [*leaves.values(), *params] if t.requires_grad]
        if not outs or not wrt:
            return forward_ms, 0.0, _detach(out)
        grads = [torch.randn_like(t) for t in outs]
        ms = median_cpu_ms(
            lambda: torch.autograd.grad(outs, wrt, grads, retain_graph=True, allow_unused=True),
            self.warmup,
            self.repeats,
        )
        return forward_ms, ms, _detach(out)


def _in_place(n, module) -> bool:
    """In-place ops cannot run on a leaf that requires grad; they get a copy of it."""
    if n.kwargs.get("inplace"):
        return True
    return n.op == "call_module" and bool(getattr(module.get_submodule(n.target), "inplace", 0))


def _shares_storage(value, args) -> bool:
    """Whether every tensor of ``value`` aliases the storage of some input tensor."""
    inputs = {t.untyped_storage().data_ptr() for t in _tensors(args)}
    outs = _tensors(value)
    return bool(outs) and all(t.untyped_storage().data_ptr() in inputs for t in outs)


def _tensors(value) -> list:
    if torch.is_tensor(value):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    return []


def _detach(value):
    if torch.is_tensor(value):
        return value.detach()
    if isinstance(value, tuple | list):
        return type(value)(_detach(v) for v in value)
    return value


def time_training_step(
    graph: OpGraph, *, warmup: int = 2, repeats: int = 5, threads: int = 1
) -> tuple[float, float]:
    """Median thread CPU ms of a real forward and of a real forward + backward step.

    The reference the per-op sums are checked against: the same module and input as
    :func:`profile_ops`, gradients set to ``None`` before each step (``zero_grad``'s default).
    """
    require_torch("measured costs")
    torch.manual_seed(0)
    model = graph.source.factory().train()
    example = torch.randn(graph.source.input_shape)

    def forward():
        with torch.no_grad():
            model(example)

    def step():
        for p in model.parameters():
            p.grad = None
        out = model(example)
        out.backward(torch.ones_like(out))

    with _threads(threads):
        return median_cpu_ms(forward, warmup, repeats), median_cpu_ms(step, warmup, repeats)


def available_memory() -> int | None:
    """Bytes of memory this machine can give now (``MemAvailable``), or ``None`` if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def require_memory(needed: int, doing: str) -> None:
    """Refuse, before anything is allocated, work that needs more memory than is available.

    Raises
    ------
    XEngineError
        One line with both sizes and what to do instead.
    """
    from solver.document.units import format_size

    have = available_memory()
    if have is not None and needed > have:
        raise XEngineError(
            f"{doing} needs about {format_size(needed)} of memory, and this machine has "
            f"{format_size(have)} available; use a smaller input (batch) or the roofline cost "
            "model (--cost roofline), which runs nothing"
        )


# ----- ATen imports ----------------------------------------------------------------------------
def measure_group_times(plan: GroupPlan, *, warmup: int = 1, repeats: int = 3) -> dict[str, float]:
    """Milliseconds of every node of an ATen import on this CPU.

    The captured joint graph runs op by op on real tensors (the model built with seed 0, its
    inputs drawn as the import and the executors draw them), and each ATen op's thread CPU time
    is charged to the node that owns it: the ops a schedule's operation runs for that node.
    Median of ``repeats`` runs after ``warmup``, one torch thread; a node whose ops take no
    time (views only) gets 0.
    """
    require_torch("measured costs")
    capture = plan.capture
    nodes = capture.gm.graph.nodes
    require_memory(sum(value_bytes(n) for n in nodes), "measuring the step op by op")
    torch.manual_seed(0)
    model = capture.factory()
    model.train()
    xs = example_inputs(torch, capture.inputs or capture.input_shape)
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    values = [*xs, *(params[name].detach() for name in capture.param_names)]
    samples: dict[str, list[float]] = {g.id: [] for g in plan.groups}
    with _threads(1), torch.no_grad():
        for run in range(warmup + max(repeats, 1)):
            timer = _GroupTimer(capture.gm, plan.owner)
            timer.run(*values, *(buffers[name].clone() for name in capture.buffer_names))
            if run >= warmup:
                for gid, times in samples.items():
                    times.append(timer.ms.get(gid, 0.0))
    return {gid: statistics.median(times) for gid, times in samples.items()}


class _GroupTimer(fx.Interpreter if fx is not None else object):
    """Runs a joint graph, adding each ATen op's thread CPU time to its owning node."""

    def __init__(self, gm, owner) -> None:
        super().__init__(gm, garbage_collect_values=False)  # a step that keeps everything
        self.owner = owner
        self.ms: dict[str, float] = {}

    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        start = time.thread_time_ns()
        value = super().run_node(n)
        elapsed = (time.thread_time_ns() - start) / 1e6
        owner = self.owner.get(n.name)
        if owner is not None:
            self.ms[owner] = self.ms.get(owner, 0.0) + elapsed
        return value

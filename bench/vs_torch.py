"""Side by side with PyTorch's own answer: the min-cut partitioner under a memory budget.

PyTorch's ``torch._functorch.config.activation_memory_budget`` (0 to 1) makes the partitioner of
``torch.compile`` save fewer activations and recompute the rest, choosing by a knapsack over
the saved tensors; the ``aot_eager_decomp_partition`` backend runs that partitioner without a
compiler, so the step is the same ATen ops, eagerly, on this CPU. Ours: a one-device schedule
(``checkmate:cpu``, the MILP) of the same model's imported graph, saving at most what torch
saved at each of its budgets (or, ``--ours peak``, at a sweep of peak budgets), applied
in PyTorch by its selective-checkpointing policy (``torch.utils.checkpoint`` with the policy
``solver.executors.sac_policy`` writes). Both are measured on the same step, not predicted:

* **saved**: bytes of the distinct storages held for the backward when the forward ends, the
  parameters, buffers and inputs left out. torch: every tensor the compiled function saves
  (saved-tensor hooks); ours: every tensor the checkpoint's cache holds (the outputs of the ops
  the policy saves), as SAC keeps nothing else;
* **recompute GFLOP**: FlopCounterMode's FLOPs of the whole step minus those of a plain eager
  step (matmuls and convolutions: pointwise ops count 0 there; torch's counted inside its
  compiled graphs, see ``_counted_partition``);
* **step ms**: median thread CPU time of the step (one torch thread), and its excess over the
  plain eager step.

A point of one front *dominates* a point of the other when it saves no more bytes and
recomputes no more FLOPs (one of them strictly less). For each model the bench prints both
fronts and a verdict, fronts against fronts: "ours dominates" when a point of ours matches or
dominates every point of torch's front; else "torch better at" the torch points that
dominate a point of our front, or "unmatched at" those that none of ours covers while none
beats ours (fewer recomputed FLOPs, a few bytes more saved).

Every torch point's gradients are checked against torch's own step at budget 1.0 under the
same seed. Below 1.0 the partitioner may recompute dropout's random draw in the backward with
fresh randomness (pytorch/pytorch#190758, open): the backward then applies another mask than
the forward did and the gradients are wrong. Such points are shown (crosses in the plot,
"wrong" in the table) and named in the verdict, but they take no part in it: saving less by
recomputing a draw is no schedule of the step. Ours replays the very draw and is refused unless
its gradients equal ``loss.backward()``'s. ``--dropout off`` sets every ``nn.Dropout``'s p to 0,
for a side by side on a step without random ops. It writes
``bench/vs_torch-MODEL.png`` (both fronts: saved MiB against recompute GFLOP and against step
ms), and ``--markdown`` prints the table of bench/README.md. Needs torch, and torchvision /
transformers for their models.

    .venv/bin/python bench/vs_torch.py [--models resnet18 gpt2 ...] [--time-limit 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

import solver
from solver.errors import XEngineError
from solver.importers.aten_capture import example_inputs, loss_of
from solver.importers.corpus import CORPUS
from solver.optimize.bounds import lower_bound, no_remat_peak

DEFAULT_MODELS = ("resnet18", "mobilenet_v2", "vgg11_bn", "gpt2", "bert", "vit")
TORCH_BUDGETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""torch's activation_memory_budget values. Ours (``--ours saved``, the default): each torch
point's measured saved bytes as our saved-bytes limit (``imported.solve(saved=...)``: the bytes
resident when the backward starts), the peak unbounded. ``--ours peak``: the same fractions of
the way from the least memory any schedule needs (``lower_bound``) to the no-rematerialization
peak, and 0 (that least memory), as a bound on the step's peak."""
HERE = Path(__file__).resolve().parent
GRADIENT_TOLERANCE = 1e-5
"""Relative gradient difference under which a torch point counts as computing the step's
gradients (the recomputed ops are the forward's own, so a right point differs by 0)."""
RNG_BUG = "pytorch/pytorch#190758"
"""The partitioner recomputes random ops (dropout's draw) in the backward below budget 1.0:
the backward's mask is a fresh draw, not the forward's, and the gradients are wrong."""


@dataclass(frozen=True)
class Point:
    """One measured step: who chose it, at which budget, and what it saved and recomputed."""

    who: str
    budget: float
    saved: int
    flops: int
    ms: float
    grad_error: float = 0.0
    """torch's points: the largest gradient difference to torch's own step at budget 1.0 under
    the same seed, relative to that step's largest gradient (0: equal). Ours are checked
    against ``loss.backward()`` and refused if they differ."""

    @property
    def gradients_right(self) -> bool:
        return self.grad_error <= GRADIENT_TOLERANCE

    def dominates(self, other: Point, base_flops: int) -> bool:
        a, b = (self.saved, self.flops - base_flops), (other.saved, other.flops - base_flops)
        return a[0] <= b[0] and a[1] <= b[1] and a != b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=CORPUS)
    parser.add_argument("--time-limit", type=float, default=20.0, help="per solve, seconds")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per point")
    parser.add_argument(
        "--budgets",
        nargs="+",
        type=float,
        default=list(TORCH_BUDGETS),
        help="torch's activation_memory_budget values, and ours as fractions",
    )
    parser.add_argument(
        "--level",
        choices=("layer", "op"),
        default="layer",
        help="our import's level (op: pointwise ops are nodes of their own)",
    )
    parser.add_argument(
        "--ours",
        choices=("saved", "peak"),
        default="saved",
        help="what our budget bounds: the bytes saved for the backward (at each torch "
        "point's measured saved bytes, peak unbounded) or the step's peak",
    )
    parser.add_argument(
        "--objective",
        choices=("time", "flops"),
        default="time",
        help="what our MILP minimizes: the imported graph's estimated time, or FLOPs "
        "(the recompute this bench measures; pointwise ops almost free)",
    )
    parser.add_argument(
        "--tie-break",
        type=float,
        default=1e-3,
        help="--objective flops: a second solve adds each node's estimated ms times this to "
        "its GFLOPs, and its plan is kept where it recomputes no more FLOPs than the plan of "
        "FLOPs alone (0: that one solve only)",
    )
    parser.add_argument(
        "--apply",
        choices=("executor", "sac"),
        default="executor",
        help="how our schedule runs: by the schedule executor (each op of the captured step "
        "in the schedule's order, freed where the schedule frees: what the schedule itself "
        "saves) or by PyTorch's selective checkpointing with the exported policy (what a "
        "user's own training loop runs; SAC keeps every op it does not recompute)",
    )
    parser.add_argument(
        "--masks",
        choices=("bool", "float"),
        default="bool",
        help="our import's dropout masks: bool tensors, as torch's partitioner saves them, or "
        "eager's float ones (forced by --apply sac: eager PyTorch runs the policy)",
    )
    parser.add_argument(
        "--dropout",
        choices=("on", "off"),
        default="on",
        help="off: every nn.Dropout's p set to 0 before both import and compile, so both "
        "answer for a step without random ops (torch's partitioner recomputes dropout's draw "
        f"with fresh randomness below budget 1.0, {RNG_BUG})",
    )
    parser.add_argument("--markdown", action="store_true", help="print bench/README.md's table")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    rows = []
    for name in args.models:
        rows.append(compare(name, args))
    print()
    print(table(rows) if args.markdown else "\n".join(summary_line(r) for r in rows))
    return 0


def compare(name: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = CORPUS[name]
    torch.manual_seed(0)
    model = spec.factory()
    model.train()
    if args.dropout == "off":
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    xs = example_inputs(torch, spec.inputs)
    fixed = {_sid(t) for t in (*model.parameters(), *model.buffers(), *xs)}
    eager = Point("eager", 1.0, _saved_by_hooks(model, xs, fixed), *_flops_and_ms(model, xs, args))
    print(
        f"{name}: eager step saves {_mib(eager.saved)}, {eager.flops / 1e9:.3f} GFLOP, "
        f"{eager.ms:.1f} ms",
        flush=True,
    )
    reference = _torch_gradients(model, xs, 1.0)
    theirs = [_torch_point(model, xs, fixed, b, args, reference) for b in args.budgets]
    for p in theirs:
        print(
            f"  torch {p.budget:.1f}: saves {_mib(p.saved)} ({p.saved} B), "
            f"+{_gf(p, eager)} GFLOP ({p.flops - eager.flops} FLOP), {p.ms:.1f} ms, "
            f"{_gradients(p)}",
            flush=True,
        )
    ours, failed = _our_points(name, model, xs, fixed, args, eager, theirs)
    # A torch point whose gradients are wrong is no training step: it is shown, and named,
    # but neither beats nor goes unmatched by ours (which must be right to be measured).
    wrong = [p for p in theirs if not p.gradients_right]
    right = [p for p in theirs if p.gradients_right]
    fronts = {"torch": _front(right, eager.flops), "ours": _front(ours, eager.flops)}
    beaten = [
        t
        for t in fronts["torch"]
        if not any(o.dominates(t, eager.flops) or _same(o, t) for o in ours)
    ]
    # Fronts against fronts: a point of ours that another of ours dominates (a looser limit
    # that keeps more bytes for the same recompute) is no part of what we offer.
    better = [
        t for t in fronts["torch"] if any(t.dominates(o, eager.flops) for o in fronts["ours"])
    ]
    if not args.no_plot:
        _plot(name, theirs, ours, eager)
    return {
        "name": name,
        "eager": eager,
        "torch": theirs,
        "ours": ours,
        "failed": failed,
        "fronts": fronts,
        "unmatched": beaten,
        "torch_better": better,
        "torch_wrong": wrong,
    }


# ----- torch's partitioner -----------------------------------------------------------------
def _torch_point(model, xs, fixed, budget: float, args, reference) -> Point:
    compiled = _compiled(model, xs, budget)
    error = _relative_error(_seeded_gradients(model, compiled, xs), reference)
    saved = _saved_by_hooks(compiled, xs, fixed)
    _COUNTED[:] = [True, 0]
    loss_of(compiled(*xs)).backward()
    flops = _COUNTED[1]
    _COUNTED[:] = [False, 0]
    _, ms = _flops_and_ms(compiled, xs, args)
    return Point("torch", budget, saved, flops, ms, error)


def _compiled(model, xs, budget: float):
    """``model`` compiled by ``_counted_partition`` at ``budget``, its first step run."""
    import torch._functorch.config as functorch_config

    torch._dynamo.reset()
    functorch_config.activation_memory_budget = budget
    compiled = torch.compile(model, backend=_counted_partition)
    loss_of(compiled(*xs)).backward()  # compile
    model.zero_grad(set_to_none=True)
    return compiled


def _torch_gradients(model, xs, budget: float) -> dict[str, Any]:
    """The gradients of torch's step at ``budget`` under a fixed seed: at 1.0 the partitioner
    bans recomputing random ops, so these are the gradients of the forward it ran."""
    return _seeded_gradients(model, _compiled(model, xs, budget), xs)


def _seeded_gradients(model, step, xs) -> dict[str, Any]:
    torch.manual_seed(1234)  # the same draws in every forward
    loss_of(step(*xs)).backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def _relative_error(grads: dict[str, Any], reference: dict[str, Any]) -> float:
    scale = max(float(g.abs().max()) for g in reference.values()) or 1.0
    if grads.keys() != reference.keys():
        return float("inf")
    return max(float((grads[k] - g).abs().max()) for k, g in reference.items()) / scale


def _gradients(p: Point) -> str:
    if p.who != "torch":
        return "equal to loss.backward()"
    return "equal" if p.gradients_right else f"wrong (relative error {p.grad_error:.2g})"


#: [counting?, FLOPs so far] of the compiled graphs (forward and backward) of the step.
_COUNTED: list[Any] = [False, 0]


def _counted_partition(gm, fake_inputs, **kwargs):
    """``aot_eager_decomp_partition`` (the same decompositions and min-cut partitioner, the
    graphs run eagerly) whose graphs count their FLOPs while ``_COUNTED[0]`` is set: under a
    FlopCounterMode entered around a compiled call, dynamo runs the model eagerly instead, and
    a count of that is the eager step's, whatever the partitioner recomputes."""
    import torch._functorch.config as functorch_config
    from functorch.compile import min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.compile_fx import select_decomp_table

    def compiler(graph, example_inputs):
        def run(args):
            if not _COUNTED[0]:
                return graph(*args)
            with FlopCounterMode(display=False) as counter:
                out = graph(*args)
            _COUNTED[1] += counter.get_total_flops()
            return out

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    with functorch_config.patch({"unlift_effect_tokens": True}):
        return aot_autograd(
            fw_compiler=compiler,
            bw_compiler=compiler,
            decompositions=select_decomp_table(),
            partition_fn=min_cut_rematerialization_partition,
        )(gm, fake_inputs)


def _saved_by_hooks(fn, xs, fixed: set[int]) -> int:
    seen: dict[int, int] = {}

    def pack(t):
        if _sid(t) not in fixed:
            seen[_sid(t)] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(fn(*xs))  # the loss's own saved tensors too: our graph holds them
    loss.backward()
    return sum(seen.values())


# ----- ours --------------------------------------------------------------------------------
def _our_points(name, model, xs, fixed, args, eager, theirs) -> tuple[list[Point], list[str]]:
    started = time.perf_counter()
    masks = "float" if args.apply == "sac" else args.masks
    imported = solver.import_model(model, tuple(xs), level=args.level, dropout_masks=masks)
    print(f"  imported {imported.graph.n} nodes in {time.perf_counter() - started:.1f} s")
    candidates = [imported]
    if args.objective == "flops":
        raw = imported.graph
        candidates = [replace(imported, graph=_flop_costs(raw, 0.0))]
        if args.tie_break:
            candidates.append(replace(imported, graph=_flop_costs(raw, args.tie_break)))
    graph = candidates[0].graph
    points, failed = [], []
    for budget, limits in _our_budgets(graph, args, theirs):
        try:
            plan = _flops_first(candidates, limits, args)
        except XEngineError as exc:
            failed.append(f"{budget:.1f}: {str(exc)[:120]}")
            print(f"  ours {budget:.1f}: {str(exc)[:150]}", flush=True)
            continue
        try:
            if args.apply == "executor":
                point = _executed_point(plan, model, xs, budget, args)
            else:
                point = _sac_point(plan, model, xs, fixed, budget, args)
        except RuntimeError as exc:  # the policy met other ops than the capture recorded
            failed.append(f"{budget:.1f}: {str(exc)[:160]}")
            print(f"  ours {budget:.1f}: {str(exc)[:160]}", flush=True)
            continue
        points.append(point)
        modelled = plan.timeline.saved_bytes.get("cpu", 0)
        print(
            f"  ours {budget:.1f}: saves {_mib(point.saved)} ({point.saved} B; model: "
            f"{modelled} B), +{_gf(point, eager)} GFLOP ({point.flops - eager.flops} FLOP), "
            f"{point.ms:.1f} ms ({plan.result.status.value}, "
            f"{plan.timeline.recomputations} recomputations)",
            flush=True,
        )
    return points, failed


def _sac_point(plan, model, xs, fixed: set[int], budget: float, args) -> Point:
    """``--apply sac``: the plan's policy under ``torch.utils.checkpoint``; saved is what
    the checkpoint's cache holds when the forward ends."""
    context = plan.context_fn(lean=True)
    caches: list[Any] = []

    def recording():
        pair = context()
        caches.append(pair[0])
        return pair

    def step(*inputs):
        return checkpoint(model, *inputs, use_reentrant=False, context_fn=recording)

    saved = _saved_by_cache(step, xs, fixed, caches)
    return Point("ours", budget, saved, *_flops_and_ms(step, xs, args))


def _executed_point(plan, model, xs, budget: float, args) -> Point:
    """``--apply executor``: the step run by the schedule executor, every op of the captured
    step on real tensors in the schedule's order; saved is what it holds when the backward
    starts (measured: the distinct storages, as the hooks count torch's), recompute and time
    as for torch (the time includes the executor's Python walk, op by op). The gradients are
    checked against a plain ``loss.backward()``."""
    from solver.executors import harness
    from solver.executors.aten_runtime import run_schedule

    graph = plan.graph
    mapping = {d.name: torch.device("cpu") for d in graph.devices}
    reference = harness.reference_gradients(torch, model, xs, 0)

    def run():
        return run_schedule(
            torch, plan.model.plan, plan.schedule, plan.timeline, mapping, model, xs, graph=graph
        )[0]

    with FlopCounterMode(display=False) as counter:
        runtime = run()
    match, error = harness.compare_gradients(torch, runtime.gradients(), reference)
    if not match:
        raise RuntimeError(f"the executed step's gradients differ (max abs {error:.3g})")
    saved = runtime.boundary_bytes.get("cpu", 0)
    runtime.close()
    samples = []
    for _ in range(max(args.repeats, 1)):
        start = time.thread_time_ns()
        run().close()
        samples.append((time.thread_time_ns() - start) / 1e6)
    return Point("ours", budget, saved, int(counter.get_total_flops()), statistics.median(samples))


def _flops_first(candidates, limits, args):
    """The plan of the first candidate (FLOPs alone), or of the second (FLOPs plus a time
    tie-break) where that recomputes no more FLOPs by its model: FLOPs first, time second.

    One solve cannot order the two (``_flop_costs``): FLOPs alone leave free ops recomputed
    at random (MobileNet-v2 at torch's 0.3 bytes: 1,562 recomputations, 0.96 s a step), a tie-break
    large enough to matter outweighs FLOPs. Raises the last candidate's error if none solves."""
    best, error = None, None
    for imported in candidates:
        try:
            plan = imported.solve(
                gpu=None, method="checkmate:cpu", time_limit=args.time_limit, **limits
            )
        except XEngineError as exc:
            error = exc
            continue
        if best is None or _recomputed_flops(plan) <= _recomputed_flops(best):
            best = plan
    if best is None:
        assert error is not None
        raise error
    return best


def _recomputed_flops(plan) -> float:
    graph = plan.graph
    return sum(graph.node(e.node).flops or 0.0 for e in plan.timeline.ops if e.recompute)


def _flop_costs(graph, tie_break: float):
    """The graph with each node's cost its GFLOPs (as if 1 GFLOP took 1 ms), plus
    ``tie_break`` times its estimated time: the MILP minimizes the recompute FLOPs this bench
    measures, pointwise ops (0 FLOPs) free, as in torch's partitioner.

    No tie-break is both: a thousandth of the estimated time (the only objective before
    2026-12-04) weighs more than the FLOPs it should only order (MobileNet-v2, dropout off,
    at torch's 0.3 bytes: 5,449,728 recomputed FLOPs with it, 5,426,688 proven optimal without,
    torch's own figure), and with 1e-4 to 1e-7 CBC ended at 5,435,904-5,449,728 in 30 s.
    Hence two solves (:func:`_flops_first`)."""
    nodes = tuple(
        replace(
            n,
            cost={d: (n.flops or 0.0) / 1e9 + tie_break * ms for d, ms in n.cost.items()},
        )
        for n in graph.nodes
    )
    return replace(graph, nodes=nodes)


def _our_budgets(graph, args, theirs: list[Point]) -> list[tuple[float, dict[str, Any]]]:
    """``imported.solve`` limits per point of ours, labelled by torch's budget.

    ``--ours saved`` (the default): at each torch point's measured saved bytes, the peak
    unbounded, so both answer "recompute least while saving at most this much". ``--ours
    peak``: peak budgets the same fractions of the way from the least memory any schedule
    needs (``lower_bound``) to the no-rematerialization peak, and 0 (that least memory)."""
    if args.ours == "saved":
        return [(p.budget, {"cpu": None, "saved": {"cpu": p.saved}}) for p in theirs]
    low, high = lower_bound(graph, "cpu"), no_remat_peak(graph)
    fixed_memory = graph.device("cpu").fixed_memory
    return [
        (budget, {"cpu": fixed_memory + int(low + budget * (high - low))})
        for budget in (0.0, *args.budgets)
    ]


def _saved_by_cache(step, xs, fixed: set[int], caches: list) -> int:
    caches.clear()
    out = step(*xs)
    seen: dict[int, int] = {}
    for entries in caches[-1].storage.values():
        for wrapped in entries.values():
            for t in _tensors(getattr(wrapped, "val", wrapped)):
                if _sid(t) not in fixed:
                    seen[_sid(t)] = t.untyped_storage().nbytes()

    def pack(t):  # what the loss saves (the model's output), as for torch
        if _sid(t) not in fixed:
            seen[_sid(t)] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(out)
    loss.backward()
    return sum(seen.values())


# ----- measuring ---------------------------------------------------------------------------
def _flops_and_ms(fn, xs, args) -> tuple[int, float]:
    with FlopCounterMode(display=False) as counter:
        loss_of(fn(*xs)).backward()
    samples = []
    for _ in range(max(args.repeats, 1)):
        start = time.thread_time_ns()
        loss_of(fn(*xs)).backward()
        samples.append((time.thread_time_ns() - start) / 1e6)
    return int(counter.get_total_flops()), statistics.median(samples)


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


def _sid(t) -> int:
    return int(t.untyped_storage()._cdata)


def _front(points: list[Point], base: int) -> list[Point]:
    return sorted(
        (p for p in points if not any(q.dominates(p, base) for q in points)),
        key=lambda p: (p.saved, p.flops),
    )


def _same(a: Point, b: Point) -> bool:
    return a.saved == b.saved and a.flops == b.flops


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _gf(p: Point, eager: Point) -> str:
    return f"{(p.flops - eager.flops) / 1e9:.3f}"


# ----- output ------------------------------------------------------------------------------
def summary_line(row: dict[str, Any]) -> str:
    if not row["ours"]:
        return f"{row['name']}: no point of ours ({len(row['failed'])} budget(s) failed)"
    if row["torch_better"]:
        verdict = f"torch better at {len(row['torch_better'])} point(s): " + ", ".join(
            f"{p.budget:.1f}" for p in row["torch_better"]
        )
    elif row["unmatched"]:  # no torch point beats one of ours, but ours do not cover it
        verdict = "no torch point better; unmatched at " + ", ".join(
            f"{p.budget:.1f}" for p in row["unmatched"]
        )
    else:
        verdict = "ours dominates"
    if row["torch_wrong"]:
        verdict += "; torch's gradients wrong at " + ", ".join(
            f"{p.budget:.1f}" for p in row["torch_wrong"]
        )
    return f"{row['name']}: {verdict}; ours failed at {len(row['failed'])} budget(s)"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | who | budget | saved MiB | recompute GFLOP | step ms | gradients |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        eager = row["eager"]
        lines.append(
            f"| {row['name']} | eager | - | {eager.saved / 2**20:.2f} | 0 | {eager.ms:.1f} | - |"
        )
        for p in [*row["torch"], *row["ours"]]:
            lines.append(
                f"| {row['name']} | {p.who} | {p.budget:.1f} | {p.saved / 2**20:.2f} | "
                f"{(p.flops - eager.flops) / 1e9:.3f} | {p.ms:.1f} | {_gradients(p)} |"
            )
    lines.append("")
    lines += [f"- {summary_line(row)}" for row in rows]
    return "\n".join(lines)


def _plot(name: str, theirs: list[Point], ours: list[Point], eager: Point) -> None:
    """Both fronts in one PNG, written by pyqtgraph offscreen (no new dependency)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    import pyqtgraph.exporters
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    window = pg.GraphicsLayoutWidget(size=(1100, 450))
    window.setBackground("w")
    window.show()  # laid out at its full width before the export (offscreen: nothing shown)
    for column, (what, value) in enumerate(
        (("recompute GFLOP", lambda p: (p.flops - eager.flops) / 1e9), ("step ms", lambda p: p.ms))
    ):
        plot = window.addPlot(row=0, col=column, title=f"{name}: saved MiB vs {what}")
        plot.setMinimumWidth(520)
        plot.addLegend(offset=(-10, 10))  # top right: the fronts fall from the top left
        plot.setLabel("bottom", "saved for the backward (MiB)")
        plot.setLabel("left", what)
        for side in ("left", "bottom"):  # GFLOP as GFLOP and MiB as MiB, not "(x0.001)"
            plot.getAxis(side).enableAutoSIPrefix(False)
        for points, colour, label, symbol in (
            ([p for p in theirs if p.gradients_right], "#d62728", "torch partitioner", "o"),
            (
                [p for p in theirs if not p.gradients_right],
                "#d62728",
                "torch, gradients wrong",
                "x",
            ),
            (ours, "#1f77b4", "ours (checkmate:cpu)", "o"),
        ):
            if not points:
                continue
            pts = sorted(points, key=lambda p: p.saved)
            plot.plot(
                [p.saved / 2**20 for p in pts],
                [value(p) for p in pts],
                pen=pg.mkPen(colour, width=2) if symbol == "o" else None,
                symbol=symbol,
                symbolSize=12 if symbol == "x" else 10,
                symbolPen=pg.mkPen(colour),
                symbolBrush=colour,
                name=label,
            )
    with contextlib.suppress(Exception):
        app.processEvents()
    exporter = pyqtgraph.exporters.ImageExporter(window.scene())
    exporter.parameters()["width"] = 1100
    exporter.export(str(HERE / f"vs_torch-{name}.png"))


if __name__ == "__main__":
    raise SystemExit(main())

"""Apply a one-device schedule in PyTorch: a selective activation checkpointing policy.

``torch.utils.checkpoint.create_selective_checkpoint_contexts`` asks a policy, for every ATen
op of the checkpointed forward, whether to save its output (``MUST_SAVE``) or to recompute it
in the backward (``PREFER_RECOMPUTE``). The policy written here answers by the op's position in
the forward: the ops of the nodes the schedule recomputes are recomputed, every other op's
output is saved, i.e. exactly the schedule's checkpoints. The positions come from the same
capture the graph was imported from (the forward ops of the joint graph, in order); the policy
checks each op's name against the capture and stops with an error if the model runs other ops.

SAC recomputes an op at most once per backward; a schedule that recomputes a node several
times becomes "recompute it once". Random ops (dropout masks) are always saved: checkpointing
replays the generator from the start of the region, so a recomputed mask after a saved one
would differ from the original. Use it as::

    from torch.utils.checkpoint import checkpoint
    from policy import context_fn
    loss = loss_fn(checkpoint(model, x, use_reentrant=False, context_fn=context_fn))
"""

from __future__ import annotations

import json
import operator
import os

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.errors import XEngineError
from solver.execution.simulate import check_schedule, effective_graph
from solver.importers.aten_capture import node_tag
from solver.importers.aten_groups import GroupPlan

__all__ = [
    "forward_ops",
    "storage_owners",
    "random_positions",
    "recomputed_nodes",
    "policy_source",
    "unread_free_positions",
    "write_policy",
]

#: Ops autograd itself adds while tracing (a saved output is detached); SAC never sees them in
#: some runs and sees them in others, so the policy skips them without counting.
_UNCOUNTED = ("aten.detach.default",)
#: Ops of a data-dependent check that a fake-tensor capture cannot trace (so takes another
#: branch): Hugging Face's mask utilities read ``padding_mask.sum() == numel`` eagerly, and
#: skip the read when tracing (``is_tracing`` is true for fake tensors). Outside the capture's
#: ops, the policy lets such a run pass uncounted when it ends in a scalar read.
_CHECK_OPS = (
    "aten.sum.default",
    "aten.eq.Scalar",
    "aten.ne.Scalar",
    "aten.all.default",
    "aten.any.default",
    "aten.alias.default",
)
_SCALAR_READS = ("aten._local_scalar_dense.default", "aten.is_nonzero.default")


def forward_ops(plan: GroupPlan) -> list[tuple[str, str | None]]:
    """The model's forward ATen ops in order: ``(op name, owning node or None for views)``."""
    rows = []
    for node in plan.capture.gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if node_tag(node).get("phase") != "forward" or str(node.target) in _UNCOUNTED:
            continue
        rows.append((str(node.target), plan.owner.get(node.name)))
    return rows


def recomputed_nodes(graph: Graph, schedule: Schedule) -> set[str]:
    """Forward nodes the schedule computes more than once."""
    timeline = check_schedule(effective_graph(graph, schedule), schedule)
    return {e.node for e in timeline.ops if e.recompute and e.kind == "forward"}


def policy_source(
    plan: GroupPlan, graph: Graph, schedule: Schedule, *, label: str = "", lean: bool = False
) -> str:
    """Python source of a module defining ``policy_fn`` and ``context_fn`` for ``schedule``.

    ``lean`` also recomputes the ops that cost no FLOPs and whose outputs no backward op reads
    (:func:`unread_free_positions`): SAC caches every op it does not recompute, so it would
    hold, say, a batch norm's output before its ReLU through the whole backward, which the
    schedule frees once the ReLU ran (bench/README.md, "PyTorch's memory-budget partitioner").

    Raises
    ------
    XEngineError
        If the schedule uses more than one device (SAC applies to one device).
    """
    if plan.capture.meta.get("dropout_masks") == "bool":
        raise XEngineError(
            "this import holds dropout masks as bool tensors, which eager PyTorch (and so a "
            "checkpointing policy) does not: run it with Plan.execute, or import with "
            "dropout_masks='float' to export a policy"
        )
    devices = {op.device for _, op in schedule.operations}
    if len(devices) != 1:
        raise XEngineError(
            f"the schedule runs on {len(devices)} devices ({', '.join(sorted(devices))}); a "
            "checkpointing policy applies to one device; solve with a single-device method, "
            "e.g. --method checkmate:gpu"
        )
    recompute = recomputed_nodes(graph, schedule)
    ops = forward_ops(plan)
    random = random_positions(plan)
    owners = storage_owners(plan)
    indices = [
        i
        for i, (_, owner) in enumerate(ops)
        if (owner if owner is not None else owners[i]) in recompute and i not in random
    ]
    if lean:
        indices = sorted(set(indices) | (unread_free_positions(plan) - random))
    return _TEMPLATE % {
        "label": label or plan.capture.name,
        "nodes": json.dumps(sorted(recompute)),
        "ops": _wrap(json.dumps([name for name, _ in ops])),
        "recompute": _wrap(json.dumps(indices)),
        "count": len(ops),
        "uncounted": repr(_UNCOUNTED),
        "check_ops": repr(_CHECK_OPS),
        "scalar_reads": repr(_SCALAR_READS),
    }


def random_positions(plan: GroupPlan) -> set[int]:
    """Positions of random ops and of the ops making or scaling their tensors (dropout's
    ``empty_like``, ``bernoulli_``, ``div_``; :func:`~solver.importers.aten_groups.random_values`,
    whose nodes the graph marks computed once): always saved. Checkpointing replays the
    generator from the start of the region, so recomputing one random op after saving an
    earlier one would draw the earlier op's numbers."""
    from solver.importers.aten_groups import random_values

    random = random_values(list(plan.capture.gm.graph.nodes))
    return {i for i, n in enumerate(_forward_nodes(plan)) if n.name in random}


def unread_free_positions(plan: GroupPlan) -> set[int]:
    """Positions (in :func:`forward_ops`) of the ops without FLOPs (pointwise, views) whose
    outputs no backward op reads, through views: recomputing them costs no FLOPs, caching them
    costs their bytes for the whole backward."""
    from solver.importers.aten_groups import bases, op_flops

    graph_nodes = list(plan.capture.gm.graph.nodes)
    base = bases(graph_nodes)
    read = {
        base.get(arg.name, arg.name)
        for n in graph_nodes
        if node_tag(n).get("phase") == "backward"
        for arg in n.all_input_nodes
    }
    nodes = _forward_nodes(plan)
    return {
        i
        for i, n in enumerate(nodes)
        if op_flops(n) == 0 and base.get(n.name, n.name) not in read and n.name not in read
    }


def storage_owners(plan: GroupPlan) -> list[str | None]:
    """Per position in :func:`forward_ops`, the node whose op allocated the storage the op's
    output lives in (through views; ``None`` for a placeholder's). A view owned by no node is
    recomputed with its base: cached, it would keep the recomputed base's whole storage
    alive through the backward (GPT-2: 0.2 MiB of views against 0.02 MiB the schedule
    keeps)."""
    from solver.importers.aten_groups import bases

    graph_nodes = list(plan.capture.gm.graph.nodes)
    base = bases(graph_nodes)
    by_name = {n.name: n for n in graph_nodes}

    def owner(name: str) -> str | None:
        found = plan.owner.get(name)
        node = by_name.get(name)
        if found is None and node is not None and node.target is operator.getitem:
            found = plan.owner.get(node.args[0].name)
        return found

    return [owner(base.get(n.name, n.name)) for n in _forward_nodes(plan)]


def _forward_nodes(plan: GroupPlan) -> list:
    return [
        n
        for n in plan.capture.gm.graph.nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and node_tag(n).get("phase") == "forward"
        and str(n.target) not in _UNCOUNTED
    ]


def write_policy(
    path: str | os.PathLike[str], plan: GroupPlan, graph: Graph, schedule: Schedule, label: str = ""
) -> None:
    """Write :func:`policy_source` to ``path`` atomically."""
    from solver.document.atomic import atomic_write_text

    atomic_write_text(path, policy_source(plan, graph, schedule, label=label))


def _wrap(text: str, width: int = 96) -> str:
    items = text[1:-1].split(", ")
    lines, line = [], ""
    for item in items:
        if line and len(line) + len(item) + 2 > width:
            lines.append(line + ",")
            line = ""
        line = f"{line}, {item}" if line else item
    lines.append(line)
    return "[\n    " + "\n    ".join(lines) + "\n]" if items != [""] else "[]"


_TEMPLATE = '''"""Selective activation checkpointing policy for %(label)s (XEngine Studio).

It saves exactly the schedule's checkpoints: the outputs of the forward ATen ops of the nodes
the schedule recomputes are recomputed in the backward, every other op's output is saved.
Recomputed nodes: %(nodes)s

    from torch.utils.checkpoint import checkpoint
    out = checkpoint(model, x, use_reentrant=False, context_fn=context_fn)
"""

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

#: The model's forward ATen ops in order (%(count)d), as captured when the graph was imported.
OPS = %(ops)s
#: Positions in OPS whose outputs are recomputed instead of saved.
RECOMPUTE = frozenset(%(recompute)s)
UNCOUNTED = %(uncounted)s
#: A check on values the capture (fake tensors) could not make: ops outside OPS that end in a
#: Python scalar (e.g. Hugging Face's ``padding_mask.sum() == numel`` before its attention
#: mask, skipped when traced). They are skipped, uncounted, and must end in a scalar read.
CHECK_OPS = %(check_ops)s
SCALAR_READS = %(scalar_reads)s


def make_policy(log=None):
    """A fresh policy (its own op counters); ``log`` collects (position, recompute?) pairs."""
    position = {False: 0, True: 0}
    reading = {False: False, True: False}  # inside a check the capture could not trace

    def policy_fn(ctx, op, *args, **kwargs):
        if str(op) in UNCOUNTED:
            return CheckpointPolicy.PREFER_RECOMPUTE  # free; not in OPS
        phase = bool(ctx.is_recompute)
        i = position[phase]
        name = str(op)
        matches = i < len(OPS) and name == OPS[i]
        if not matches and name in SCALAR_READS:
            reading[phase] = False  # the check ends in a Python value: nothing follows from it
            return CheckpointPolicy.PREFER_RECOMPUTE
        if not matches and name in CHECK_OPS:
            reading[phase] = reading[phase] or name != "aten.alias.default"
            return CheckpointPolicy.PREFER_RECOMPUTE
        if not matches or reading[phase]:
            expected = OPS[i] if i < len(OPS) else "the end of the forward"
            raise RuntimeError(
                f"checkpoint policy: op {i} is {op}, the schedule's capture has {expected}; "
                "re-import the model with the same input shape and export the policy again"
            )
        position[phase] = i + 1
        if log is not None and not phase:
            log.append((i, i in RECOMPUTE))
        if i in RECOMPUTE:
            return CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE

    return policy_fn


def context_fn():
    """Pass as ``checkpoint(..., context_fn=context_fn)``."""
    return create_selective_checkpoint_contexts(make_policy(), allow_cache_entry_mutation=True)
'''

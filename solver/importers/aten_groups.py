"""Group the ATen ops of a captured joint graph into the nodes of a training graph.

A *value* is the output of one ATen op. Views (``t``, ``view``, ``transpose``, ``_unsafe_view``,
``getitem`` of ``split``, ...) and in-place ops share the storage of their first argument, so
they are never a node's memory: every value is charged to its *base*, the op that allocated the
storage. Each non-view op is *owned* by exactly one group:

* ``level="op"``: one forward group per allocating forward op (in-place ops and the outputs of a
  multi-output op join the op that allocated their storage); the backward ops of a forward op
  (same autograd sequence number) form its backward group.
* ``level="layer"``: forward ops are cut into contiguous runs of the same innermost module
  (``enc.layers.2.self_attn``); a run without GEMM, convolution or attention (dropout, norm,
  activation, residual add) joins the run before it, like conv+BN+ReLU. Contiguous runs of a
  topological order cannot form a cycle. Each layer's backward ops form ``<layer>.grad``.
* The loss function's ops, forward and backward, are the ``loss`` node. Gradient accumulation
  between ``grad_fn`` calls joins the group that reads the sum.

A group's *outputs* are the values it owns that another group reads (through any chain of
views); its memory is their bytes. Parameter gradients read by nobody but the graph output are
``fixed_memory`` (as the parameters), not activation memory. Edges: a group depends on the
owner of every value it reads, so a backward group depends on the saved tensors it uses and on
the incoming gradients, exactly as PyTorch's joint graph says.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from solver.document.training import LOSS_ID, backward_id
from solver.importers.aten_capture import JointCapture, node_tag
from solver.importers.aten_condense import condense_cycles, schedule_order

__all__ = [
    "LEVELS",
    "OpGroup",
    "GroupPlan",
    "plan_groups",
    "op_flops",
    "flop_mapping",
    "is_view",
    "is_inplace",
    "value_bytes",
    "op_bytes",
    "last_uses",
    "bases",
    "random_values",
    "random_groups",
    "META_ONLY",
    "tensor_inputs",
]

LEVELS = ("layer", "op")
_HEAVY = {"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution", "matmul"}
#: Ops that read only the shape, dtype and device of their tensor argument (the gradient seed
#: ``ones_like(loss)``, dropout's ``empty_like``): no edge, nothing saved.
META_ONLY = frozenset({"empty_like", "zeros_like", "ones_like", "full_like"})


@dataclass(frozen=True)
class OpGroup:
    """One node of the training graph: the ATen ops it runs and the values it keeps."""

    id: str
    kind: str
    ops: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    memory: int = 0
    kept: int = 0
    flops: float = 0.0
    bytes_accessed: float = 0.0
    of: str | None = None
    module: str = ""
    shape: tuple[int, ...] = ()
    aten: tuple[str, ...] = ()
    workspace: int = 0
    """Bytes the group needs only while it runs beyond its outputs (intermediates freed inside
    it): the node's ``workspace``, never kept (docs/spec-notes.md, "Workspace memory")."""


@dataclass(frozen=True)
class GroupPlan:
    """The grouping of a capture: groups in a topological order, and who owns which value."""

    capture: JointCapture
    level: str
    groups: tuple[OpGroup, ...]
    owner: dict[str, str] = field(default_factory=dict)
    grads: tuple[str, ...] = ()

    def group(self, group_id: str) -> OpGroup:
        """The group called ``group_id``."""
        return next(g for g in self.groups if g.id == group_id)

    @property
    def forward_flops(self) -> float:
        """FLOPs of the model's forward ops (the loss excluded), as FlopCounterMode counts."""
        return sum(g.flops for g in self.groups if g.kind == "forward")


def is_view(node: Any) -> bool:
    """Whether the op's output shares its first argument's storage without writing to it."""
    target = node.target
    if target is operator.getitem:
        return is_view(node.args[0]) if hasattr(node.args[0], "target") else False
    name = getattr(target, "__name__", "")
    if name.startswith(("_unsafe_view", "alias", "unsafe_split", "unsafe_chunk")):
        return True
    return bool(getattr(target, "is_view", False))


def tensor_inputs(node: Any) -> list:
    """The nodes an op reads the data of (all inputs, except for :data:`META_ONLY` ops)."""
    if _op_name(node) in META_ONLY:
        return []
    return list(node.all_input_nodes)


def is_inplace(node: Any) -> bool:
    """Whether the op writes into an argument (``bernoulli_``, ``add_`` on running stats)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return False
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def value_bytes(node: Any) -> int:
    """Bytes of the storage a value allocates (0 for non-tensors)."""
    val = node.meta.get("val")
    if not hasattr(val, "shape") or not hasattr(val, "dtype"):
        return 0
    return math.prod(val.shape) * val.dtype.itemsize


@cache
def flop_mapping() -> dict[Any, Any]:
    """FLOP formulas the registry lacks, for kernels the CPU runs: flash attention (the formula
    of the CUDA flash kernel) and oneDNN's LSTM layer (its gate GEMMs). FlopCounterMode counts 0
    for them on the CPU. Shape functions, as ``FlopCounterMode(custom_mapping=...)`` takes them."""
    import torch

    aten = torch.ops.aten
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flops,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward_flops,
        aten.mkldnn_rnn_layer: _rnn_layer_flops,
        aten.mkldnn_rnn_layer_backward: _rnn_layer_backward_flops,
    }


def _rnn_layer_flops(x, w_ih, w_hh, *args, out_shape=None, **kwargs) -> int:
    """Gate GEMMs of one LSTM layer over all steps: ``2 * B * T * 4H * (I + H)``."""
    steps = math.prod(x[:-1])  # batch x time, in either layout
    return 2 * steps * w_ih[0] * (w_ih[1] + w_hh[1])


def _rnn_layer_backward_flops(x, w_ih, w_hh, *args, out_shape=None, **kwargs) -> int:
    """Gradients of the inputs and of both weights: twice the forward GEMMs."""
    return 2 * _rnn_layer_flops(x, w_ih, w_hh)


def _cpu_flash_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query, key, value)


def _cpu_flash_backward_flops(grad, query, key, value, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(grad, query, key, value)


@cache
def _flop_table() -> dict[Any, Any]:
    from torch.utils import flop_counter

    extra = {k: flop_counter.shape_wrapper(v) for k, v in flop_mapping().items()}
    return {**flop_counter.flop_registry, **extra}


def op_flops(node: Any) -> float:
    """FLOPs of one ATen op by ``torch.utils.flop_counter``'s formulas (0 if it has none)."""
    import torch

    target = node.target
    packet = getattr(target, "overloadpacket", None)
    formula = _flop_table().get(packet)
    if formula is None:
        return 0.0
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
    return float(formula(*args, **kwargs, out_val=node.meta.get("val")))


def plan_groups(capture: JointCapture, level: str = "layer") -> GroupPlan:
    """Group the ops of ``capture`` at ``level`` (``"layer"`` or ``"op"``).

    The groups always form a DAG: groups that read each other (ops interleaved by the
    heuristics) are merged into one (:func:`solver.importers.aten_condense.condense_cycles`).

    Raises
    ------
    ValueError
        If ``level`` is not one of :data:`LEVELS`.
    """
    if level not in LEVELS:
        raise ValueError(f"level {level!r} is not one of {', '.join(LEVELS)}")
    nodes = list(capture.gm.graph.nodes)
    base = bases(nodes)
    owned = [n for n in nodes if n.op == "call_function" and not is_view(n)]
    forward_group = _merge_write_hazards(nodes, owned, base, _forward_groups(owned, base, level))
    owner = _assign(nodes, owned, base, forward_group)
    condensed = condense_cycles(
        _group_reads(owned, owner, base), dict.fromkeys(owner[n.name] for n in owned)
    )
    owner = {op: condensed.rename.get(g, g) for op, g in owner.items()}
    output = next(n for n in nodes if n.op == "output")
    grads = _grad_values(output, base)
    groups = _build(owned, owner, base, grads, {n.name: n for n in nodes})
    if condensed:
        groups = tuple(
            replace(g, of=condensed.of[g.id]) if g.id in condensed.of else g for g in groups
        )
    by_id = {g.id: g for g in groups}
    reads = {g.id: {owner[v] for v in g.reads if v in owner} for g in groups}
    order = schedule_order([g.id for g in groups], reads)
    groups = tuple(by_id[gid] for gid in order)
    return GroupPlan(capture, level, groups, owner, tuple(sorted(grads)))


def _merge_write_hazards(
    nodes: list, owned: list, base: dict[str, str], forward_group: dict[str, str]
) -> dict[str, str]:
    """Merge into an in-place op's group every forward group that reads the storage it
    writes before it writes it (the value before the write).

    An in-place op (a GRU cell's ``sigmoid_`` on a chunk of its gates) runs with the group
    that allocated the storage, so a recomputation redoes it. An op of another group that
    read the storage between the allocation and the write (``clone`` of that chunk) must then
    run inside that group too: as its own node it would run after the whole group, writes
    included, and read the wrong value (wrong gradients at op level).
    """
    position = {n.name: j for j, n in enumerate(nodes)}
    aliases: dict[str, list] = {}
    for n in nodes:
        aliases.setdefault(base.get(n.name, n.name), []).append(n)
    merged: dict[str, str] = {}

    def find(group: str) -> str:
        while group in merged:
            group = merged[group]
        return group

    for m in owned:
        root = base[m.name]
        if not is_inplace(m) or root == m.name or forward_group.get(m.name, LOSS_ID) == LOSS_ID:
            continue
        for alias in aliases.get(root, ()):
            for reader in alias.users:
                if not position[root] < position[reader.name] < position[m.name]:
                    continue
                group = forward_group.get(reader.name)
                if group is None or group == LOSS_ID or is_view(reader):
                    continue
                if find(group) != find(forward_group[m.name]):
                    merged[find(group)] = find(forward_group[m.name])
    if not merged:
        return forward_group
    return {op: find(group) for op, group in forward_group.items()}


def _group_reads(owned: list, owner: dict[str, str], base: dict[str, str]) -> dict[str, set[str]]:
    """Group -> the groups whose values its ops read (the edges of the graph to be)."""
    reads: dict[str, set[str]] = {}
    for n in owned:
        group = owner[n.name]
        found = reads.setdefault(group, set())
        for value in _sources(n, owner, base, group):
            source = owner.get(value)
            if source is not None and source != group:
                found.add(source)
    return reads


def bases(nodes: list) -> dict[str, str]:
    """Value -> the value that allocated its storage (itself for allocating ops)."""
    base: dict[str, str] = {}
    for n in nodes:
        if n.op == "call_function" and (is_view(n) or is_inplace(n)) and n.args:
            first = n.args[0]
            base[n.name] = base.get(getattr(first, "name", ""), n.name)
        elif n.op == "call_function" and n.target is operator.getitem:
            base[n.name] = n.name
        else:
            base[n.name] = n.name
    return base


def random_values(nodes: list) -> set[str]:
    """Forward values that are random or live in a random op's storage: the outputs of ops
    tagged ``torch.Tag.nondeterministic_seeded`` (dropout's ``bernoulli_``) and of every op on
    the same storage (dropout's ``empty_like`` making it, ``div_`` scaling it).

    Recomputed, they would draw other numbers: PyTorch's checkpointing replays the generator
    from the start of the region, so the selective-checkpointing policy always saves them
    (:func:`solver.executors.sac_policy.random_positions`), and the graph marks their nodes
    computed once (docs/spec-notes.md, "Nodes computed once")."""
    import torch

    seeded = torch.Tag.nondeterministic_seeded
    base = bases(nodes)
    forward = [
        n
        for n in nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and node_tag(n).get("phase") == "forward"
    ]
    random_bases = {
        base[n.name]
        for n in forward
        if seeded in getattr(n.target, "tags", ()) and not _draws_nothing(n)
    }
    return {n.name for n in forward if base[n.name] in random_bases}


def _draws_nothing(node) -> bool:
    """A seeded op told to draw nothing: attention with ``dropout_p`` 0 (ATen tags
    ``_scaled_dot_product_flash_attention_for_cpu`` seeded for its dropout). Recomputed, it
    gives the same values, so it need not be held (ViT's attention: 9 KiB the bench measured
    held where torch's partitioner recomputes it)."""
    schema = getattr(node.target, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    if "dropout_p" not in names:
        return False
    j = names.index("dropout_p")
    value = node.kwargs.get("dropout_p", node.args[j] if j < len(node.args) else None)
    if value is None:
        value = schema.arguments[j].default_value
    return isinstance(value, int | float) and value == 0


def random_groups(plan: GroupPlan) -> set[str]:
    """Ids of the groups owning a random value (:func:`random_values`) or its storage."""
    nodes = list(plan.capture.gm.graph.nodes)
    base = bases(nodes)
    found = set()
    for name in random_values(nodes):
        for value in (name, base[name]):
            if value in plan.owner:
                found.add(plan.owner[value])
    return found


def _module(node) -> str:
    return node_tag(node).get("module", "")


def _phase(node) -> str:
    return node_tag(node).get("phase", "forward")


def _op_name(node) -> str:
    return str(getattr(node.target, "__name__", node.target)).split(".")[0]


def _forward_groups(owned: list, base: dict[str, str], level: str) -> dict[str, str]:
    """Forward op name -> forward group id (the loss ops -> ``loss``)."""
    result: dict[str, str] = {}
    attached: dict[str, str] = {}  # in-place ops and getitems -> the op owning their storage
    segments: list[dict] = []
    where: dict[str, int] = {}
    for n in owned:
        if _phase(n) == "backward":
            continue
        if _phase(n) == "loss":
            result[n.name] = LOSS_ID
            continue
        anchor = n.args[0].name if n.target is operator.getitem else base[n.name]
        if anchor != n.name and anchor in where:
            attached[n.name] = anchor
            where[n.name] = where[anchor]
            continue
        key = _module(n) if level == "layer" else f"{_module(n)}.{n.name}".lstrip(".")
        if not (level == "layer" and segments and segments[-1]["key"] == key):
            segments.append({"key": key, "name": key or n.name, "heavy": False, "ops": []})
        segments[-1]["heavy"] |= _is_heavy(n)
        segments[-1]["ops"].append(n.name)
        where[n.name] = len(segments) - 1
    merged = _merge_light(segments) if level == "layer" else segments
    for seg, name in zip(merged, _unique_ids([seg["name"] for seg in merged]), strict=True):
        for op in seg["ops"]:
            result[op] = name
    for op, anchor in attached.items():
        result[op] = result[anchor]
    return result


def _is_heavy(node) -> bool:
    name = _op_name(node)
    return name in _HEAVY or "scaled_dot_product" in name


def _merge_light(segments: list[dict]) -> list[dict]:
    """A run without a heavy op joins the run before it (conv+BN+ReLU, linear+dropout)."""
    merged: list[dict] = []
    for seg in segments:
        if merged and not seg["heavy"]:
            merged[-1] = {**merged[-1], "ops": merged[-1]["ops"] + seg["ops"]}
        else:
            merged.append(seg)
    return merged


def _unique_ids(keys: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
        out.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    return out


def _assign(
    nodes: list, owned: list, base: dict[str, str], forward_group: dict[str, str]
) -> dict[str, str]:
    """Every owned op -> its group id (forward, ``loss`` or ``<forward>.grad``).

    A backward op joins the backward group of the forward group that ran the op it
    differentiates (``grad_of``); when that op is a view of a parameter or of the input
    (a weight's ``t`` or ``split``), of the group that first reads the view. Gradient sums
    between ``grad_fn`` calls (no ``grad_of``) join the group that reads the sum, or, for a
    parameter gradient that only the output reads, the group of its latest addend.
    """
    creator: dict[int, Any] = {}
    inplace: dict[int, Any] = {}  # an in-place op is recorded one number after its node's
    for n in nodes:
        if n.op == "call_function" and _phase(n) != "backward":
            creator.setdefault(n.meta.get("seq_nr", -1), n)
            if is_inplace(n):
                inplace.setdefault(n.meta.get("seq_nr", -1) - 1, n)
    for seq, n in inplace.items():
        creator.setdefault(seq, n)
    owner: dict[str, str] = dict(forward_group)
    pending = []
    for n in owned:
        if n.name in owner:
            continue
        anchor = n.args[0].name if n.target is operator.getitem else base[n.name]
        if anchor != n.name and anchor in owner:
            owner[n.name] = owner[anchor]
            continue
        fwd = creator.get(node_tag(n).get("grad_of"))
        group = _forward_owner(fwd, base, forward_group) if fwd is not None else None
        if group is None:
            pending.append(n)
        else:
            owner[n.name] = group if group == LOSS_ID else backward_id(group)
    unresolved = []
    for n in reversed(pending):  # accumulation: join the group that reads the sum
        readers = [owner.get(u.name) for u in _readers(n)]
        group = next((r for r in readers if r), None)
        if group is None:
            unresolved.append(n)
        else:
            owner[n.name] = group
    for n in reversed(unresolved):  # read by the output only: the latest addend's group
        owner[n.name] = _producer_group(n, owner, base)
    return owner


def _forward_owner(node, base: dict[str, str], forward_group: dict[str, str]) -> str | None:
    """The forward group of the op ``node`` (a view: of its base, else of its first reader)."""
    group = forward_group.get(base[node.name])
    if group is not None:
        return group
    for reader in _readers(node):
        if reader.name in forward_group:
            return forward_group[reader.name]
    return None


def _readers(node) -> Iterable:
    """Owned ops reading ``node``, through views, in the order of the capture."""
    found: dict[str, Any] = {}
    todo = [node]
    while todo:
        for user in todo.pop().users:
            if user.op != "call_function":
                continue
            if is_view(user):
                todo.append(user)
            else:
                found.setdefault(user.name, user)
    order = {n.name: j for j, n in enumerate(node.graph.nodes)} if len(found) > 1 else {}
    return sorted(found.values(), key=lambda u: order.get(u.name, 0))


def _producer_group(node, owner: dict[str, str], base: dict[str, str]) -> str:
    """The group of the latest op whose value ``node`` reads (through views); ``loss`` if none."""
    order = {n.name: j for j, n in enumerate(node.graph.nodes)}
    found: dict[int, str] = {}
    for arg in node.all_input_nodes:
        while arg.op == "call_function" and is_view(arg) and arg.all_input_nodes:
            arg = arg.args[0] if hasattr(arg.args[0], "name") else arg.all_input_nodes[0]
        group = owner.get(arg.name) or owner.get(base.get(arg.name, ""))
        if group:
            found[order[arg.name]] = group
    return found[max(found)] if found else LOSS_ID


def _grad_values(output, base: dict[str, str]) -> set[str]:
    """Values the graph output reads (the loss and the parameter gradients), as bases."""
    return {base[n.name] for n in output.all_input_nodes}


def _sources(node, owner: dict[str, str], base: dict[str, str], group: str) -> set[str]:
    """External values an op of ``group`` reads: owned by other groups, through views."""
    found: set[str] = set()
    todo = tensor_inputs(node)
    while todo:
        arg = todo.pop()
        if arg.op in ("placeholder", "get_attr"):  # inputs, weights, lifted constants: fixed
            continue
        if arg.op == "call_function" and is_view(arg):
            todo.extend(arg.all_input_nodes)
            continue
        root = base[arg.name] if is_inplace(arg) else arg.name
        if owner.get(root, owner.get(arg.name)) != group:
            found.add(root)
    return found


def _build(owned, owner, base, grads, nodes_by_name) -> tuple[OpGroup, ...]:
    members: dict[str, list] = {}
    for n in owned:
        members.setdefault(owner[n.name], []).append(n)
    reads = {
        g: sorted({v for n in ops for v in _sources(n, owner, base, g)}, key=str)
        for g, ops in members.items()
    }
    read_by_others = {v for vs in reads.values() for v in vs}
    by_name = {n.name: n for n in owned}
    groups = []
    for gid, ops in members.items():
        outputs = [n.name for n in ops if n.name in read_by_others]
        kind = "loss" if gid == LOSS_ID else ("backward" if gid.endswith(".grad") else "forward")
        last = next((by_name[o] for o in reversed(outputs)), ops[-1])
        val = last.meta.get("val")
        kept = sum(value_bytes(by_name[o]) for o in outputs)
        names = [n.name for n in ops]
        working = working_bytes(names, nodes_by_name, owner, base, gid, set(outputs), grads)
        of = gid.removesuffix(".grad") if kind == "backward" else None
        groups.append(
            OpGroup(
                id=gid,
                kind=kind,
                ops=tuple(names),
                outputs=tuple(outputs),
                reads=tuple(reads[gid]),
                memory=kept,
                kept=kept,
                flops=sum(op_flops(n) for n in ops if _phase(n) != "loss" or kind == "loss"),
                bytes_accessed=float(sum(op_bytes(n) for n in ops)),
                of=of,
                module=_module(ops[0]) if kind == "forward" else "",
                shape=tuple(val.shape) if hasattr(val, "shape") else (),
                aten=tuple(dict.fromkeys(_op_name(n) for n in ops if not is_inplace(n))),
                # the loss too: mean(out ** 2)'s squares are freed inside it
                workspace=max(working - kept, 0),
            )
        )
    return _order(groups)


def last_uses(ops: tuple[str, ...], nodes: Mapping[str, Any], owner: Mapping[str, str], gid: str):
    """Value -> index of the last op of group ``gid`` (ops ``ops``) that reads it, through the
    views and in-place ops of other groups that an op resolves on the fly."""
    last: dict[str, int] = {}
    for j, name in enumerate(ops):
        todo = tensor_inputs(nodes[name])
        while todo:
            arg = todo.pop()
            last[arg.name] = j
            if arg.op == "call_function" and owner.get(arg.name) != gid:
                if is_view(arg) or is_inplace(arg):
                    todo.extend(arg.all_input_nodes)
    return last


def working_bytes(ops, nodes, owner, base, gid: str, keep: set[str], fixed: set[str]) -> int:
    """Peak bytes of the storages a group allocates while it runs: an allocation lives until
    the last read of it or of any alias, longer if it is kept (``keep``); the parameter
    gradients (``fixed``) are fixed memory and not counted."""
    last = last_uses(tuple(ops), nodes, owner, gid)
    end: dict[str, int] = {}
    for name, j in last.items():  # a view keeps its base's storage alive
        root = base.get(name, name)
        end[root] = max(end.get(root, j), j)
    for j, name in enumerate(ops):
        root = base[name]
        end[root] = max(end.get(root, j), j)
    live: dict[str, int] = {}
    peak = 0
    members = set(ops)
    for j, name in enumerate(ops):
        node = nodes[name]
        unused = 0
        if base[name] == name and name not in fixed and name not in live:
            live[name] = value_bytes(node)
        if isinstance(node.meta.get("val"), tuple | list):
            # a multi-output op (a norm's or a convolution's backward) allocates every output
            # while its inputs are still live, not when a getitem later names it
            taken = set()
            for user in node.users:
                if user.target is operator.getitem and user.name in members:
                    taken.add(user.args[1])
                    if base[user.name] == user.name and user.name not in fixed:
                        live[user.name] = value_bytes(user)
            unused = sum(  # outputs nobody reads: allocated, freed right after the op
                math.prod(v.shape) * v.dtype.itemsize
                for k, v in enumerate(node.meta["val"])
                if k not in taken and hasattr(v, "shape") and hasattr(v, "dtype")
            )
        peak = max(peak, sum(live.values()) + unused)
        for root in [r for r in live if end.get(r, j) <= j and r not in keep]:
            del live[root]
    return peak


def op_bytes(node) -> int:
    """Memory traffic of one op for the roofline: tensor inputs read + outputs written."""
    if node.target is operator.getitem:
        return 0
    read = sum(value_bytes(a) for a in node.all_input_nodes)
    return read + value_bytes(node)


def _order(groups: list[OpGroup]) -> tuple[OpGroup, ...]:
    """Forward groups, the loss, then backward groups, each in the order of their first op;
    :func:`solver.document.graph.make_graph` sorts if needed."""
    rank = {"forward": 0, "loss": 1, "backward": 2}
    return tuple(sorted(groups, key=lambda g: rank[g.kind]))

"""What a stored result was solved for: a content hash of the graph and the solve settings.

Two solves share a key exactly when they must give the same answer given enough time: same
nodes (in schedule order, with their output sizes and workspaces, per-device costs and kinds),
same edges and transfer overrides, same devices (fixed memory) and links, same memory limits
(and saved-bytes limits, where a device has one), same method, and for the MIQP methods the
same backend, relative gap and warm start. The graph's
name, notes and meta, node ops and roofline inputs (costs are already resolved from them) do
not change the answer and are left out, so a renamed or re-saved graph still finds its results
(and a graph without workspaces its keys from before they existed). Time limit,
threads, MIP start and cutoff are not part of the key: they decide how soon the optimum is
found, not what it is; the limit is stored beside the answer and compared on lookup
(:mod:`solver.results.store`).

Offloading (``SolveOptions.offload``) changes the answer of the methods it applies to
(:data:`~solver.optimize.methods.OFFLOAD_METHODS`): their key's method is then
``"<method>+offload"`` (``xengine+offload``, the method name the offloading solve reports), so
a result with offloading is never served for a request without it, nor the reverse. Without
the option the key is exactly what it was before the option existed, so stored rows stay
valid; for the other methods (heuristics, single-device Checkmate, which has nowhere to
offload to) the option changes nothing and is left out.

The interval model's ``C`` (``SolveOptions.runs``) is in the key when it is not the default: a
schedule proven best under "at most C runs per node" may not be the best under C + 1.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from solver.document.graph import Graph
from solver.optimize.intervals import DEFAULT_RUNS
from solver.optimize.methods import offload_applies
from solver.optimize.solve import SolveOptions

__all__ = [
    "DETERMINISTIC_METHODS",
    "ResultKey",
    "graph_hash",
    "result_key",
    "is_deterministic",
    "keyed_method",
]

DETERMINISTIC_METHODS = ("greedy", "checkpoint-all", "chen-sqrtn", "chen-greedy")
"""Heuristics whose answer depends on the graph and memory limits only (no backend, no limit)."""


@dataclass(frozen=True)
class ResultKey:
    """The identity of a solve: ``digest`` is the lookup key, the rest is kept for people."""

    digest: str
    graph_hash: str
    memory_limits: tuple[tuple[str, int], ...]
    method: str
    backend: str
    gap_rel: float | None


def is_deterministic(method: str) -> bool:
    """Whether ``method`` (``name[:device]``) gives the same answer under any limit.

    Examples
    --------
    >>> is_deterministic("chen-sqrtn:gpu"), is_deterministic("checkmate:gpu")
    (True, False)
    """
    return method.partition(":")[0] in DETERMINISTIC_METHODS


def keyed_method(method: str, options: SolveOptions) -> str:
    """The method as the key names it: ``"<method>+offload"`` where offloading applies.

    Examples
    --------
    >>> keyed_method("xengine", SolveOptions(offload=True)), keyed_method("xengine", SolveOptions())
    ('xengine+offload', 'xengine')
    >>> keyed_method("checkmate:gpu", SolveOptions(offload=True))  # one device: nowhere to offload
    'checkmate:gpu'
    """
    return f"{method}+offload" if options.offload and offload_applies(method) else method


def graph_hash(graph: Graph) -> str:
    """SHA-256 of everything in ``graph`` but the memory limits that changes a schedule's answer.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> graph_hash(unit_chain(3)) == graph_hash(unit_chain(3, budget=5))
    True
    >>> graph_hash(unit_chain(3)) == graph_hash(unit_chain(4))
    False
    """
    return _digest(_graph_content(graph))


def result_key(graph: Graph, method: str, options: SolveOptions) -> ResultKey:
    """The key of solving ``graph`` (at its current memory limits) by ``method`` with ``options``.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> a = result_key(unit_chain(3, budget=4), "xengine", SolveOptions(time_limit_s=5))
    >>> b = result_key(unit_chain(3, budget=4), "xengine", SolveOptions(time_limit_s=60))
    >>> c = result_key(unit_chain(3, budget=5), "xengine", SolveOptions())
    >>> d = result_key(unit_chain(3, budget=4), "xengine", SolveOptions(offload=True))
    >>> a == b, a.digest == c.digest, a.digest == d.digest, d.method
    (True, False, False, 'xengine+offload')
    """
    structure = graph_hash(graph)
    method = keyed_method(method, options)
    memory_limits = tuple((d.name, int(d.memory_limit)) for d in graph.devices)
    if is_deterministic(method):
        backend, gap = "", None
        warm = None
    else:
        backend, gap, warm = options.backend, float(options.gap_rel), bool(options.warm_start)
    content = {
        "graph": structure,
        "budgets": memory_limits,  # the digest's own word: renaming it would orphan every row
        "method": method,
        "backend": backend,
        "gap_rel": gap,
        "warm_start": warm,
    }
    if backend and options.runs != DEFAULT_RUNS:  # only then: older keys stay what they were
        content["runs"] = int(options.runs)
    saved = graph.saved_limits
    if saved:  # only then: keys of solves without a saved-bytes limit stay what they were
        content["saved"] = tuple(sorted((name, int(limit)) for name, limit in saved.items()))
    return ResultKey(_digest(content), structure, memory_limits, method, backend, gap)


def _graph_content(graph: Graph) -> dict[str, Any]:
    nodes = [
        [
            node.id,
            int(node.memory),
            sorted((device, float(ms)) for device, ms in node.cost.items()),
            node.kind,
            node.of,
            # a workspace changes the answer; absent when 0, so older keys stay valid
            *([int(node.workspace)] if node.workspace else []),
            # so does a node computed once; absent when recomputable, as before
            *(["once"] if not node.recomputable else []),
        ]
        for node in graph.nodes
    ]
    edges = sorted(
        [e.source, e.target, sorted((k, float(v)) for k, v in e.transfer_ms.items())]
        for e in graph.edges
    )
    devices = [[d.name, int(d.fixed_memory)] for d in graph.devices]
    links = sorted(
        [lk.source, lk.target, float(lk.bandwidth), float(lk.latency_ms)] for lk in graph.links
    )
    return {"nodes": nodes, "edges": edges, "devices": devices, "links": links}


def _digest(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

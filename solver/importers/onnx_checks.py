"""What the ONNX importer refuses, before it walks a model (issue 22).

The walk (:mod:`solver.importers.onnx_walk`) takes every tensor it cannot type for a static one
(a weight, a shape), so an operator it did not understand used to vanish with everything after
it: a custom or unknown operator left a 5-node network as 3 nodes, with exit status 0. A wrong
graph is worse than none, so every operator we cannot model is refused here in one line naming
the operator and the node:

* an operator of another domain than ONNX's own (``com.example.FancyAct``, ``ai.onnx.ml``);
* a name ONNX does not know (``Frobnicate``);
* control flow (``If``, ``Loop``, ``Scan``: their branches run depending on the data, and
  their subgraphs read outer tensors the walk cannot see);
* an operator whose output size depends on the data (``NonMaxSuppression``, ``NonZero``,
  ``Unique``, ...), or that works on sequences, optionals or strings;
* a node that reads a tensor no earlier node, graph input or initializer defines, or that has
  no output;
* whatever else ``onnx.checker.check_model(full_check=True)`` refuses (type errors, missing
  attributes), with the checker's own words on one line.

The file itself is read only if it is a regular file of at most :data:`MAX_ONNX_BYTES` (a
FIFO blocked the importer forever, ``/dev/zero`` filled memory), and ``--input`` sizes are
checked before they are written into the model (a dimension past int64 raised ``ValueError``).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from solver.document.json_io import read_regular_file
from solver.document.units import MAX_SIZE
from solver.errors import GraphFormatError, printable

__all__ = ["MAX_ONNX_BYTES", "check_input_shape", "check_modelable", "read_onnx"]

MAX_ONNX_BYTES = 2**31 - 1
"""Protobuf's own limit for one message: no ONNX file without external data is larger."""
CONTROL_FLOW = {"If", "Loop", "Scan"}
DATA_DEPENDENT = {
    "NonMaxSuppression", "NonZero", "Unique", "Compress", "StringNormalizer",
    "StringConcat", "StringSplit", "RegexFullMatch", "TfIdfVectorizer",
}  # fmt: skip
"""Operators whose output size (or type) depends on the values, not the shapes."""
_UNMODELLED_PREFIXES = ("Sequence", "Optional")
_STANDARD_DOMAINS = ("", "ai.onnx")
_FIX = "export the network without it (standard ONNX operators, no post-processing)"


def read_onnx(onnx, path: Path):
    """Parse the ONNX file at ``path``; a :class:`GraphFormatError` for anything else."""
    from google.protobuf.message import DecodeError  # protobuf comes with onnx

    data = read_regular_file(
        path,
        max_bytes=MAX_ONNX_BYTES,
        fix="no ONNX file is larger (protobuf's limit); export with export_params=False",
        what="an .onnx file",
    )
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError):
        model = None
    if model is None or not model.graph.node or not model.graph.input:
        raise GraphFormatError("not an ONNX model (or an empty graph)", path=str(path),
                               fix="export it with torch.onnx.export or onnx.save")  # fmt: skip
    return model


def check_input_shape(shape: tuple[int, ...], itemsize: int, path: str) -> None:
    """Refuse an ``--input`` whose tensor would hold more than 2^53 bytes (or any dimension
    past that), before it is written into the model's int64 fields."""
    numel = math.prod(shape)
    if max(shape) > MAX_SIZE or numel * itemsize > MAX_SIZE:
        shown = "x".join(str(d) if d < 10**12 else f"{d:.3g}" for d in shape)
        raise GraphFormatError(
            f"--input {shown} holds {numel * itemsize:.3g} bytes, more than {MAX_SIZE} (8 PiB)",
            path=path,
            fix="give a smaller shape",
        )


def check_modelable(onnx, model, path: str) -> None:
    """Raise :class:`GraphFormatError` naming the first node the importer cannot model."""
    graph = model.graph
    defined = {t.name for t in [*graph.input, *graph.initializer]}
    for number, node in enumerate(graph.node):
        where = _where(node, number)
        problem = _node_problem(onnx, node, defined)
        if problem:
            what, fix = problem
            raise GraphFormatError(what, path=path, where=where, fix=fix)
        defined.update(o for o in node.output if o)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # noqa: BLE001 - onnx's C++ errors share no Python base class
        raise GraphFormatError(
            f"the ONNX checker refuses it: {_one_line(str(exc))}",
            path=path,
            fix="re-export the model (torch.onnx.export runs this check)",
        ) from None


def _node_problem(onnx, node, defined: set[str]) -> tuple[str, str] | None:
    op = node.op_type
    if node.domain not in _STANDARD_DOMAINS:
        return (
            f"an operator of the custom domain {node.domain!r}, which cannot be modelled",
            _FIX,
        )
    if not onnx.defs.has(op, node.domain):
        return "not an ONNX operator (onnx.defs knows no such name)", _FIX
    if op in CONTROL_FLOW or any(a.type in (5, 10) for a in node.attribute):  # GRAPH(S)
        return "control flow, whose branches run depending on the data: cannot be modelled", (
            "export a fixed path through the network (e.g. trace it with one input)"
        )
    if op in DATA_DEPENDENT or op.startswith(_UNMODELLED_PREFIXES):
        return "an operator whose output depends on the values, not the shapes", _FIX
    missing = [i for i in node.input if i and i not in defined]
    if missing:
        return (
            f"reads tensor {missing[0]!r}, which no earlier node, graph input or initializer "
            "defines",
            "the file is broken: re-export it",
        )
    if not any(node.output):
        return "has no output", "the file is broken: re-export it"
    return None


def _where(node, number: int) -> str:
    name = f"node {node.name!r}" if node.name else f"node #{number}"
    return f"{name} (op {node.op_type})"


def _one_line(text: str) -> str:
    return printable(re.sub(r"\s+", " ", text).strip())[:300]

"""``python main.py import-torch module:Class --input 32x3x224x224 [-o FILE] [--level op|layer]``.

``--input SHAPE[:DTYPE]`` may be repeated, one per argument of the model's ``forward`` in order:
``--input 4x12:int64`` for token ids, ``--input 4x16x64 --input 4x10x64`` for
``nn.Transformer(src, tgt)``. Without a dtype an input is float32, as before.

``--capture aten`` (default) imports PyTorch's own joint forward+backward graph
(:mod:`solver.importers.aten`); ``--capture fx`` is the torch.fx importer, the fallback for
models whose training step cannot be captured.

:func:`run` imports, writes the graph atomically (or prints it), and returns the exit status of
docs/formats.md: 0 on success, 2 for bad input (unknown module, untraceable model, torch
missing, bad shape). Errors are one line on stderr, never a traceback. torch is imported only
when the command runs: the parser, ``--help`` and the argument types need none of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from solver.document.graph import Graph
from solver.document.graph_io import graph_to_dict, save_graph
from solver.errors import XEngineError
from solver.importers.aten_capture import DTYPES, InputSpec
from solver.importers.hardware import DEVICES, LINKS, make_platform
from solver.importers.user_code import UserCodeError, debug_enabled

__all__ = [
    "add_arguments",
    "add_platform_arguments",
    "parse_input",
    "parse_shape",
    "print_error",
    "run",
    "write_imported",
]


def parse_shape(text: str) -> tuple[int, ...]:
    """``"32x3x224x224"`` -> ``(32, 3, 224, 224)``.

    Examples
    --------
    >>> parse_shape("32x3x224x224")
    (32, 3, 224, 224)
    """
    try:
        shape = tuple(int(part) for part in text.lower().replace("*", "x").split("x"))
    except ValueError:
        shape = ()
    if not shape or any(size <= 0 for size in shape):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shape; write positive sizes joined by 'x', e.g. 32x3x224x224"
        )
    return shape


def parse_input(text: str) -> InputSpec:
    """``"4x12:int64"`` -> ``InputSpec((4, 12), "int64")``; a bare shape is float32.

    Examples
    --------
    >>> parse_input("4x12:long")
    InputSpec(shape=(4, 12), dtype='int64')
    >>> parse_input("2x3")
    InputSpec(shape=(2, 3), dtype='float32')
    """
    shape_text, colon, dtype = text.partition(":")
    shape = parse_shape(shape_text) if colon else parse_shape(text)
    if not colon:
        return InputSpec(shape)
    name = DTYPES.get(dtype.strip().lower().removeprefix("torch."))
    if name is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has an unknown dtype {dtype!r}; write SHAPE:DTYPE with DTYPE one of "
            f"{', '.join(sorted(set(DTYPES.values())))}, e.g. 4x12:int64"
        )
    return InputSpec(shape, name)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The model spec, its inputs, how to capture it and the platform it is costed on."""
    parser.add_argument("spec", help="module:Class or path/to/file.py:Class (built with no args)")
    parser.add_argument(
        "--input",
        required=True,
        action="append",
        type=parse_input,
        metavar="SHAPE[:DTYPE]",
        help="input shape, batch first, e.g. 32x3x224x224; a dtype for other than float32 "
        "(4x12:int64: token ids, drawn as 0 or 1 when run); repeat for each argument of "
        "forward, in order",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="graph file (default: stdout)")
    parser.add_argument(
        "--capture",
        choices=("aten", "fx"),
        default="aten",
        help="aten: PyTorch's joint forward+backward graph (default; any capturable model); "
        "fx: torch.fx forward graph, backward synthesised (fallback)",
    )
    parser.add_argument(
        "--level",
        choices=("layer", "op"),
        default="layer",
        help="layer: ops grouped by module, GEMM-less ones fused into the one before "
        "(default); op: one node per op",
    )
    parser.add_argument(
        "--cost",
        choices=("roofline", "measured"),
        default="roofline",
        help="roofline from published specs (default), or measure the cpu "
        "device's ops on this machine",
    )
    add_platform_arguments(parser)
    parser.add_argument("--name", help="graph name (default: the class name)")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error in the model code"
    )


def add_platform_arguments(parser: argparse.ArgumentParser) -> None:
    """``--cpu``, ``--gpu`` and ``--link``: the published specs the roofline costs come from
    (shared by ``import-torch`` and ``import-onnx``, so both name the same choices)."""
    parser.add_argument(
        "--cpu",
        choices=sorted(k for k, d in DEVICES.items() if d.kind == "cpu"),
        default="ryzen-9-7950x",
        help="spec of device 'cpu'",
    )
    parser.add_argument(
        "--gpu",
        choices=sorted(k for k, d in DEVICES.items() if d.kind == "gpu"),
        default="rtx-3090",
        help="spec of device 'gpu'",
    )
    parser.add_argument("--link", choices=sorted(LINKS), default="pcie4-x16")


def run(args: argparse.Namespace) -> int:
    """Import the model and write or print its graph; 0, or 2 with one line on stderr."""
    from solver.importers.aten import import_aten
    from solver.importers.costmodel import MeasuredCpuCostModel
    from solver.importers.torch_fx import import_torch

    platform = make_platform({"cpu": args.cpu, "gpu": args.gpu}, args.link)
    cost_model: object = "roofline"
    if args.cost == "measured" and args.capture == "fx":
        cost_model = {"cpu": MeasuredCpuCostModel(on_progress=_progress)}
    elif args.cost == "measured":
        cost_model = "measured"
    importer = import_aten if args.capture == "aten" else import_torch
    inputs = tuple(args.input)
    if inputs == (InputSpec(inputs[0].shape),):
        inputs = inputs[0].shape  # one float input: exactly as before inputs had dtypes
    elif args.capture == "fx":
        print(
            "main.py import-torch: error: --capture fx takes one float input; drop the dtype "
            "and the other --input, or use --capture aten; see main.py import-torch --help",
            file=sys.stderr,
        )
        return 2
    return write_imported(
        lambda: importer(
            args.spec,
            inputs,
            level=args.level,
            devices=platform,
            cost_model=cost_model,  # type: ignore[arg-type]  # a mapping only with --capture fx
            name=args.name,
        ),
        args.output,
        debug=args.debug,
    )


def write_imported(
    make_graph: Callable[[], Graph], output: str | None, *, debug: bool = False
) -> int:
    """Import (``make_graph()``), then write the graph to ``output`` atomically or print it;
    0, or 2 with one line on stderr (the import commands' contract, docs/formats.md); the
    model code's traceback before it with ``debug`` (or ``XENGINE_DEBUG``)."""
    try:
        graph = make_graph()
        if output:
            save_graph(graph, output)
        else:
            sys.stdout.write(json.dumps(graph_to_dict(graph), indent=1) + "\n")
    except XEngineError as exc:
        print_error(exc, debug)
        return 2
    except OSError as exc:
        print(f"error: {exc.filename or output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if output:
        print(f"{output}: {graph.n} nodes, {len(graph.edges)} edges", file=sys.stderr)
    return 0


def print_error(exc: XEngineError, debug: bool = False) -> None:
    """``error: ...`` on one line; first the model code's traceback if ``debug`` is on."""
    if isinstance(exc, UserCodeError) and exc.detail and debug_enabled(debug):
        sys.stderr.write(exc.detail)
    print(f"error: {exc}", file=sys.stderr)


def _progress(done: int, total: int, name: str) -> None:
    if sys.stderr.isatty():
        print(f"\rmeasuring {done}/{total} {name:<40}", end="", file=sys.stderr, flush=True)
        if done == total:
            print(file=sys.stderr)

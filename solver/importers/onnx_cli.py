"""``python main.py import-onnx FILE.onnx [-o FILE] [--level op|layer] [--input SHAPE]``.

The ONNX importer (:func:`~solver.importers.onnx_import.import_onnx`) was reachable from Python
only; a user holding an exported ``.onnx`` file needs it from the command line and the window
(which runs this command in a child process, so an import never blocks it and can be stopped).
Same exit statuses and one-line errors as ``import-torch`` (docs/formats.md): 0 on success,
2 for bad input (no such file, not ONNX, onnx missing, bad shape).
"""

from __future__ import annotations

import os
import sys

from solver.document.atomic import check_writable
from solver.errors import XEngineError, printable
from solver.importers.cli import add_platform_arguments, parse_shape, write_imported
from solver.importers.hardware import make_platform
from solver.importers.usage import OneLineParser

__all__ = ["import_onnx_command"]


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="main.py import-onnx",
        description="Import an ONNX file (a forward graph, e.g. from torch.onnx.export) as a "
        "training graph; the backward is synthesised as for import-torch --capture fx.",
    )
    parser.add_argument("path", metavar="FILE.onnx", help="the ONNX model")
    parser.add_argument(
        "--input",
        type=parse_shape,
        metavar="SHAPE",
        help="shape of the first graph input, e.g. 8x3x224x224 (default: the file's own; "
        "needed when the file leaves the batch size symbolic)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="graph file (default: stdout)")
    parser.add_argument(
        "--level",
        choices=("layer", "op"),
        default="layer",
        help="layer: GEMM-less ops fused into the one before (default); op: one node per op",
    )
    add_platform_arguments(parser)
    parser.add_argument("--name", help="graph name (default: the file's graph name)")
    return parser


def import_onnx_command(argv: list[str]) -> int:
    """Run ``import-onnx`` with ``argv`` (the arguments after the subcommand); return 0 or 2."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed usage or help already
        return 0 if exc.code in (0, None) else 2
    from solver.importers.onnx_import import import_onnx

    try:
        if args.output:
            check_writable(args.output)  # before the import
        platform = make_platform({"cpu": args.cpu, "gpu": args.gpu}, args.link)
        return write_imported(
            lambda: import_onnx(
                args.path, level=args.level, devices=platform, input_shape=args.input,
                name=args.name,
            ),
            args.output,
        )  # fmt: skip
    except XEngineError as exc:  # the output path, the platform's specs
        print(printable(f"error: {exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        if os.environ.get("XENGINE_DEBUG"):
            raise
        what = printable(f"{type(exc).__name__}: {exc}")[:300]
        print(
            f"error: {printable(args.path)}: the ONNX importer failed ({what}); please report "
            "it with the file",
            file=sys.stderr,
        )
        return 2

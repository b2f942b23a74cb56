"""XEngine Studio: ``python main.py`` opens the GUI; ``python main.py solve|check|sweep|examples``
is the headless tool (docs/formats.md); ``python main.py FILE`` opens a graph or project."""

from __future__ import annotations

import sys

COMMANDS = {
    "solve",
    "check",
    "sweep",
    "results",
    "examples",
    "import-torch",
    "import-onnx",
    "execute",
}
COMMANDS |= {"-h", "--help"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        from solver.cli import main as cli_main

        return cli_main(argv)
    from app.main_window import run

    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())

"""The importer subcommands' argument parser: a usage error is one line and exit status 2.

``main.py import-torch`` and ``main.py execute`` parse their own arguments (they are loaded only
when used, as torch is optional). Like the other subcommands (:mod:`solver.cli`), a usage error
prints one line, ``<prog>: error: <what>; see <prog> --help``, never argparse's usage block.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from solver.errors import printable

__all__ = ["OneLineParser", "EXIT_USAGE"]

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (see module docstring).

    Examples
    --------
    >>> import contextlib, io
    >>> parser = OneLineParser(prog="main.py x")
    >>> _ = parser.add_argument("--n", type=int, required=True)
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     try:
    ...         parser.parse_args(["--n", "a"])
    ...     except SystemExit as exc:
    ...         code = exc.code
    >>> code, err.getvalue()
    (2, "main.py x: error: argument --n: invalid int value: 'a'; see main.py x --help\\n")
    """

    def error(self, message: str) -> NoReturn:
        self.exit(
            EXIT_USAGE, printable(f"{self.prog}: error: {message}; see {self.prog} --help") + "\n"
        )

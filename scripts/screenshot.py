"""Take the README's screenshot: the real window on a bundled network, after a solve.

    xvfb-run -a -s "-screen 0 1280x720x24" .venv/bin/python scripts/screenshot.py
    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python scripts/screenshot.py \
        /tmp/tower.png path/to/tower.graph.json --theme dark --size 1600x1000 --limit 20

Opens ``vgg16`` (or the bundled example or graph file given) with the GPU (or ``--device``,
or a graph's first device when it has no GPU) at 60 % (or ``--percent``) of its
no-rematerialization peak, solves with the window's own settings (CBC;
``--limit`` seconds), waits for the result to be drawn and saves the window as
``docs/images/window.png`` (or the path given).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication

os.environ.setdefault("XENGINE_STORE", "off")  # a fresh solve, not a stored one


def main(
    out: str = "docs/images/window.png",
    example: str = "vgg16",
    theme: str = "light",
    size: tuple[int, int] = (1280, 720),
    limit: float | None = None,
    percent: int = 60,
    device: str | None = None,
) -> int:
    import pyqtgraph as pg

    from app.main_window import create_window
    from app.settings import AppSettings
    from app.theme import apply_theme

    app = QApplication([sys.argv[0]])
    pg.setConfigOptions(antialias=True)
    apply_theme(app, theme)
    # settings of its own (the tour seen), never the user's
    qsettings = QSettings(os.path.join(tempfile.mkdtemp(), "s.ini"), QSettings.Format.IniFormat)
    settings = AppSettings(qsettings)
    settings.set_tour_seen(True)
    window = create_window(None, settings)
    window.resize(*size)
    if os.path.exists(example):
        window.open_file(example)
    else:
        window.open_example(example)
    document = window.document
    if limit is not None:
        document.set_settings(replace(document.settings, time_limit_s=limit))
    names = [d.name for d in document.graph.devices]
    limited = device or ("gpu" if "gpu" in names else names[0])
    budget = document.landmarks().peak * percent // 100
    document.set_memory_limits({limited: budget + document.graph.device(limited).fixed_memory})

    def save() -> None:
        window.grab().save(out)
        print(f"saved {out}: {window.width()}x{window.height()}")
        window.close()
        app.quit()

    window.controller.finished.connect(lambda _result: QTimer.singleShot(3000, save))
    QTimer.singleShot(1000, window.graph_view.canvas.fit)
    QTimer.singleShot(1500, window.controller.solve)
    QTimer.singleShot(120_000, app.quit)  # never hang
    return app.exec()


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/images/window.png")
    parser.add_argument("example", nargs="?", default="vgg16", help="bundled name or graph file")
    parser.add_argument("--theme", default="light", choices=("light", "dark"))
    parser.add_argument("--size", default="1280x720", help="window size, WIDTHxHEIGHT")
    parser.add_argument("--limit", type=float, help="solver time limit in seconds")
    parser.add_argument("--percent", type=int, default=60, help="budget, %% of the peak")
    parser.add_argument("--device", help="the device limited (default: gpu, else the first)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse(sys.argv[1:])
    width, height = (int(v) for v in args.size.split("x"))
    raise SystemExit(
        main(
            args.out,
            args.example,
            args.theme,
            (width, height),
            args.limit,
            args.percent,
            args.device,
        )
    )

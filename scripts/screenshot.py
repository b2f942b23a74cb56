"""Take the README's screenshot: the real window on a bundled network, after a solve.

    xvfb-run -a -s "-screen 0 1280x720x24" .venv/bin/python scripts/screenshot.py

Opens ``vgg16`` with the GPU at 60 % of its no-rematerialization peak, solves with the
window's own settings (CBC), waits for the result to be drawn and saves the window as
``docs/images/window.png`` (or the path given).
"""

from __future__ import annotations

import os
import sys
import tempfile

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication

os.environ.setdefault("XENGINE_STORE", "off")  # a fresh solve, not a stored one


def main(out: str = "docs/images/window.png", example: str = "vgg16") -> int:
    import pyqtgraph as pg

    from app.main_window import create_window
    from app.settings import AppSettings
    from app.theme import apply_theme

    app = QApplication([sys.argv[0]])
    pg.setConfigOptions(antialias=True)
    apply_theme(app, "light")
    # settings of its own (the tour seen), never the user's
    qsettings = QSettings(os.path.join(tempfile.mkdtemp(), "s.ini"), QSettings.Format.IniFormat)
    settings = AppSettings(qsettings)
    settings.set_tour_seen(True)
    window = create_window(None, settings)
    window.resize(1280, 720)
    window.open_example(example)
    document = window.document
    gpu = document.landmarks().peak * 6 // 10 + document.graph.device("gpu").fixed_memory
    document.set_memory_limits({"gpu": gpu})

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


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))

"""The first-launch tour: shown once, dismissible, remembered in QSettings, reachable again."""

from __future__ import annotations

from app.main_window import MainWindow
from app.tour import TOUR


def test_tour_shows_on_first_launch_and_is_remembered(qtbot, app_settings):
    app_settings.set_tour_seen(False)
    window = MainWindow(app_settings)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(window.tour.isVisible)
    assert window.tour.step == 0 and window.tour.card.target == "graph"
    assert window.tour.target_widget() is window.docks["graph"]
    window.tour.show_step(3)
    assert window.tour.target_widget() is window.schedule_tabs
    window.tour.dismiss()
    assert not window.tour.isVisible() and app_settings.tour_seen()
    window.document.undo_stack.setClean()
    window.close()

    again = MainWindow(app_settings)
    qtbot.addWidget(again)
    again.show()
    qtbot.waitExposed(again)
    assert not again.tour.isVisible()  # dismissed once, never again on its own
    again.tour.start()  # Help > Show Tour
    assert again.tour.isVisible() and again.tour.step == 0
    for _ in range(len(TOUR)):
        again.tour.next_button.click()
    assert not again.tour.isVisible()
    again.document.undo_stack.setClean()
    again.close()


def test_tour_is_in_the_help_menu(make_window):
    window = make_window(None)
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    show = next(a for a in help_menu.actions() if a.text() == "Show &Tour")
    show.trigger()
    assert window.tour.isVisible()
    window.tour.dismiss()


def test_tour_card_hides_what_lies_under_it(qtbot, make_window):
    """With a style sheet the card was see-through: the Gantt chart's tool row (the concurrent
    check box) showed through its title at 1280x720."""
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QWidget

    window = make_window("chain")
    window.tour.start()
    card = window.tour
    under = QWidget(window)
    under.setStyleSheet("background: #ff0000;")
    under.setGeometry(card.geometry())
    under.show()
    card.raise_()
    image = window.grab().toImage()
    ratio = image.width() / window.width()
    inside = card.geometry().adjusted(6, 6, -6, -6)
    red = sum(
        QColor(image.pixel(int(x * ratio), int(y * ratio))) == QColor("#ff0000")
        for x in range(inside.left(), inside.right(), 7)
        for y in range(inside.top(), inside.bottom(), 7)
    )
    assert red == 0
    under.deleteLater()
    card.dismiss()


def test_tour_leaves_the_focus_where_the_step_keys_work(qtbot, make_window):
    """After Done the focus went to the first device's name field: the arrow keys the last
    card promises moved the text cursor there and Space typed into the name."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QLineEdit

    from solver.optimize.methods import solve

    window = make_window("chain")
    window.document.set_result(solve(window.document.graph, "checkpoint-all:cpu"))
    window.activateWindow()
    qtbot.waitActive(window)
    window.tour.start()
    for _ in range(len(TOUR)):
        window.tour.next_button.setFocus()
        qtbot.waitUntil(window.tour.next_button.hasFocus)
        window.tour.next_button.click()
    focus = QApplication.focusWidget()
    assert not isinstance(focus, QLineEdit)
    QTest.keyClick(focus, Qt.Key.Key_Right)
    QTest.keyClick(focus, Qt.Key.Key_Right)
    assert window.document.cursor == 1
    assert window.devices_panel.rows["cpu"].name_edit.text() == "cpu"

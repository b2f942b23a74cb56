"""A pytest plugin for every test (``-p tests.isolated_store`` in pyproject.toml): a
throw-away result store, never the user's own.

Each test gets an empty store in its own temporary directory through ``XENGINE_STORE``
(issue 13), so a solve stored by one test can never answer another's. (A plugin, not a
``tests/conftest.py``: with ``--doctest-modules`` two conftest modules clash by name.)
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_result_store(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XENGINE_STORE", str(tmp_path_factory.mktemp("store") / "results.sqlite3"))

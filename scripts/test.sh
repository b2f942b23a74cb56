#!/usr/bin/env bash
# Set everything up, then run the linter and the whole test suite headless.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
export QT_QPA_PLATFORM=offscreen
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # solver/, configured in pyproject.toml
.venv/bin/lint-imports  # the floors of solver/ and app/ ([tool.importlinter] in pyproject.toml)
exec .venv/bin/python -m pytest -q "$@"

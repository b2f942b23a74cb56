#!/usr/bin/env bash
# Set everything up, then open XEngine Studio on the bundled example network (or on "$@").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh app
exec .venv/bin/python main.py "$@"

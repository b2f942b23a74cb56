#!/usr/bin/env bash
# Set up everything XEngine Studio needs on a Debian machine: Qt's system libraries, a venv in
# .venv and the Python packages. Safe to re-run; installs only what is missing.
# Usage: scripts/setup.sh [app|test]   (test also installs the test tools and the importers' torch/onnx)
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-app}"

# Qt's libraries: offscreen needs the first line; a real X window the xcb ones.
apt_packages=(python3 python3-venv libglib2.0-0 libgl1 libegl1 libxkbcommon0 libfontconfig1 libdbus-1-3
              libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-render-util0
              libxcb-shape0 libxkbcommon-x11-0)
if command -v dpkg >/dev/null 2>&1; then
  missing=()
  for p in "${apt_packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || dpkg -s "${p}t64" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    echo "installing system packages: ${missing[*]}"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

python=python3
"$python" -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ needed"'
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -U pip
extras="highs,cpsat"  # both optional: the app runs on CBC alone
[ "$purpose" = test ] && extras="highs,cpsat,test,onnx,dask"  # dask: the cluster sweep test (quick)
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[${extras}]"
if [ "$purpose" = test ] && [ "${XENGINE_SKIP_TORCH:-0}" != 1 ]; then
  # torch is optional (importer tests skip without it). 2.13.0 is a local CPU wheel on our
  # machines; elsewhere pip fetches the default build. XENGINE_SKIP_TORCH=1 skips it.
  .venv/bin/python -c 'import torch' 2>/dev/null \
    || .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" \
    || echo "torch not installed: the torch importer tests will be skipped"
  # The model corpus (torchvision and transformers definitions), after torch so that pip keeps
  # the CPU wheel (torchvision 0.28 asks for torch==2.13.0, which it satisfies).
  if .venv/bin/python -c 'import torch' 2>/dev/null; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[corpus]" \
      || echo "the model corpus is not installed: its tests will be skipped"
  fi
fi

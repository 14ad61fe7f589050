#!/usr/bin/env bash
# The test command (README "The two commands"; .ci/run runs exactly this). Works on a fresh CPU machine:
# installs torch's CPU wheel if torch is missing (never the CUDA build), the package with its test
# and rtx extras, checks formatting, then runs every tier; tiers whose requirements are missing
# (gpu, trt without a GPU/TensorRT) skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! $PY -c "import torch" 2>/dev/null; then
  $PY -m pip install -q "torch==2.13.0"   # the CPU wheel on our machines
fi
$PY -m pip install -q --no-build-isolation -e ".[test,rtx]"

$PY -m ruff check .
$PY -m ruff format --check .
git ls-files 'csrc/*.h' 'csrc/*.cpp' 'csrc/*.cu' 'csrc/*.cuh' | xargs clang-format --dry-run --Werror

$PY -m pytest -q -rs "$@"

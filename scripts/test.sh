#!/usr/bin/env bash
# The test command (README "The two commands"; .ci/run runs exactly this, in a fresh virtual environment).
# Works on a fresh machine: installs torch's CPU wheel when torch is missing (never the CUDA build), pins the
# torch that is installed for every later pip call (PIP_CONSTRAINT: the extras here and the packages a tier's
# conftest installs), installs this checkout editable with its test and rtx extras (nothing is compiled at install
# time), checks formatting, then runs pytest over tests/: every tier, those whose requirements are missing skip
# with the reason. pytest runs in parallel workers (pytest-xdist), a test file each: one per core, at most 4
# (TORCHTRT_PLUGINS_TEST_WORKERS sets the number; 0 runs every test in this process). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# The CPU wheel (local version +cpu) is on PyTorch's CPU index, not on PyPI, so no CUDA build can match it.
TORCH_CPU=${TORCHTRT_PLUGINS_TORCH:-torch==2.13.0+cpu}
TORCH_CPU_INDEX=${TORCHTRT_PLUGINS_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

if ! $PY -c "import torch" 2>/dev/null; then
  echo "+ pip install $TORCH_CPU"
  $PY -m pip install -q "$TORCH_CPU" --extra-index-url "$TORCH_CPU_INDEX" --timeout 15 --retries 1
fi
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
$PY -c "import torch; print(f'torch=={torch.__version__}')" 2>/dev/null >"$constraints"
export PIP_CONSTRAINT=$constraints
# The package with its own dependencies first (nlohmann-json is the harness's), then the plugin library, launchers
# and harness built into the cache (what the first test would build) while pip installs the extras: the build keeps
# the cores busy, the installs mostly wait on unpacking. A build that fails here is left to the tests to report.
echo "+ pip install -e . (constraint: $(cat "$constraints"))"
$PY -m pip install -q -e .
prebuild_log=$(mktemp)
# torchtrt_plugins/_build.py by its path, as setup.py loads it (the package is not importable while pip installs).
$PY -c "import runpy; b = runpy.run_path('torchtrt_plugins/_build.py'); \
b['plugin_library_unavailable']() or b['build_plugin_library'](quiet=True)" >"$prebuild_log" 2>&1 &
prebuild=$!
trap 'kill "$prebuild" 2>/dev/null || true; rm -f "$constraints" "$prebuild_log"' EXIT
echo "+ pip install -e .[test,rtx] (the native libraries build meanwhile)"
$PY -m pip install -q -e ".[test,rtx]"

$PY -m ruff check .
$PY -m ruff format --check .
# The clang-format of the test extra (this Python's scripts folder, else the one on PATH).
clang_format=$($PY -c "import os, sysconfig; print(os.path.join(sysconfig.get_path('scripts'), 'clang-format'))")
[ -x "$clang_format" ] || clang_format=clang-format
git ls-files 'csrc/*.h' 'csrc/*.cpp' 'csrc/*.cu' 'csrc/*.cuh' 'tests/*.h' 'tests/*.cpp' 'tests/*.cu' | xargs "$clang_format" --dry-run --Werror

wait "$prebuild" || echo "+ the native build before the tests failed (the tests build again and report it): $(tail -n 3 "$prebuild_log")"
workers=${TORCHTRT_PLUGINS_TEST_WORKERS:-$(($(nproc) < 4 ? $(nproc) : 4))}
$PY -m pytest -q -rs -n "$workers" --dist loadfile "$@"

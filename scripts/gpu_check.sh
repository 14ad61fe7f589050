#!/usr/bin/env bash
# The whole GPU check in one call (see README "Verification tiers"): install, build the native pieces,
# run the cpu+gpu tiers, compute-sanitizer over the harness tests, and the benchmarks.
# Logs and results go to $OUT (the device tool returns that folder). Usage on the GPU machine:
#   bash scripts/gpu_check.sh [quick|full]        (TensorRT headers in .deps/tensorrt/include)
set -uo pipefail
MODE=${1:-full}
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export TENSORRT_INCLUDE_DIR=${TENSORRT_INCLUDE_DIR:-$PWD/.deps/tensorrt/include}
export TORCHTRT_PLUGINS_CACHE=${TORCHTRT_PLUGINS_CACHE:-/tmp/torchtrt_plugins_cache}
PY=${PYTHON:-python3}

step() { echo "=== $* ($(date +%T))"; }

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

step "install"
$PY -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | grep -v "Running pip as" | tail -3

step "build"
$PY -c "import torchtrt_plugins as t; from torchtrt_plugins import _build; print(_build.build_plugin_library()); print('cuda ops:', t.native.load_torch_ops())" 2>&1 | tee "$OUT/build.log"

step "pytest cpu+gpu"
$PY -m pytest tests/cpu tests/gpu -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -40

if [ "$MODE" = "full" ]; then
  if ls tests/gpu/test_harness*_gpu.py >/dev/null 2>&1; then
    step "compute-sanitizer memcheck over the gpu harness tests"
    compute-sanitizer --tool memcheck --target-processes all --error-exitcode 99 \
      $PY -m pytest tests/gpu -q -p no:cacheprovider -k harness 2>&1 | tee "$OUT/sanitizer.log" | tail -15
    echo "sanitizer exit: ${PIPESTATUS[0]}" | tee -a "$OUT/sanitizer.log"
  fi
  step "benchmarks"
  if $PY -c "import torchtrt_plugins.cli" 2>/dev/null; then
    $PY -m torchtrt_plugins bench --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" | tail -60
  fi
fi
step "done"

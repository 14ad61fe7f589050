#!/usr/bin/env bash
# The GPU check (README "Verification tiers"), in steps so each device call stays under its time limit:
#   bash scripts/gpu_check.sh [tests] [sanitizer] [bench] [bench-quick]      (default: tests sanitizer bench)
# Installs the checkout, builds the native pieces, runs the cpu+gpu(+trt when present) tiers,
# compute-sanitizer memcheck over the harness gpu tests, and the benchmarks. Logs and results go to
# $OUT. TensorRT headers: $TENSORRT_INCLUDE_DIR or .deps/tensorrt/include.
set -uo pipefail
STEPS=${*:-tests sanitizer bench}
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export TENSORRT_INCLUDE_DIR=${TENSORRT_INCLUDE_DIR:-$PWD/.deps/tensorrt/include}
export TORCHTRT_PLUGINS_CACHE=${TORCHTRT_PLUGINS_CACHE:-/tmp/torchtrt_plugins_cache}
PY=${PYTHON:-python3}

step() { echo "=== $* ($(date +%T))"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

step "install + build"
$PY -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | grep -v "Running pip as" | tail -3
$PY -m torchtrt_plugins build 2>&1 | tee "$OUT/build.log" | tail -8

if has tests; then
  step "pytest cpu+gpu+trt"
  $PY -m pytest tests/cpu tests/gpu tests/trt -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -25
fi
if has sanitizer; then
  step "compute-sanitizer memcheck over the gpu harness tests"
  compute-sanitizer --tool memcheck --error-exitcode 99 \
    $PY -m pytest tests/gpu -q -p no:cacheprovider -k harness 2>&1 | tee "$OUT/sanitizer.log" | tail -8
  echo "sanitizer exit: ${PIPESTATUS[0]}" | tee -a "$OUT/sanitizer.log"
fi
if has bench; then
  step "benchmarks (full)"
  $PY -m torchtrt_plugins bench --no-progress --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" | tail -70
fi
if has bench-quick; then
  step "benchmarks (quick)"
  $PY -m torchtrt_plugins bench --quick --no-progress --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" | tail -70
fi
step "done"

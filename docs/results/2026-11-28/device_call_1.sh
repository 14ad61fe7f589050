#!/usr/bin/env bash
# Session 2026-11-28, call 1: build, eager host time (interleaved with the twins), eager-kernel gpu tests, lab.
set -uo pipefail
export TENSORRT_INCLUDE_DIR=$PWD/.deps/tensorrt/include TORCHTRT_PLUGINS_CACHE=/tmp/torchtrt_plugins_cache
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/pip.log" 2>&1
timeout 240 python3 -m torchtrt_plugins build > "$OUT/build.log" 2>&1
echo "build exit $? at ${SECONDS}s"; tail -3 "$OUT/build.log"
timeout 100 .labbin/add_rms_lab small > "$OUT/lab_small.log" 2>&1
echo "lab small exit $? at ${SECONDS}s"; cat "$OUT/lab_small.log"
timeout 200 python3 scripts/eager_overhead.py cpp > "$OUT/eager_host.log" 2>&1
echo "eager-host exit $? at ${SECONDS}s"; grep -vE "^\s*$" "$OUT/eager_host.log" | tail -30
timeout 120 python3 -m pytest tests/gpu/test_eager_kernel_gpu.py -q -rs -p no:cacheprovider > "$OUT/eager_tests.log" 2>&1
echo "eager tests exit $? at ${SECONDS}s"; tail -4 "$OUT/eager_tests.log"
timeout $((570 - SECONDS)) .labbin/add_rms_lab large fp32 > "$OUT/lab_large_fp32.log" 2>&1
echo "lab large fp32 exit $? at ${SECONDS}s"; grep -E "shipped|not in place|copy, again| c[0-9]+ b|one" "$OUT/lab_large_fp32.log" | head -60

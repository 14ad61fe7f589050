#!/usr/bin/env bash
# Session 2026-11-28, call 4 (H100): add_rms_norm float32 at the widest rows against Liger and inductor: as shipped
# (PDL on, then off), then with 384 threads x 8 vectors for rows of 2049-3072 vectors (.run/fp32_384x8.patch).
set -uo pipefail
export TENSORRT_INCLUDE_DIR=$PWD/.deps/tensorrt/include TORCHTRT_PLUGINS_CACHE=/tmp/torchtrt_plugins_cache
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/liger*.whl > /dev/null 2>&1
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/pip.log" 2>&1
export PYTHONPATH=$PWD:/tmp/site
bench() {
  timeout 150 python3 -m torchtrt_plugins bench --no-progress --no-plots --out "$OUT/$1" --ops add_rms_norm --dtypes fp32 \
    --sizes 2048x12288,4096x12288,4096x10240 --timer graph --repeats 5 --providers torch.compile,liger,torchtrt > "$OUT/$1.log" 2>&1
  echo "$1 exit $? at ${SECONDS}s"; grep -E "add_rms_norm|torch.compile|liger|torchtrt|copy" "$OUT/$1.log" | grep -v "^torchtrt-plugins"
}
timeout 200 python3 -m torchtrt_plugins build > "$OUT/build.log" 2>&1; echo "build at ${SECONDS}s"
bench shipped
TORCHTRT_PLUGINS_PDL=0 bench shipped_pdl0
git apply .run/fp32_384x8.patch && timeout 200 python3 -m torchtrt_plugins build > "$OUT/build_b.log" 2>&1; echo "build b at ${SECONDS}s"
bench b384x8
timeout 100 python3 -m pytest tests/gpu/test_add_rms_norm_gpu.py -q -p no:cacheprovider -x > "$OUT/add_rms_tests_b.log" 2>&1
echo "tests b exit $? at ${SECONDS}s"; tail -2 "$OUT/add_rms_tests_b.log"

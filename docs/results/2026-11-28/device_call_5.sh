#!/usr/bin/env bash
# Session 2026-11-28, call 5 (H100): add_rms_norm float32 at the widest rows, 512 threads x 6 vectors (Liger's
# split) for rows of 2049-3072 vectors: the weight loaded after the sum (c), then with the row (d).
set -uo pipefail
export TENSORRT_INCLUDE_DIR=$PWD/.deps/tensorrt/include TORCHTRT_PLUGINS_CACHE=/tmp/torchtrt_plugins_cache
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/liger*.whl > /dev/null 2>&1
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/pip.log" 2>&1
export PYTHONPATH=$PWD:/tmp/site
for v in c d; do
  cp .run/add_rms_norm.orig.cu csrc/kernels/add_rms_norm.cu && git apply .run/fp32_$v.patch || exit 1
  timeout 100 python3 -m torchtrt_plugins build > "$OUT/build_$v.log" 2>&1; echo "build $v exit $? at ${SECONDS}s"
  timeout 80 python3 -m torchtrt_plugins bench --no-progress --no-plots --out "$OUT/$v" --ops add_rms_norm --dtypes fp32 \
    --sizes 2048x12288,4096x12288,4096x10240 --timer graph --repeats 5 --providers torch.compile,liger,torchtrt > "$OUT/$v.log" 2>&1
  echo "$v exit $? at ${SECONDS}s"; grep -E "add_rms_norm|liger|torchtrt|compile" "$OUT/$v.log" | grep -v "^torchtrt-plugins"
done
timeout 40 python3 -m pytest tests/gpu/test_add_rms_norm_gpu.py -q -p no:cacheprovider -x > "$OUT/tests_d.log" 2>&1
echo "tests d exit $? at ${SECONDS}s"; tail -1 "$OUT/tests_d.log"

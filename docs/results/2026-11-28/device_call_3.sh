#!/usr/bin/env bash
# Session 2026-11-28, call 3 (H100): the pyops gpu tests (with Liger), eager host time, add_rms_norm against Liger and
# inductor (graph timer, 5 repeats).
set -uo pipefail
export TENSORRT_INCLUDE_DIR=$PWD/.deps/tensorrt/include TORCHTRT_PLUGINS_CACHE=/tmp/torchtrt_plugins_cache
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/liger*.whl > /dev/null 2>&1
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/pip.log" 2>&1
export PYTHONPATH=$PWD:/tmp/site
timeout 200 python3 -m torchtrt_plugins build > "$OUT/build.log" 2>&1
echo "build exit $? at ${SECONDS}s"
timeout 150 python3 -m pytest tests/gpu/test_example_pyops_gpu.py -q -rs -p no:cacheprovider > "$OUT/pyops_gpu.log" 2>&1
echo "pyops gpu exit $? at ${SECONDS}s"; tail -3 "$OUT/pyops_gpu.log"
timeout 150 python3 scripts/eager_overhead.py h100 > "$OUT/eager_host_h100.log" 2>&1
echo "eager-host exit $? at ${SECONDS}s"; grep -E "twin|peer|floor" "$OUT/eager_host_h100.log"
timeout $((585 - SECONDS)) python3 -m torchtrt_plugins bench --no-progress --out "$OUT/add_rms" --ops add_rms_norm \
  --dtypes bf16,fp16,fp32 --sizes 128x2048,1024x2048,4096x4096,2048x12288,4096x12288,100000x128 --timer graph \
  --repeats 5 --providers copy,torch.compile,liger,torchtrt > "$OUT/add_rms.log" 2>&1
echo "bench exit $? at ${SECONDS}s"; grep -vE "^\s*$" "$OUT/add_rms.log" | tail -30

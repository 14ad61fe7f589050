#!/usr/bin/env bash
# Session 2026-11-28, call 2: build, the gpu tier, eager host time (this tree, then the tree before eager.cpp's change).
set -uo pipefail
export TENSORRT_INCLUDE_DIR=$PWD/.deps/tensorrt/include TORCHTRT_PLUGINS_CACHE=/tmp/torchtrt_plugins_cache
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/pip.log" 2>&1
timeout 200 python3 -m torchtrt_plugins build > "$OUT/build.log" 2>&1
echo "build exit $? at ${SECONDS}s"
timeout 330 python3 -m pytest tests/gpu -q -rs -p no:cacheprovider > "$OUT/gpu_tier.log" 2>&1
echo "gpu tier exit $? at ${SECONDS}s"; tail -3 "$OUT/gpu_tier.log"
for who in new old; do
  [ "$who" = old ] && export PYTHONPATH=$PWD/.old || export PYTHONPATH=$PWD
  timeout $((590 - SECONDS)) python3 ${PYTHONPATH}/scripts/eager_overhead.py $who > "$OUT/eager_host_$who.log" 2>&1
  echo "eager-host $who exit $? at ${SECONDS}s"; grep -E "twin|from" "$OUT/eager_host_$who.log"
done

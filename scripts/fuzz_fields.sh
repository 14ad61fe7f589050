#!/usr/bin/env bash
# The createPlugin fuzz (csrc/harness/fuzz.h) long, under a sanitizer, over every creator of our plugin library, the
# example package's, torchvision roi_align/nms' and the SDK's test ops, each library built for it:
#
#   bash scripts/fuzz_fields.sh asan     [COUNT] [SEED]   AddressSanitizer + LeakSanitizer (gcc's libasan)
#   bash scripts/fuzz_fields.sh plain    [COUNT] [SEED]
#
# No compute-sanitizer mode: createPlugin and the field round trips make no CUDA call, and compute-sanitizer refuses
# a program that makes none ("Target application terminated before first instrumented API call"); the fuzz's
# memory errors are host memory errors, which AddressSanitizer finds.
#
# COUNT: iterations per creator (default 20000), SEED: default 1. Builds with CMake into $FUZZ_BUILD (default
# /tmp/ttp_fuzz_<mode>): this project (plugin library, harness, the program ttp_fuzz_fields) and
# scripts/fuzz_fields/CMakeLists.txt (the declared-op libraries, through the SDK's CMake package), -j$JOBS (default
# 2), CUDA architectures $TORCHTRT_PLUGINS_CUDA_ARCHS (default 90: the fuzz launches no kernel). TensorRT headers:
# $TENSORRT_INCLUDE_DIR or $TENSORRT_ROOT/include. Writes the request and the report beside the build, prints the
# counts per creator and exits non-zero on a violation, a sanitizer error or a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# This checkout's package generates the declared ops' tables, whatever else is installed.
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
MODE=${1:-asan}
COUNT=${2:-20000}
SEED=${3:-1}
PY=${PYTHON:-python3}
JOBS=${JOBS:-2}
B=${FUZZ_BUILD:-/tmp/ttp_fuzz_$MODE}
ARCHS=${TORCHTRT_PLUGINS_CUDA_ARCHS:-90}

case $MODE in
  asan)
    HOST="-fsanitize=address -fno-omit-frame-pointer -g"
    LINK="-fsanitize=address"
    ;;
  plain)
    HOST="-g"
    LINK=""
    ;;
  *)
    echo "usage: $0 asan|plain [COUNT] [SEED]" >&2
    exit 2
    ;;
esac
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
flags=("${generator[@]}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$ARCHS" "-DCMAKE_CXX_FLAGS=$HOST"
  "-DCMAKE_CUDA_FLAGS=-Xcompiler=${HOST// /,}" "-DCMAKE_SHARED_LINKER_FLAGS=$LINK" "-DCMAKE_MODULE_LINKER_FLAGS=$LINK"
  "-DCMAKE_EXE_LINKER_FLAGS=$LINK" "-DCMAKE_CUDA_COMPILER=$(command -v nvcc)")
[ -n "${TENSORRT_INCLUDE_DIR:-}" ] && flags+=("-DTENSORRT_INCLUDE_DIR=$TENSORRT_INCLUDE_DIR")

echo "=== build ($MODE) into $B"
# The harness's JSON headers: the nlohmann-json package of $PY.
cmake -S "$ROOT" -B "$B/project" "${flags[@]}" "-DTORCHTRT_PLUGINS_PYTHON=$(command -v "$PY")" > "$B.configure.log" 2>&1 || { tail -20 "$B.configure.log"; exit 2; }
cmake --build "$B/project" -j"$JOBS" --target torchtrt_plugins_plugins ttp_fuzz_fields
cmake -S "$ROOT/scripts/fuzz_fields" -B "$B/declared" "${flags[@]}" "-DTORCHTRT_PLUGINS_PYTHON=$(command -v "$PY")" \
  "-Dtorchtrt_plugins_DIR=$($PY -m torchtrt_plugins sdk --cmake-dir)" \
  >> "$B.configure.log" 2>&1 || { tail -20 "$B.configure.log"; exit 2; }
cmake --build "$B/declared" -j"$JOBS" \
  --target myops_plugins torchtrt_vision_plugins sdk_test_plugins

echo "=== request: $COUNT iterations per creator, seed $SEED"
libraries=("$B/project/libtorchtrt_plugins_v3.so" "$B/declared/libmyops_plugins.so"
  "$B/declared/libtorchtrt_vision_plugins.so" "$B/declared/libsdk_test_plugins.so")
$PY tests/field_fuzz.py --seed "$SEED" --count "$COUNT" \
  "${libraries[@]}" > "$B/request.json"

echo "=== ttp_fuzz_fields ($MODE)"
status=0
case $MODE in
  asan)
    ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:exitcode=3 "$B/project/ttp_fuzz_fields" "$B/request.json" \
      > "$B/report.json" 2> "$B/sanitizer.log" || status=$?
    ;;
  plain) "$B/project/ttp_fuzz_fields" "$B/request.json" > "$B/report.json" 2> "$B/sanitizer.log" || status=$? ;;
esac
tail -5 "$B/sanitizer.log"
$PY - "$B/report.json" <<'PYEOF' || true
import json, sys

report = json.load(open(sys.argv[1]))
for c in report.get("creators", []):
    print(f"{c['plugin']:32} attempts {c['attempts']:7} created {c['created']:6} rejected {c['rejected']:6} "
          f"must-reject {c['must_reject']:6} round trips {c['round_trips']:6} violations {c['violations']}")
print("violations:", report.get("violation_count", report.get("fatal")))
for v in report.get("violations", [])[:20]:
    print(" ", v)
PYEOF
echo "fuzz exit: $status (0: clean; 1: violations; 2: could not run; 3: sanitizer errors; other: crash)"
exit "$status"

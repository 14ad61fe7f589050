#!/usr/bin/env bash
# Builds and runs the kernel lab (lab.cu); with $BASE_DIR (default ./base: the base commit's csrc/kernels, from
# `git show <base>:csrc/kernels/<file>`, untracked) the base kernels are timed beside the current ones. Usage: bash run.sh [op] > log
set -euo pipefail
cd "$(dirname "$0")"
ARCH=${ARCH:-sm_90}
FLAGS="-std=c++17 -O3 -arch=$ARCH -lineinfo"
SOURCES="lab.cu pad_lab.cu ../../csrc/kernels/masked_rows.cu"
BUILD=${BUILD:-/tmp/kernel_lab}
mkdir -p "$BUILD"
EXTRA=""
BASE_DIR=${BASE_DIR:-base}
if [ -d "$BASE_DIR" ]; then
  rm -rf "$BUILD/base" && cp -r "$BASE_DIR" "$BUILD/base"
  for k in rms_norm pad_to masked_rows; do
    nvcc $FLAGS -Dttp=ttp_base -c "$BUILD/base/$k.cu" -o "$BUILD/base_$k.o" &
  done
  wait
  EXTRA="-I$BUILD -DTTP_LAB_BASE $BUILD/base_rms_norm.o $BUILD/base_pad_to.o $BUILD/base_masked_rows.o"
fi
nvcc $FLAGS $EXTRA $SOURCES -o "$BUILD/lab"
"$BUILD/lab" "${1:-all}"

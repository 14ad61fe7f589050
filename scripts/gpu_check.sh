#!/usr/bin/env bash
# The GPU check (docs/tiers.md), in steps so each device call stays under its time limit:
#   bash scripts/gpu_check.sh [tests] [sanitizer] [fuzz] [bench] [bench-quick] [bench-graph] [multi-gpu] [pyops]
#                             [results] [eager-host] [decoder-ab] [zoo] [inductor-bench] [detection]
#                                                                          (default: tests sanitizer bench)
# Installs the checkout, builds the native pieces, runs the cpu+gpu(+trt when present) tiers,
# compute-sanitizer memcheck over the harness gpu tests, and the benchmarks. Logs and results go to
# $OUT. Runs from the checkout or from a copy of it (no .git needed). TensorRT headers: $TENSORRT_INCLUDE_DIR or
# .deps/tensorrt/include. Optional wheels (e.g. liger-kernel for the rms_norm benchmark) in $WHEELS_DIR (default
# .whl) are installed with --no-deps into /tmp/site first. Extra arguments for every bench step: $BENCH_ARGS
# (e.g. "--ops rms_norm --sizes 1x4096,8x4096 --repeats 5"); pytest selection for the tests step: $PYTEST_ARGS.
#   tests       cpu + gpu (+ trt) tiers, then the eager kernel's gpu tests in its stable flavour
#   sanitizer   compute-sanitizer memcheck over the gpu harness tests
#   fuzz        scripts/fuzz_fields.sh asan $FUZZ_COUNT (default 20000): the createPlugin fuzz under AddressSanitizer
#               (every creator of our, myops', torchvision's and the SDK test ops' libraries), built in /tmp
#   bench       every benchmark, do_bench timer            bench-quick  the same, --quick
#   bench-graph every benchmark, CUDA-graph timer (GPU time per call without host overhead)
#   multi-gpu   tests/gpu/test_multi_gpu.py alone (device 1, two GPUs at once; skips below 2 GPUs)
#   pyops       kernels written in Python (examples/pyops: Liger's Triton RMSNorm, a CuPy SwiGLU): their gpu and cpu
#               tests, then scripts/bench_pyops.py (GPU time vs the same kernel launched from Python, host time)
#   results     the commands of docs/results.md, each into its own folder under $OUT ($RESULTS names a subset:
#               rms_bf16 rms_fp32 pad masked masked_widths add_rms vision decoder)
#   eager-host  scripts/eager_overhead.py: host time per eager call of every declared op beside its torch peer
#   decoder-ab  scripts/decoder_ab.py at 1x128 and 8x512 (hidden 2048): the block under inductor (twice: the placement
#               control) against inductor with our lowering pass, interleaved in one process; $AB_PROCESSES processes a
#               shape (default 3), $AB_ROUNDS rounds each (default 80)
#   zoo         the detector zoo on the GPU: tests/gpu/test_zoo_gpu.py (each model's converted graph, declared ops
#               through the harness, against eager CUDA), then `zoo --time` (eager vs converted, GPU and host time)
#               into $OUT/zoo.csv
#   inductor-bench  benchmarks.inductor_switch --quick: models with ops no converter takes, eager vs the converted
#               graph with the Inductor plugins' switch off and on vs torch.compile (GPU and host time), into
#               $OUT/inductor_switch.csv
#   detection   the detection ops (issue 46): compute-sanitizer memcheck over each one's gpu tests (roi_align's and
#               nms's in test_vision_gpu.py), one sanitized process a file, all at once (memcheck_<file>.log; efficient_nms's takes the longest, about 150 s
#               alone on the H200), then their benchmarks with roi_align's and nms's (do_bench, 3 repeats)
set -uo pipefail
STEPS=${*:-tests sanitizer bench}
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export TENSORRT_INCLUDE_DIR=${TENSORRT_INCLUDE_DIR:-$PWD/.deps/tensorrt/include}
export TORCHTRT_PLUGINS_CACHE=${TORCHTRT_PLUGINS_CACHE:-/tmp/torchtrt_plugins_cache}
PY=${PYTHON:-python3}
WHEELS_DIR=${WHEELS_DIR:-.whl}
BENCH_ARGS=${BENCH_ARGS:-}
PYTEST_ARGS=${PYTEST_ARGS:-tests/cpu tests/gpu tests/trt}

step() { echo "=== $* ($(date +%T))"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), \
'gpus', torch.cuda.device_count())"
[ -d "$TENSORRT_INCLUDE_DIR" ] || echo "warning: TENSORRT_INCLUDE_DIR=$TENSORRT_INCLUDE_DIR does not exist"

if compgen -G "$WHEELS_DIR/*.whl" > /dev/null; then
  step "optional wheels from $WHEELS_DIR"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$WHEELS_DIR"/*.whl 2>&1 | grep -v "Running pip as" | tail -3
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

step "install + build"
$PY -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | grep -v "Running pip as" | tail -3
$PY -m torchtrt_plugins build 2>&1 | tee "$OUT/build.log" | tail -8

if has tests; then
  step "pytest $PYTEST_ARGS"
  # shellcheck disable=SC2086
  $PY -m pytest $PYTEST_ARGS -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -25
  step "pytest: the eager kernel's gpu tests again in its stable flavour"
  TORCHTRT_PLUGINS_EAGER=stable $PY -m pytest tests/gpu/test_eager_kernel_gpu.py -q -rs -p no:cacheprovider 2>&1 |
    tee "$OUT/pytest_eager_stable.log" | tail -5
fi
if has zoo; then
  step "the detector zoo on the GPU"
  $PY -m pytest tests/gpu/test_zoo_gpu.py -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/zoo_tests.log" | tail -25
  $PY -m torchtrt_plugins zoo --time --csv "$OUT/zoo.csv" 2>&1 | tee "$OUT/zoo_time.log" | tail -90
fi
if has inductor-bench; then
  step "the Inductor switch's benchmark"
  $PY -m torchtrt_plugins.benchmarks.inductor_switch --quick --csv "$OUT/inductor_switch.csv" 2>&1 |
    tee "$OUT/inductor_switch.log" | tail -60
fi
if has multi-gpu; then
  step "pytest multi-gpu"
  $PY -m pytest tests/gpu/test_multi_gpu.py -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/multi_gpu.log" | tail -25
fi
if has pyops; then
  step "pyops: kernels written in Python"
  $PY -m pytest tests/gpu/test_example_pyops_gpu.py tests/cpu/test_kernels_aot.py -q -rs -p no:cacheprovider 2>&1 |
    tee "$OUT/pyops_tests.log" | tail -25
  $PY scripts/bench_pyops.py --out "$OUT/bench_pyops" 2>&1 | tee "$OUT/bench_pyops.log" | tail -80
fi
if has sanitizer; then
  step "compute-sanitizer memcheck over the gpu harness tests"
  # Not the host-sync tests: their test plugin synchronizes inside a stream capture on purpose, an API error that
  # memcheck reports (error 900/901); they run in the tests step.
  compute-sanitizer --tool memcheck --error-exitcode 99 \
    $PY -m pytest tests/gpu -q -p no:cacheprovider -k "harness and not host" 2>&1 | tee "$OUT/sanitizer.log" | tail -8
  echo "sanitizer exit: ${PIPESTATUS[0]}" | tee -a "$OUT/sanitizer.log"
fi
if has fuzz; then
  step "createPlugin fuzz under AddressSanitizer"
  FUZZ_BUILD=/tmp/ttp_fuzz JOBS=$(nproc) PYTHON=$PY bash scripts/fuzz_fields.sh asan "${FUZZ_COUNT:-20000}" 2>&1 | tee "$OUT/fuzz.log" | tail -16
  echo "fuzz exit: ${PIPESTATUS[0]}" | tee -a "$OUT/fuzz.log"
fi
bench() {  # bench <name> <args...>
  local name=$1
  shift
  step "benchmarks ($name)"
  # shellcheck disable=SC2086
  $PY -m torchtrt_plugins bench --no-progress --out "$OUT/$name" "$@" $BENCH_ARGS 2>&1 | tee "$OUT/$name.log" | tail -70
}
has bench && bench bench
has bench-quick && bench bench --quick
has bench-graph && bench bench_graph --timer graph
if has detection; then
  step "detection ops: memcheck over their gpu tests, one process a file"
  declare -A MEMCHECK=()
  for f in efficient_nms multi_scale_deformable_attention multi_scale_deformable_attention_lowering deform_conv2d \
    multi_scale_roi_align vision; do
    compute-sanitizer --tool memcheck --error-exitcode 99 $PY -m pytest "tests/gpu/test_${f}_gpu.py" -q -rs \
      -p no:cacheprovider > "$OUT/memcheck_$f.log" 2>&1 &
    MEMCHECK[$f]=$!
  done
  for f in "${!MEMCHECK[@]}"; do
    wait "${MEMCHECK[$f]}"
    echo "memcheck $f: exit $? ($(tail -1 "$OUT/memcheck_$f.log"))"
  done
  bench detection --repeats 3 --timer do_bench \
    --ops deform_conv2d,multi_scale_deformable_attention,efficient_nms,multi_scale_roi_align,roi_align,nms
fi
RESULTS=${RESULTS:-rms_bf16 rms_fp32 pad masked masked_widths add_rms vision decoder}
result() { [[ " $RESULTS " == *" $1 "* ]] && bench "$@"; }
if has results; then
  R="--repeats 3 --timer do_bench,graph,host"
  RMS="eager_composite,F.rms_norm,torch.compile,liger,torchtrt,plugin_enqueue"
  result rms_bf16 $R --ops rms_norm --dtypes bf16 --providers $RMS \
    --sizes 1x4096,8x4096,128x4096,1024x2048,4096x4096,4096x12288,100000x128
  result rms_fp32 $R --ops rms_norm --dtypes fp32 --sizes 1x4096,4096x4096 --providers $RMS
  result pad $R --ops pad_to --dtypes int8,bf16,fp16 --providers eager_composite,F.pad,torch.compile,torchtrt,plugin_enqueue \
    --sizes 8x64x224x224x256x256,8x64x256x256x224x224,16x32x512x512x480x544
  result masked --repeats 3 --timer do_bench,host --ops masked_rows --dtypes bf16,fp32 \
    --sizes 4000000x16x50,10000000x8x50,1000000x64x50,10000000x1x50 \
    --providers 'eager_composite,x?mask?,torch.compile,torchtrt,plugin_enqueue'
  # masked_rows against x[mask] at every row width from 4 to 4096 elements (about 64 MB of x each, half kept)
  result masked_widths --repeats 3 --timer do_bench --ops masked_rows --dtypes bf16,fp16,fp32 \
    --sizes 8000000x4x50,2000000x16x50,500000x64x50,125000x256x50,32000x1024x50,8000x4096x50 \
    --providers 'x?mask?,torchtrt'
  # add_rms_norm (in place) against the unfused ops, inductor's fusion and Liger's fused kernel, at every shape
  result add_rms $R --ops add_rms_norm --dtypes bf16,fp16,fp32 \
    --sizes 1x4096,8x4096,128x4096,1024x2048,4096x4096,4096x12288,100000x128
  result vision $R --ops nms,roi_align
  result decoder $R --ops decoder_block
fi
if has eager-host; then
  step "eager host time"
  $PY scripts/eager_overhead.py cpp 2>&1 | tee "$OUT/eager_host.log"
  TORCHTRT_PLUGINS_EAGER=python $PY scripts/eager_overhead.py python 2>&1 | tee -a "$OUT/eager_host.log"
fi
if has decoder-ab; then
  step "decoder block under torch.compile: inductor against inductor + our pass"
  for shape in 1x128x2048 8x512x2048; do
    for run in $(seq "${AB_PROCESSES:-3}"); do
      log="$OUT/decoder_ab_${shape}_$run.log"
      $PY scripts/decoder_ab.py "$shape" "${AB_ROUNDS:-80}" >"$log" 2>&1
      echo "$shape, process $run (exit $?):"
      grep -E "median|ratio" "$log"
    done
  done
fi
step "done"

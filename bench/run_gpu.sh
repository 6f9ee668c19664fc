#!/usr/bin/env bash
# Runs flashmma's benchmarks and the PyTorch extension's tests on the GPU machine, in one go:
#
#   FLASHMMA_COMMIT=<short hash> bash bench/run_gpu.sh OUTDIR
#
# Steps, each logged to OUTDIR/run_gpu.log; a failed step does not stop the others, and the script
# exits non-zero at the end if any failed:
#   compile_time   nvcc time of one forward instantiation (fp16, d=128, default config, sm_90a)
#   bench_build    flashmma_bench with CMake (CUDA architectures 90a, Ninja if present)  } in
#   torch_build    flashmma_torch, compiled just in time by importing it               } parallel
#   bench_fa2      flashmma_bench --preset fa2 --dtype both       -> OUTDIR/bench_fa2.csv
#   mma_peak       flashmma_mma_peak, the mma.sync ceiling         -> run_gpu.log
#   pytest         examples/pytorch/test_flashmma_torch.py        -> OUTDIR/pytest.log
#   compare        bench/compare.py (flashmma vs SDPA FA2/cuDNN)  -> OUTDIR/compare.{csv,json},
#                                                                    OUTDIR/perf.md
#   plot           bench/plot_perf.py, where matplotlib exists    -> OUTDIR/perf.png
#   bench_variants flashmma_bench --preset variants --dtype both --rounds 3 -> bench_variants.csv
#   compare_variants bench/compare_variants.py (flashmma vs FlexAttention and FA2 on windows,
#                  ALiBi, softcap)                                -> OUTDIR/perf_variants.md,
#                                                                    compare_variants.{csv,json}
# OUTDIR receives at most 8 files, so that all of them come back from the device machine: in the
# full run the variant steps' CSV and JSON stay in WORK_DIR/variants (their numbers are in
# perf_variants.md and run_gpu.log).
#
# Only the variant part, when GPU time is short (a few minutes, FlexAttention's compiles included):
#   ONLY_VARIANTS=1 bash bench/run_gpu.sh OUTDIR
# builds flashmma_bench_variants (the kernels of --preset variants alone) and runs bench_variants
# and compare_variants, all four of their files in OUTDIR. VARIANTS=0 leaves them out of the full
# run.
#
# Environment (all optional):
#   FLASHMMA_COMMIT  commit to record in perf.md (default: git rev-parse, else 'unknown')
#   CUDA_ARCHS       CMake CUDA architectures for the benchmark (default 90a)
#   WORK_DIR         build folders (default /tmp/flashmma-gpu)
#   JOBS             parallel compile jobs (default: nproc)
#   BENCH_ARGS       extra flashmma_bench arguments (e.g. "--iters 50")
#   COMPARE_ARGS     extra compare.py arguments (e.g. "--quick")
#   COMPARE_VARIANTS_ARGS  extra compare_variants.py arguments (e.g. "--quick", "--dtype fp16")
#   PYTEST_ARGS      extra pytest arguments (e.g. "-x")
#   HOST_CC, HOST_CXX  host compilers (default /usr/bin/gcc and /usr/bin/g++ where they exist)
#   SKIP_STEPS       steps to leave out, e.g. "bench_fa2 mma_peak plot"
#   PREBUILT         a build tree with flashmma_bench and flashmma_mma_peak (with ONLY_VARIANTS:
#                    flashmma_bench_variants) compiled elsewhere for CUDA architectures 90a: the
#                    benchmark builds are left out
#
# Why the host compilers are pinned: the GPU image's CC/CXX (under /opt/gcc) link libstdc++
# statically into shared objects. A PyTorch extension linked that way carries its own copy of the
# iostream and locale code, and formatting a number into an error message (TORCH_CHECK with an
# integer) then segfaults against the process's libstdc++. The system compiler is the one that
# PyTorch itself was built with (GCC 13.3) and links libstdc++ dynamically. flashmma_torch's build
# checks this itself and stops with a message on such a compiler; the pin lets the run go on.
# shellcheck disable=SC2317  # the step functions are called through step()
set -u

if [ $# -ne 1 ]; then
  echo "usage: bash bench/run_gpu.sh OUTDIR" >&2
  exit 2
fi
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=$(mkdir -p "$1" && cd "$1" && pwd)
WORK_DIR=${WORK_DIR:-/tmp/flashmma-gpu}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCHS=${CUDA_ARCHS:-90a}
LOG="$OUTDIR/run_gpu.log"
STEP_LOGS="$WORK_DIR/step-logs"
BUILD_DIR=${PREBUILT:-$WORK_DIR/bench-build}
export FLASHMMA_TORCH_BUILD_DIR="$WORK_DIR/torch-extension"
export PYTHONUNBUFFERED=1
ORIGINAL_COMPILERS="CC=${CC:-} CXX=${CXX:-}"
HOST_CC=${HOST_CC:-$( [ -x /usr/bin/gcc ] && echo /usr/bin/gcc || echo "${CC:-gcc}")}
HOST_CXX=${HOST_CXX:-$( [ -x /usr/bin/g++ ] && echo /usr/bin/g++ || echo "${CXX:-g++}")}
export CC="$HOST_CC" CXX="$HOST_CXX"
export MAX_JOBS="$JOBS"

mkdir -p "$WORK_DIR" "$STEP_LOGS"
rm -f "$STEP_LOGS"/*
: > "$LOG"

note() { echo "$*" | tee -a "$LOG"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# left_out NAME: whether SKIP_STEPS names the step (then step() records it as skipped, and a
# missing binary it would have run is no failure).
left_out() { [[ " ${SKIP_STEPS:-} " == *" $1 "* ]]; }

# step NAME COMMAND...: runs COMMAND with its output in a step log, then appends that log to
# run_gpu.log and records the exit status. Safe to run in the background.
step() {
  local name=$1
  shift
  local start end status
  if left_out "$name"; then
    echo "left out by SKIP_STEPS" > "$STEP_LOGS/$name.log"
    echo "$name skip 0" > "$STEP_LOGS/$name.status"
    return 0
  fi
  start=$(date +%s.%N)
  ("$@") > "$STEP_LOGS/$name.log" 2>&1
  status=$?
  end=$(date +%s.%N)
  echo "$name $status $(elapsed "$start" "$end")" > "$STEP_LOGS/$name.status"
}

# finish NAME: appends a finished step's log to run_gpu.log and prints its outcome.
finish() {
  local name=$1 status seconds
  read -r _ status seconds < "$STEP_LOGS/$name.status"
  {
    echo "=================================================================== $name"
    cat "$STEP_LOGS/$name.log"
  } >> "$LOG"
  if [ "$status" = skip ]; then
    note "[skip]   $name (SKIP_STEPS)"
    SKIPPED+=("$name")
  elif [ "$status" -eq 0 ]; then
    note "[ok]     $name (${seconds} s)"
  else
    note "[FAILED] $name (exit $status, ${seconds} s; see run_gpu.log)"
    FAILED+=("$name")
  fi
}

skip() {
  note "[skip]   $1 ($2)"
  SKIPPED+=("$1")
}

FAILED=()
SKIPPED=()
COMMIT=${FLASHMMA_COMMIT:-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)}

ONLY_VARIANTS=${ONLY_VARIANTS:-}
VARIANTS=${VARIANTS:-1}
if [ -n "$ONLY_VARIANTS" ]; then
  VARIANT_DIR="$OUTDIR"
else
  VARIANT_DIR="$WORK_DIR/variants"
fi
mkdir -p "$VARIANT_DIR"

note "flashmma GPU run: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $COMMIT, output in $OUTDIR${ONLY_VARIANTS:+ (variant steps only)}"
{
  echo "=================================================================== environment"
  echo "host compilers: CC=$CC CXX=$CXX (the environment had $ORIGINAL_COMPILERS)"
  "$CXX" --version 2>&1 | head -1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  cmake --version 2>&1 | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
} >> "$LOG"

if [ -z "$ONLY_VARIANTS" ]; then
# --- compile time of one instantiation -----------------------------------------------------------
compile_one() {
  local unit="$WORK_DIR/one_instantiation.cu"
  cat > "$unit" <<'EOF'
// One forward kernel: fp16, head dim 128, the default config.
#include <flashmma/flashmma.cuh>

template flashmma::Status flashmma::forward<flashmma::DefaultConfigT<__half, 128>>(
    const flashmma::ForwardParams&, cudaStream_t);
EOF
  local start end
  start=$(date +%s.%N)
  nvcc -std=c++17 -O3 --expt-relaxed-constexpr -arch=sm_90a -I"$REPO/include" \
    -c "$unit" -o "$WORK_DIR/one_instantiation.o" || return 1
  end=$(date +%s.%N)
  echo "compile time of one forward instantiation (fp16, d=128, default, sm_90a):" \
    "$(elapsed "$start" "$end") s"
  cuobjdump --dump-resource-usage "$WORK_DIR/one_instantiation.o" 2>&1 | grep -i -E "function|REG" || true
}
step compile_time compile_one
finish compile_time
grep "compile time" "$STEP_LOGS/compile_time.log"

# --- builds, side by side -------------------------------------------------------------------------
build_bench() {
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S "$REPO" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DFLASHMMA_BUILD_TESTS=OFF \
    -DFLASHMMA_BUILD_EXAMPLES=OFF -DFLASHMMA_BUILD_BENCH=ON &&
    cmake --build "$BUILD_DIR" -j "$JOBS" --target flashmma_bench flashmma_mma_peak
}
build_torch_extension() {
  cd "$REPO/examples/pytorch" &&
    python3 -c 'import flashmma_torch, sys; print("loaded", flashmma_torch._C.__file__)'
}
if [ -z "${PREBUILT:-}" ]; then
  step bench_build build_bench &
  bench_pid=$!
fi
step torch_build build_torch_extension &
torch_pid=$!
[ -n "${bench_pid:-}" ] && wait "$bench_pid"
wait "$torch_pid"
[ -z "${PREBUILT:-}" ] && finish bench_build
finish torch_build

# --- runs -----------------------------------------------------------------------------------------
if [ -x "$BUILD_DIR/bench/flashmma_bench" ] || left_out bench_fa2; then
  # shellcheck disable=SC2086  # BENCH_ARGS is split on purpose
  step bench_fa2 "$BUILD_DIR/bench/flashmma_bench" --preset fa2 --dtype both --format csv \
    --out "$OUTDIR/bench_fa2.csv" ${BENCH_ARGS:-}
  finish bench_fa2
else
  skip bench_fa2 "flashmma_bench was not built"
  FAILED+=(bench_fa2)
fi
if [ -x "$BUILD_DIR/bench/flashmma_mma_peak" ] || left_out mma_peak; then
  step mma_peak "$BUILD_DIR/bench/flashmma_mma_peak"
  finish mma_peak
else
  skip mma_peak "flashmma_mma_peak was not built"
  FAILED+=(mma_peak)
fi

run_pytest() {
  cd "$REPO/examples/pytorch" || return 1
  # shellcheck disable=SC2086  # PYTEST_ARGS is split on purpose
  python3 -m pytest -q -p no:cacheprovider test_flashmma_torch.py ${PYTEST_ARGS:-} \
    > "$OUTDIR/pytest.log" 2>&1
  local status=$?
  tail -n 30 "$OUTDIR/pytest.log"
  return "$status"
}
step pytest run_pytest
finish pytest
tail -n 1 "$OUTDIR/pytest.log" 2>/dev/null | tee -a "$LOG"

run_compare() {
  # shellcheck disable=SC2086
  python3 "$REPO/bench/compare.py" --out "$OUTDIR/compare.csv" --markdown "$OUTDIR/perf.md" \
    --commit "$COMMIT" ${COMPARE_ARGS:-}
}
step compare run_compare
finish compare

if [ -f "$OUTDIR/compare.csv" ] && python3 -c 'import matplotlib' 2> /dev/null; then
  step plot python3 "$REPO/bench/plot_perf.py" "$OUTDIR/compare.csv" --out "$OUTDIR/perf.png"
  finish plot
else
  skip plot "no compare.csv or no matplotlib; run bench/plot_perf.py elsewhere"
fi

fi  # the steps before the variant ones

# --- attention variants ---------------------------------------------------------------------------
build_variants_bench() {
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S "$REPO" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DFLASHMMA_BUILD_TESTS=OFF \
    -DFLASHMMA_BUILD_EXAMPLES=OFF -DFLASHMMA_BUILD_BENCH=ON &&
    cmake --build "$BUILD_DIR" -j "$JOBS" --target flashmma_bench_variants
}
run_compare_variants() {
  # shellcheck disable=SC2086  # COMPARE_VARIANTS_ARGS is split on purpose
  python3 "$REPO/bench/compare_variants.py" --bench-csv "$VARIANT_DIR/bench_variants.csv" \
    --bench-command "$(basename "$VARIANTS_BENCH") $VARIANTS_BENCH_ARGS" \
    --out "$VARIANT_DIR/compare_variants.csv" --markdown "$OUTDIR/perf_variants.md" \
    --commit "$COMMIT" ${COMPARE_VARIANTS_ARGS:-}
}
if [ -n "$ONLY_VARIANTS" ] || [ "$VARIANTS" != 0 ]; then
  VARIANTS_BENCH="$BUILD_DIR/bench/flashmma_bench"
  if [ -n "$ONLY_VARIANTS" ]; then
    VARIANTS_BENCH="$BUILD_DIR/bench/flashmma_bench_variants"
    if [ -z "${PREBUILT:-}" ]; then
      step variants_build build_variants_bench
      finish variants_build
    fi
  fi
  VARIANTS_BENCH_ARGS="--preset variants --dtype both --rounds 3 --format csv --out bench_variants.csv${BENCH_ARGS:+ $BENCH_ARGS}"
  # No stale numbers: compare_variants reads whatever bench_variants.csv is there.
  rm -f "$VARIANT_DIR/bench_variants.csv" "$VARIANT_DIR/compare_variants.csv" \
    "$VARIANT_DIR/compare_variants.json" "$OUTDIR/perf_variants.md"
  if [ -x "$VARIANTS_BENCH" ]; then
    # shellcheck disable=SC2086  # BENCH_ARGS is split on purpose
    step bench_variants "$VARIANTS_BENCH" --preset variants --dtype both --rounds 3 --format csv \
      --out "$VARIANT_DIR/bench_variants.csv" ${BENCH_ARGS:-}
    finish bench_variants
  else
    skip bench_variants "$(basename "$VARIANTS_BENCH") was not built"
    FAILED+=(bench_variants)
  fi
  # A failed row leaves the others' numbers in the CSV: compare what there is.
  if [ -f "$VARIANT_DIR/bench_variants.csv" ]; then
    step compare_variants run_compare_variants
    finish compare_variants
  else
    skip compare_variants "no bench_variants.csv"
    FAILED+=(compare_variants)
  fi
fi

# --- summary --------------------------------------------------------------------------------------
note ""
note "=== summary"
grep "compile time" "$STEP_LOGS/compile_time.log" 2>/dev/null | tee -a "$LOG"
grep -E "mma.sync|per SM|B from" "$STEP_LOGS/mma_peak.log" 2>/dev/null | tee -a "$LOG"
[ -f "$OUTDIR/pytest.log" ] && note "pytest: $(tail -n 1 "$OUTDIR/pytest.log")"
if [ -f "$OUTDIR/perf.md" ]; then
  sed -n '/^## Summary/,/^## Target/p' "$OUTDIR/perf.md" | grep '^- ' | tee -a "$LOG"
fi
sed -n '/^variant and paged-cache ratios/,/^$/p' "$STEP_LOGS/bench_variants.log" 2>/dev/null | tee -a "$LOG"
if [ -f "$OUTDIR/perf_variants.md" ]; then
  sed -n '/^### Summary/,/^### Sliding/p' "$OUTDIR/perf_variants.md" | grep '^- ' | tee -a "$LOG"
fi
note "files in $OUTDIR: $(find "$OUTDIR" -maxdepth 1 -type f -printf '%f ')"
if [ ${#FAILED[@]} -ne 0 ]; then
  note "FAILED steps: ${FAILED[*]}"
  exit 1
fi
note "all steps passed${SKIPPED[*]:+ (skipped: ${SKIPPED[*]})}"
exit 0

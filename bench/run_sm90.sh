#!/usr/bin/env bash
# The Hopper path's check and timing on an H100/H200, in one go and within bounded time:
#
#   FLASHMMA_COMMIT=<short hash> bash bench/run_sm90.sh OUTDIR
#
# Steps, logged to OUTDIR/run_sm90.log (a failed step does not stop the others):
#   compile_time  nvcc time of one Hopper instantiation (forward<Sm90TileConfig<bf16, 128, 128>>
#                 with one policy, sm_90a)
#   build         the sm_90a tests (primitives and test_forward_sm90) and flashmma_bench, with
#                 Ninja where present, within BUILD_TIMEOUT seconds (default 420)
#   ctest         ctest -R sm90, TEST_TIMEOUT seconds per test (default 300) -> OUTDIR/ctest.log
#   bench         flashmma_bench --preset sm90 (each row on the portable default and on every
#                 Hopper tile of its head dim)                     -> OUTDIR/bench_sm90.csv
# Environment: CATCH2_PREFIX (else .deps/catch2_*.deb is unpacked), WORK_DIR (default
# /tmp/flashmma-sm90), JOBS (default nproc), DTYPE (bench, default bf16), BENCH_ARGS,
# BUILD_TIMEOUT, TEST_TIMEOUT, FLASHMMA_COMMIT, STEPS and PREBUILT (as in tests/run_gpu_suite.sh).
set -u
if [ $# -ne 1 ]; then
  echo "usage: bash bench/run_sm90.sh OUTDIR" >&2
  exit 2
fi
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=$(mkdir -p "$1" && cd "$1" && pwd)
WORK_DIR=${WORK_DIR:-/tmp/flashmma-sm90}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCHS=90a  # the Hopper tests and tiles exist only there
LOG="$OUTDIR/run_sm90.log"
mkdir -p "$WORK_DIR"
: > "$LOG"
failed=()
summary=()

# shellcheck source=tests/tools/gpu_steps.sh
source "$REPO/tests/tools/gpu_steps.sh"
BUILD=$(build_dir)

compile_one() {
  local unit="$WORK_DIR/one_sm90_instantiation.cu" start
  cat > "$unit" <<'EOF'
// One Hopper kernel: bf16, head dim 128, 128 keys per tile, no mask.
#include <flashmma/flashmma.cuh>

template flashmma::Status flashmma::forward<flashmma::Sm90TileConfig<__nv_bfloat16, 128, 128>,
                                            flashmma::FullAttention>(
    const flashmma::ForwardParams&, const flashmma::FullAttention&, cudaStream_t);
EOF
  start=$(date +%s.%N)
  nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
    -I"$REPO/include" -c "$unit" -o "$WORK_DIR/one_sm90_instantiation.o" || return 1
  awk -v a="$start" -v b="$(date +%s.%N)" \
    'BEGIN { printf "compile time of one Hopper instantiation (bf16, d=128, n=128, sm_90a): %.1f s\n", b - a }'
}

build() {
  bounded_build 420 --target \
    test_sm90_descriptor test_sm90_wgmma_layout test_sm90_tensor_map test_sm90_tile_config \
    test_sm90_tma test_sm90_wgmma_ss test_sm90_wgmma_rs test_sm90_barriers test_sm90_stmatrix \
    test_forward_sm90 flashmma_bench
}

run_ctest() {
  ctest --test-dir "$BUILD" --output-on-failure -R sm90 --timeout "${TEST_TIMEOUT:-300}" \
    > "$OUTDIR/ctest.log" 2>&1
  local status=$?
  grep -E "tests passed|tests failed" "$OUTDIR/ctest.log" | tail -n 1 > "$WORK_DIR/ctest-line"
  grep -E "Test +#" "$OUTDIR/ctest.log"
  return $status
}

run_bench() {
  # shellcheck disable=SC2086  # BENCH_ARGS is split on purpose
  "$BUILD/bench/flashmma_bench" --preset sm90 --dtype "${DTYPE:-bf16}" --format csv \
    --out "$OUTDIR/bench_sm90.csv" ${BENCH_ARGS:-}
}

step compile_time compile_one
[ -n "${PREBUILT:-}" ] || step build build
step ctest run_ctest
step bench run_bench

compile_time_line() { grep "compile time" "$LOG"; }
finish_run compile_time_line

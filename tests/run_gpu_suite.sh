#!/usr/bin/env bash
# The whole GPU check of a commit, in one go on a machine with a GPU:
#
#   bash tests/run_gpu_suite.sh OUTDIR
#
# Steps (each logged to OUTDIR/gpu_suite.log; a failed step does not stop the others, and the
# script exits non-zero at the end if any failed):
#   build        configure and build everything (CUDA_ARCHS, default 90a) with Ninja if present,
#                within BUILD_TIMEOUT seconds (default 480), past failed targets
#   ctest        the test suite, GPU tests included
#   large        the hidden "[.large]" case (tensors of more than 2^31 elements, about 9 GB)
#   sanitizer    compute-sanitizer memcheck, racecheck and synccheck on basic_forward (its build on
#                flashmma::kernels where there is one) over a set
#                of shapes (masks, GQA, ragged lengths, every kernel family) and on custom_tiles
#   policies     compute-sanitizer memcheck, racecheck and synccheck on the score-policy tests
#                (windows, ALiBi, softcap, a user policy; racecheck on the window cases)
#   variants     memcheck on the variant fields through forward<Config>(params) and on the
#                document-mask policy (device arrays of its own)
#   backward     compute-sanitizer memcheck, racecheck and synccheck on the backward kernels
#                (dQ's atomics; the Hopper kernel's dS^T and P^T through shared memory) with
#                windows, softcap and ALiBi, portable and Hopper
#   persistent   compute-sanitizer memcheck, racecheck and synccheck on the persistent Hopper
#                kernels walking their tiles (test_forward_sm90's small walks, test_forward_varlen's
#                packed prefill at d = 128)
#   no_arch      examples/basic_forward.cu built by plain `nvcc` without -arch (compute_75 only
#                under CUDA 13): it must be refused with kUnsupportedDevice, never run
# ONLY_POLICIES=1 builds only test_forward_policies and runs only its sanitizer step.
# Environment: CATCH2_PREFIX (a Catch2 install prefix, else .deps/catch2_*.deb is unpacked),
# CUDA_ARCHS, WORK_DIR (default /tmp/flashmma-suite), JOBS (default nproc), BUILD_TIMEOUT,
# TEST_TIMEOUT (seconds per test, default 300), FLASHMMA_COMMIT (the commit to print, where the
# tree has no .git), STEPS (the steps to run, e.g. "ctest large"; default all), PREBUILT (a build
# tree configured with this source path and compiled elsewhere, unpacked at the path it was built
# in: the build step is left out, so that a GPU machine's time goes to running; its
# build-machine tests, compile_fail, consumer, kernel_symbols and the ptxas reports, are left
# out too, and so are the tests whose executables the packed tree lacks), CTEST_ARGS (ctest
# arguments, e.g. -R to run a few; they replace that default).
set -u
if [ $# -ne 1 ]; then
  echo "usage: bash tests/run_gpu_suite.sh OUTDIR" >&2
  exit 2
fi
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=$(mkdir -p "$1" && cd "$1" && pwd)
WORK_DIR=${WORK_DIR:-/tmp/flashmma-suite}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCHS=${CUDA_ARCHS:-90a}
LOG="$OUTDIR/gpu_suite.log"
mkdir -p "$WORK_DIR"
: > "$LOG"
failed=()
summary=()

# shellcheck source=tests/tools/gpu_steps.sh
source "$REPO/tests/tools/gpu_steps.sh"
BUILD=$(build_dir)

# Everything, or test_forward_policies alone (ONLY_POLICIES), within BUILD_TIMEOUT (default 480).
build() {
  local targets=()
  [ -n "${ONLY_POLICIES:-}" ] && targets=(--target test_forward_policies)
  bounded_build 480 "${targets[@]}"
}

# The tests of BUILD whose executable is absent, as a regex alternation NAME|NAME|... with each
# name escaped (CTest lists such a test with no command).
missing_test_executables() {
  ctest --test-dir "$1" --show-only=json-v1 2>/dev/null | python3 -c '
import json, re, sys
tests = json.load(sys.stdin).get("tests", [])
print("|".join(re.escape(t["name"]) for t in tests if not t.get("command")))'
}

run_ctest() {
  # A prebuilt tree lacks what the build-machine tests need (its objects, build system, install,
  # the compiler's Catch2): they run where it was built, unless CTEST_ARGS says otherwise.
  local args=${CTEST_ARGS:-}
  if [ -n "${PREBUILT:-}" ] && [ -z "$args" ]; then
    args='-E ^(compile_fail|consumer)|kernel_symbols|ptxas_report'
    # So do the tests whose executable a packed tree left out (pack_build.sh's EXCLUDE, for a
    # size limit): named here, so that the ctest line counts only what could run.
    local absent names
    absent=$(missing_test_executables "$BUILD")
    if [ -n "$absent" ]; then
      names=${absent//|/ }
      echo "ctest: left out, their executables not in the prebuilt tree: ${names//\\/}"
      args="$args|^($absent)\$"
    fi
  fi
  # shellcheck disable=SC2086  # args is split on purpose
  ctest --test-dir "$BUILD" --output-on-failure -j 4 --timeout "${TEST_TIMEOUT:-300}" \
    $args | tee "$OUTDIR/ctest.log"
  local status=${PIPESTATUS[0]}
  grep -E "tests passed|tests failed" "$OUTDIR/ctest.log" | tail -n 1 > "$WORK_DIR/ctest-line"
  return "$status"
}

large() { "$BUILD/tests/test_forward_api" "[.large]"; }

# One sanitizer tool over the shapes; every run must report 0 errors and pass its check.
sanitize() {
  local tool=$1 shapes=(
    "--seqlen 200 --head-dim 64"
    "--seqlen 257 --seqlen-k 130 --head-dim 128 --causal --dtype bf16"
    "--seqlen 130 --seqlen-k 257 --head-dim 128 --heads 8 --heads-kv 2"
    "--seqlen 300 --head-dim 256 --causal"
    "--seqlen 77 --head-dim 40 --dtype bf16"
    "--seqlen 192 --head-dim 192 --causal --dtype bf16"
    "--seqlen 129 --head-dim 96 --heads 4 --heads-kv 1"
    "--seqlen 256 --head-dim 128 --dtype bf16"
  ) shape status=0
  # basic_forward.cu on flashmma::kernels where the tree built it (the header-only program is
  # built only on request there: examples/CMakeLists.txt); the same kernels either way.
  local example="$BUILD/examples/basic_forward_precompiled"
  [ -x "$example" ] || example="$BUILD/examples/basic_forward"
  for shape in "${shapes[@]}"; do
    # shellcheck disable=SC2086  # the shape is a list of options
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$example" \
      --batch 1 $shape > "$WORK_DIR/sanitizer.out" 2>&1 || status=1
    tail -n 3 "$WORK_DIR/sanitizer.out"
  done
  compute-sanitizer --tool "$tool" --error-exitcode 9 "$BUILD/examples/custom_tiles" \
    > "$WORK_DIR/sanitizer.out" 2>&1 || status=1
  tail -n 3 "$WORK_DIR/sanitizer.out"
  return $status
}

# The score-policy kernels (tile skipping at both ends of a window) under the three tools.
sanitize_policies() {
  local status=0 binary="$BUILD/tests/test_forward_policies"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$binary" > "$WORK_DIR/san.out" 2>&1 || status=1
  tail -n 4 "$WORK_DIR/san.out"
  compute-sanitizer --tool synccheck --error-exitcode 9 "$binary" > "$WORK_DIR/san.out" 2>&1 || status=1
  tail -n 4 "$WORK_DIR/san.out"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$binary" "sliding windows*" \
    > "$WORK_DIR/san.out" 2>&1 || status=1
  tail -n 4 "$WORK_DIR/san.out"
  return $status
}

# The variant fields through the dispatch (windows, softcap, ALiBi reading its slopes) and a
# user's policy reading its own device arrays (the document mask), under memcheck.
sanitize_variants() {
  local status=0
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/test_forward_variant_params"     "forward<Config>(params) runs the variant fields too" > "$WORK_DIR/san.out" 2>&1 || status=1
  tail -n 4 "$WORK_DIR/san.out"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/test_document_mask"     > "$WORK_DIR/san.out" 2>&1 || status=1
  tail -n 4 "$WORK_DIR/san.out"
  return $status
}

# Runs the three tools on one test binary's cases that match a Catch2 filter (further Catch2
# arguments, e.g. -c SECTION, after it).
sanitize_three_tools() {  # binary filter [catch2 arguments...]
  local status=0 tool
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" > "$WORK_DIR/san.out" 2>&1 ||
      status=1
    tail -n 4 "$WORK_DIR/san.out"
  done
  return $status
}

# The backward kernels with the policy that skips and masks the most (a window, softcap, ALiBi)
# under the three tools: the portable kernel and the Hopper one (its three head-dim tiles).
sanitize_backward() {
  local status=0
  sanitize_three_tools "$BUILD/tests/test_backward" "backward: windows*" || status=1
  sanitize_three_tools "$BUILD/tests/test_backward_sm90" "sm90 backward: windows*" || status=1
  return $status
}

# The persistent Hopper kernels walking their tiles (the Q-empty barrier, O's staging tile, the
# tile slot the producer fills) under the three tools: dense, and packed sequences (tiles past
# their sequence passed over, O rows stored up to a sequence's end).
sanitize_persistent() {
  local status=0
  sanitize_three_tools "$BUILD/tests/test_forward_sm90" "persistent walk: small shapes*" ||
    status=1
  sanitize_three_tools "$BUILD/tests/test_forward_varlen" \
    "forward(params) runs packed prefill on the Hopper kernel" -c "bf16, head dim 128" || status=1
  return $status
}

# The build mistake of a user who forgets -arch: it must compile, and be refused at run time.
no_arch() {
  nvcc -std=c++17 -I"$REPO/include" "$REPO/examples/basic_forward.cu" -o "$WORK_DIR/no_arch" &&
    { "$WORK_DIR/no_arch" > "$WORK_DIR/no_arch.out" 2>&1; echo "exit status $?" >> "$WORK_DIR/no_arch.out"; } &&
    cat "$WORK_DIR/no_arch.out" &&
    grep -q "compute_75" "$WORK_DIR/no_arch.out" && grep -q "exit status 1" "$WORK_DIR/no_arch.out"
}

[ -n "${PREBUILT:-}" ] || step build build
if [ -z "${ONLY_POLICIES:-}" ]; then
  step ctest run_ctest
  step large large
fi
if [ -z "${ONLY_POLICIES:-}" ]; then
  for tool in memcheck racecheck synccheck; do step "$tool" sanitize "$tool"; done
fi
step policies sanitize_policies
[ -z "${ONLY_POLICIES:-}" ] && step variants sanitize_variants
[ -z "${ONLY_POLICIES:-}" ] && step backward sanitize_backward
[ -z "${ONLY_POLICIES:-}" ] && step persistent sanitize_persistent
step no_arch no_arch

finish_run

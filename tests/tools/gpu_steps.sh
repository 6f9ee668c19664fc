# shellcheck shell=bash
# What the GPU-machine scripts share (sourced by tests/run_gpu_suite.sh and bench/run_sm90.sh):
# steps that log to $LOG and record their outcome, the Catch2 they build against, the bounded
# build and the closing summary. The sourcing script sets REPO, OUTDIR, WORK_DIR, LOG, JOBS and
# CUDA_ARCHS, and declares the arrays `failed` and `summary`.

# step NAME COMMAND...: runs COMMAND, appends its output to $LOG, records the outcome. Where
# STEPS is set (a list of step names), a step not in it is left out and recorded as such.
step() {
  local name=$1 start status
  shift
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then
    summary+=("$(printf '%-13s %-4s' "$name" "left out (STEPS)")")
    return 0
  fi
  start=$(date +%s)
  echo "=== $name: $*" >> "$LOG"
  ("$@") >> "$LOG" 2>&1
  status=$?
  summary+=("$(printf '%-13s %-4s %4ss' "$name" "$([ $status -eq 0 ] && echo ok || echo FAIL)" \
                 "$(( $(date +%s) - start ))")")
  [ $status -eq 0 ] || failed+=("$name")
}

# The build folder: PREBUILT (a tree built elsewhere, at the same absolute path, for the same
# source path), else $WORK_DIR/build. With PREBUILT the build step is left out.
build_dir() { echo "${PREBUILT:-$WORK_DIR/build}"; }

# The Catch2 install prefix: CATCH2_PREFIX, else the Debian package in .deps/, unpacked.
catch2_prefix() {
  if [ -n "${CATCH2_PREFIX:-}" ]; then echo "$CATCH2_PREFIX"; return; fi
  local deb
  deb=$(ls "$REPO"/.deps/catch2_*.deb 2>/dev/null | head -n 1)
  if [ -n "$deb" ]; then
    dpkg -x "$deb" "$WORK_DIR/catch2" && echo "$WORK_DIR/catch2/usr"
  fi
}

# bounded_build DEFAULT_TIMEOUT [ARGS...]: configures $BUILD for CUDA_ARCHS and builds it
# (`cmake --build` ARGS, e.g. --target ...) within BUILD_TIMEOUT seconds (else DEFAULT_TIMEOUT),
# past failed targets where Ninja is present, so that the steps after it run on whatever was
# built. On a timeout the compilers still running are listed in the log (a build once stalled on
# the GPU machine with no error).
bounded_build() {
  local timeout_s=${BUILD_TIMEOUT:-$1} generator=() keep_going=() status
  shift
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja) && keep_going=(-- -k 0)
  cmake -S "$REPO" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DCMAKE_PREFIX_PATH="$(catch2_prefix)" ||
    return 1
  NINJA_STATUS="[%f/%t %es] " timeout "$timeout_s" \
    cmake --build "$BUILD" -j "$JOBS" "$@" "${keep_going[@]}"
  status=$?
  if [ $status -eq 124 ]; then
    echo "build: stopped after $timeout_s s; still running:"
    ps -eo etimes,args | grep -E "nvcc|cicc|ptxas|cudafe|cc1plus|nvlink|fatbinary| ld " |
      grep -v grep | cut -c1-300
  fi
  return $status
}

# finish_run [COMMAND...]: the summary (commit, date, GPU, each step's outcome, COMMAND's
# output, the ctest line) to stdout and OUTDIR/summary.txt; exits 1 if a step failed.
finish_run() {
  {
    echo "commit ${FLASHMMA_COMMIT:-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)}, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
    printf '%s\n' "${summary[@]}"
    [ $# -gt 0 ] && "$@"
    cat "$WORK_DIR/ctest-line" 2>/dev/null
  } | tee "$OUTDIR/summary.txt"
  [ ${#failed[@]} -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
}

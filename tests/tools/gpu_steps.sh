# shellcheck shell=bash
# What the GPU-machine scripts share (sourced by tests/run_gpu_suite.sh and bench/run_sm90.sh):
# steps that log to $LOG and record their outcome, and the Catch2 they build against. The
# sourcing script sets REPO, WORK_DIR and LOG, and declares the arrays `failed` and `summary`.

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

# shellcheck shell=bash
# What the GPU-machine scripts share (sourced by tests/run_gpu_suite.sh and bench/run_sm90.sh):
# steps that log to $LOG and record their outcome, and the Catch2 they build against. The
# sourcing script sets REPO, WORK_DIR and LOG, and declares the arrays `failed` and `summary`.

# step NAME COMMAND...: runs COMMAND, appends its output to $LOG, records the outcome.
step() {
  local name=$1 start status
  shift
  start=$(date +%s)
  echo "=== $name: $*" >> "$LOG"
  ("$@") >> "$LOG" 2>&1
  status=$?
  summary+=("$(printf '%-13s %-4s %4ss' "$name" "$([ $status -eq 0 ] && echo ok || echo FAIL)" \
                 "$(( $(date +%s) - start ))")")
  [ $status -eq 0 ] || failed+=("$name")
}

# The Catch2 install prefix: CATCH2_PREFIX, else the Debian package in .deps/, unpacked.
catch2_prefix() {
  if [ -n "${CATCH2_PREFIX:-}" ]; then echo "$CATCH2_PREFIX"; return; fi
  local deb
  deb=$(ls "$REPO"/.deps/catch2_*.deb 2>/dev/null | head -n 1)
  if [ -n "$deb" ]; then
    dpkg -x "$deb" "$WORK_DIR/catch2" && echo "$WORK_DIR/catch2/usr"
  fi
}

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A compiler launcher (the CUDA_COMPILER_LAUNCHER of a few test targets, tests/CMakeLists.txt):
#   keep_ptxas_report.sh LOG COMPILER ARGS...
# runs the compile as given and keeps all it printed on stderr in LOG, so that the target's
# `*.ptxas_report` test can check ptxas' -v report of the very object the build made, without
# compiling the file again. The report's lines ("ptxas info", and the "bytes stack frame" line
# under each function) go to LOG only; every other line (errors, warnings) is printed as usual.
# The compiler's exit status is this script's.
set -u
log=$1
shift
"$@" 2>"$log.partial"
status=$?
grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' "$log.partial" >&2
mv "$log.partial" "$log"
exit "$status"

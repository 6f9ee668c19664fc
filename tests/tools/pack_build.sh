#!/usr/bin/env bash
# Packs what running a build tree needs (its executables and CTest files; no objects, no
# libraries) into one archive, so that a GPU machine can run the tests and benchmarks of a tree
# compiled elsewhere:
#
#   bash tests/tools/pack_build.sh BUILD_DIR ARCHIVE.tar.xz [SUBDIR...]
#   # on the GPU machine, with the same source tree:
#   python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
#     ARCHIVE.tar.xz BUILD_DIR
#   PREBUILT=BUILD_DIR bash tests/run_gpu_suite.sh OUT
#
# SUBDIRs (e.g. tests, or examples bench) limit the archive to those folders of the tree; the
# top-level CTest file always goes in. An ARCHIVE ending in .xz is xz-compressed, else gzip.
# EXCLUDE (an extended regex) leaves out the paths it matches, e.g. 'test_forward_(varlen|paged)'
# to split a tree over two archives.
# STRIP=1 packs stripped copies of the executables (host symbols only: the device code is data,
# and stays): about 4% smaller, for a carry limit. The .xz archive's 384 MiB dictionary needs
# about 4 GB of memory to pack and 384 MiB to unpack.
# The tree must be unpacked at the absolute path it was built in (CTest records it). The
# compile-fail, consumer, kernel-symbol and ptxas-report tests need the tree's objects, build
# system, install or the build machine's compiler and Catch2, which the archive leaves out: they
# run where the tree was built.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: bash tests/tools/pack_build.sh BUILD_DIR ARCHIVE.tar.xz [SUBDIR...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
archive=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
shift 2
roots=("$@")
[ ${#roots[@]} -eq 0 ] && roots=(.)
cd "$build"
{
  echo ./CTestTestfile.cmake
  find "${roots[@]/#/./}" -path '*/CMakeFiles' -prune -o -type f \
    \( -name CTestTestfile.cmake -o \( -perm -u+x ! -name '*.a' ! -name '*.so' \) \) -print
} | sed 's|^\./\./|./|' | sort -u | grep -vE "${EXCLUDE:-^$}" > "$build/.packed-files"
source_dir=$build
if [ "${STRIP:-0}" = 1 ]; then
  source_dir=$(mktemp -d)
  trap 'rm -rf "$source_dir"' EXIT
  tar -cf - -T "$build/.packed-files" | tar -x -C "$source_dir"
  find "$source_dir" -type f -perm -u+x ! -name '*.cmake' -exec strip {} + 2>/dev/null || true
fi
case "$archive" in
  # One stream with a dictionary as large as the tree: the executables that link the precompiled
  # library hold much the same device code, which a window that spans them stores once.
  *.xz) tar -C "$source_dir" -cf - -T "$build/.packed-files" |
          xz -T1 --lzma2=preset=6,dict=384MiB > "$archive" ;;
  *) tar -C "$source_dir" -czf "$archive" -T "$build/.packed-files" ;;
esac
echo "$(wc -l < "$build/.packed-files") files, $(du -h "$archive" | cut -f1) in $archive"

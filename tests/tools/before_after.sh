#!/usr/bin/env bash
# Compares this tree with an older one on the GPU machine, for a change that claims to keep
# every result bit for bit and the speed within noise:
#
#   bash tests/tools/before_after.sh BASELINE_DIR OUTDIR
#
# BASELINE_DIR holds the older tree (e.g. `git archive <commit> | tar -x -C BASELINE_DIR`).
#   digest   tests/tools/output_digest.cu built against each tree; the listings must be equal
#            (every tested config over odd lengths, GQA, both masks, and the default dispatch)
#   bench    flashmma_bench --preset fa2 of each tree, both dtypes (CUDA_ARCHS, default 90a),
#            two rounds with the trees alternating; OUTDIR/before_after.csv pairs the rows
# Environment: CUDA_ARCHS, WORK_DIR (default /tmp/flashmma-before-after), JOBS, BENCH_ARGS.
# OLD_BENCH and NEW_BENCH (both, paths of flashmma_bench binaries built elsewhere) skip every
# build and the digest: only the bench runs (BASELINE_DIR is then only named in the log).
set -u
if [ $# -ne 2 ]; then
  echo "usage: bash tests/tools/before_after.sh BASELINE_DIR OUTDIR" >&2
  exit 2
fi
NEW=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OLD=$(cd "$1" && pwd)
OUTDIR=$(mkdir -p "$2" && cd "$2" && pwd)
WORK_DIR=${WORK_DIR:-/tmp/flashmma-before-after}
CUDA_ARCHS=${CUDA_ARCHS:-90a}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$WORK_DIR"
status=0

build_digest() {  # tree name
  nvcc -std=c++17 --expt-relaxed-constexpr -O3 -arch="sm_${CUDA_ARCHS}" -I"$1/include" \
       -I"$1/tests" "$NEW/tests/tools/output_digest.cu" -o "$WORK_DIR/digest_$2"
}
build_bench() {  # tree name
  cmake -S "$1" -B "$WORK_DIR/bench_$2" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DFLASHMMA_BUILD_TESTS=OFF \
        -DFLASHMMA_BUILD_EXAMPLES=OFF -DFLASHMMA_BUILD_BENCH=ON > "$WORK_DIR/cmake_$2.log" 2>&1 &&
    cmake --build "$WORK_DIR/bench_$2" -j "$JOBS" --target flashmma_bench > "$WORK_DIR/build_$2.log" 2>&1
}

if [ -n "${OLD_BENCH:-}" ] && [ -n "${NEW_BENCH:-}" ]; then
  echo "prebuilt: $OLD_BENCH (before, $OLD) against $NEW_BENCH (after); no digest"
else
  # The four builds at once (nvcc is single-threaded per unit).
  build_digest "$OLD" old & d1=$!
  build_digest "$NEW" new & d2=$!
  build_bench "$OLD" old & b1=$!
  build_bench "$NEW" new & b2=$!
  for pid in $d1 $d2 $b1 $b2; do wait "$pid" || { echo "a build failed (pid $pid)"; status=1; }; done
  tail -n 5 "$WORK_DIR"/build_*.log
  OLD_BENCH="$WORK_DIR/bench_old/bench/flashmma_bench"
  NEW_BENCH="$WORK_DIR/bench_new/bench/flashmma_bench"

  "$WORK_DIR/digest_old" > "$OUTDIR/digest_old.txt" && "$WORK_DIR/digest_new" > "$OUTDIR/digest_new.txt"
  if cmp -s "$OUTDIR/digest_old.txt" "$OUTDIR/digest_new.txt"; then
    echo "digest: identical, $(wc -l < "$OUTDIR/digest_new.txt") lines, $(grep -c ' ok ' "$OUTDIR/digest_new.txt") ok"
  else
    echo "digest: DIFFERENT"; diff "$OUTDIR/digest_old.txt" "$OUTDIR/digest_new.txt" | head -n 20; status=1
  fi
fi

# Two rounds, the trees alternating, so that drift of the shared machine hits both; each row
# keeps the better of its two runs.
# shellcheck disable=SC2086
for round in 1 2; do
  for tree in old new; do
    bench=$OLD_BENCH; [ "$tree" = new ] && bench=$NEW_BENCH
    "$bench" --preset fa2 --dtype both --format csv \
      ${BENCH_ARGS:-} --out "$OUTDIR/bench_${tree}_$round.csv" > /dev/null \
      2> "$WORK_DIR/bench_$tree.err" || status=1
  done
done
python3 - "$OUTDIR" "$OUTDIR/before_after.csv" <<'PY'
import csv, math, sys
def rows(tree):
    best = {}
    for round in (1, 2):
        with open(f"{sys.argv[1]}/bench_{tree}_{round}.csv") as f:
            for r in csv.DictReader(f):
                if r["status"] == "ok":
                    key = (r["dtype"], r["head_dim"], r["seqlen_q"], r["causal"])
                    best[key] = max(best.get(key, 0.0), float(r["tflops"]))
    return best
old, new = rows("old"), rows("new")
ratios = []
with open(sys.argv[2], "w") as out:
    out.write("dtype,d,n,causal,before_tflops,after_tflops,after_over_before\n")
    for key in sorted(old, key=lambda k: (k[0], int(k[1]), int(k[2]), k[3])):
        if key in new and old[key] > 0:
            r = new[key] / old[key]
            ratios.append(r)
            out.write(",".join(key) + f",{old[key]:.1f},{new[key]:.1f},{r:.3f}\n")
g = math.exp(sum(map(math.log, ratios)) / len(ratios))
print(f"bench: {len(ratios)} rows, after/before geomean {g:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
PY
exit $status

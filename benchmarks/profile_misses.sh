#!/usr/bin/env bash
# Profiles the benchmark rows that can miss their targets, on the data `make bench`
# left in bench_out/ (run it after `make bench`). Needs perf (linux-perf).
#
#   benchmarks/profile_misses.sh [bench_out] [profile_out]
#
# Writes perf stat / perf report summaries to profile_out (default bench_out/profile):
#   batched_<contender>.{stat,report,threads}  row 1: in-kernel batches (mmap) vs stock
#   source_bound_<contender>.*                  row 1: per-element sources (pread, mmap)
#   big100k_<contender>.*                       row 2: 100 KB records, per element
#   index.{stat,report} + cat.stat              row 5: tfrecord-lirs index vs cat
#   cold.{stat,report} + *.diskq                row 3: Fetcher O_DIRECT vs fio, with the
#                                               device's average queue depth from /proc/diskstats
# *.threads splits the samples by thread name (lirs-fetch = LIRS's I/O threads).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/bench_out}
PROF=${2:-$OUT/profile}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
CLI=$TARGET/release/tfrecord-lirs
RUST=$TARGET/release/examples/lirs_bench
PY=$ROOT/.venv/bin/python
mkdir -p "$PROF"
export PYTHONPATH=$ROOT/python TF_CPP_MIN_LOG_LEVEL=3

report() { # perf.data -> top symbols, self time
  perf report -i "$1" --no-children --stdio --percent-limit 1.5 2>/dev/null \
    | grep -E '^ +[0-9.]+%' | head -30
}

prof_contender() { # label contender data extra-args...
  local label=$1 c=$2 data=$3; shift 3
  local cmd=("$PY" "$ROOT/benchmarks/tf_contender.py" --contender "$c" --data "$data" --reps 3 "$@")
  perf stat -e task-clock,context-switches,cpu-migrations -o "$PROF/$label.stat" -- \
    "${cmd[@]}" >"$PROF/$label.json"
  perf record -F 999 -g -o "$PROF/$label.data" -- "${cmd[@]}" >/dev/null 2>&1
  report "$PROF/$label.data" >"$PROF/$label.report"
  perf report -i "$PROF/$label.data" --no-children --sort comm --stdio 2>/dev/null \
    | grep -E '^ +[0-9.]+%' >"$PROF/$label.threads"
}

# Row 1: in-kernel batches and per-element sources, the same reduce consumer.
prof_contender batched_lirs_mmap lirs_batched "$OUT/kdd.tfrecord" --backend mmap
prof_contender batched_tfrecord tfrecord_batch "$OUT/kdd.tfrecord"
for b in pread mmap; do
  prof_contender "source_bound_lirs_$b" lirs "$OUT/kdd.tfrecord" --source-bound --backend $b
done
prof_contender source_bound_tfrecord tfrecord "$OUT/kdd.tfrecord" --source-bound
# Row 2: 100 KB records.
for c in tfrecord lirs; do
  prof_contender "big100k_$c" $c "$OUT/big100k.tfrecord"
done

# Row 5: index vs cat on the hot file.
cat "$OUT/kdd.tfrecord" >/dev/null
perf stat -e task-clock -o "$PROF/cat.stat" -- sh -c "cat '$OUT/kdd.tfrecord' >/dev/null"
perf stat -e task-clock -o "$PROF/index.stat" -- "$CLI" index "$OUT/kdd.tfrecord" --out "$PROF/x.offsets" >/dev/null
perf record -F 4999 -g -o "$PROF/index.data" -- "$CLI" index "$OUT/kdd.tfrecord" --out "$PROF/x.offsets" >/dev/null 2>&1
report "$PROF/index.data" >"$PROF/index.report"

# Row 3: average device queue depth = delta of /proc/diskstats column 14 (weighted ms
# doing I/O) / wall ms; other processes' I/O on the same device is included.
dev=$(basename "$(df -P "$OUT" | tail -1 | cut -d' ' -f1)")
diskq() { # label cmd...
  local label=$1; shift
  local a b t0 t1
  a=$(awk -v d="$dev" '$3==d {print $4, $14}' /proc/diskstats); t0=$(date +%s%N)
  "$@" >"$PROF/$label.out" 2>&1
  t1=$(date +%s%N); b=$(awk -v d="$dev" '$3==d {print $4, $14}' /proc/diskstats)
  python3 - "$a" "$b" "$t0" "$t1" >"$PROF/$label.diskq" <<'EOF'
import sys
(r0, q0), (r1, q1) = (map(int, x.split()) for x in sys.argv[1:3])
ms = (int(sys.argv[4]) - int(sys.argv[3])) / 1e6
print(f"reads completed {r1 - r0}, wall {ms:.0f} ms, avg queue depth {(q1 - q0) / ms:.1f}, "
      f"{(r1 - r0) / ms * 1000:,.0f} reads/s")
EOF
}
diskq cold_lirs "$RUST" cold "$OUT/kdd.next.tfrecord" 32 2048 8 10
"$RUST" cache drop "$OUT/kdd.next.tfrecord" >/dev/null
diskq cold_fio fio --name=r --filename="$OUT/kdd.next.tfrecord" --rw=randread --bs=4k --direct=1 \
  --readonly --ioengine=psync --numjobs=32 --thread --group_reporting --time_based --runtime=10
perf stat -e task-clock,context-switches -o "$PROF/cold.stat" -- \
  "$RUST" cold "$OUT/kdd.next.tfrecord" 32 2048 8 10 >"$PROF/cold.json"
perf record -F 999 -g -o "$PROF/cold.data" -- "$RUST" cold "$OUT/kdd.next.tfrecord" 32 2048 8 10 >/dev/null 2>&1
report "$PROF/cold.data" >"$PROF/cold.report"
"$RUST" cache drop "$OUT/kdd.next.tfrecord" >/dev/null
perf stat -e task-clock,context-switches -o "$PROF/fio.stat" -- \
  fio --name=r --filename="$OUT/kdd.next.tfrecord" --rw=randread --bs=4k --direct=1 --readonly \
  --ioengine=psync --numjobs=32 --thread --group_reporting --time_based --runtime=10 >/dev/null
echo "profiles in $PROF"

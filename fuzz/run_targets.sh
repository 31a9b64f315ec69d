#!/usr/bin/env bash
# Runs fuzz targets one after another for SECONDS each (make fuzz-smoke / make fuzz):
#   fuzz/run_targets.sh SECONDS [TARGET...]        (default: every target)
# Each target starts from its regression inputs (regressions/TARGET/, committed) plus
# whatever corpus/TARGET/ (not committed) has gathered, with the -max_len of the table
# in README.md. Fails on any finding (crash, panic, timeout, out-of-memory) and on any
# sanitizer report, LeakSanitizer's at exit included. Prints per target the runs, the
# coverage and features, the exit status and the exact command; the full libFuzzer
# output is in target/fuzz-logs/TARGET.log. Removes the scratch directories its runs
# left in /dev/shm (libFuzzer exits without dropping them), and any left over by
# runs that have ended.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:?usage: run_targets.sh SECONDS [TARGET...]}
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(record_decoder table_open_read padded_writer text_index_import pad_compressed cursor_state)
fi

# The longest input per target: long enough for every structure the target builds,
# short enough to keep the exec rate up.
max_len() {
  case $1 in
    record_decoder) echo 8192 ;;
    table_open_read) echo 16384 ;;
    padded_writer) echo 4096 ;;
    text_index_import) echo 16384 ;;
    pad_compressed) echo 8192 ;;
    cursor_state) echo 4096 ;;
    *) echo "unknown fuzz target $1" >&2; return 1 ;;
  esac
}

# cargo-fuzz passes -Zsanitizer flags: nightly-only, unlocked on a stable toolchain.
export RUSTC_BOOTSTRAP=1
logs=target/fuzz-logs
mkdir -p "$logs"

echo "== building the targets (AddressSanitizer, -O)"
start=$(date +%s)
cargo fuzz build -O
echo "== built in $(( $(date +%s) - start )) s"

# Scratch directories are named lirs-fuzz-PID-*: those of processes that have ended
# are removed (a run going on beside this one keeps its own).
cleanup_shm() {
  for dir in /dev/shm/lirs-fuzz-*; do
    [ -d "$dir" ] || continue
    pid=${dir#/dev/shm/lirs-fuzz-}
    pid=${pid%%-*}
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
      continue
    fi
    rm -rf "$dir"
  done
}
trap cleanup_shm EXIT

failed=()
for target in "${targets[@]}"; do
  len=$(max_len "$target")
  mkdir -p "corpus/$target" "regressions/$target"
  # A hang is a finding too: no input may take 30 s.
  cmd=(cargo fuzz run -O "$target" "corpus/$target" "regressions/$target" --
       "-max_total_time=$seconds" "-max_len=$len" -timeout=30 -print_final_stats=1)
  log="$logs/$target.log"
  echo "== $target: RUSTC_BOOTSTRAP=1 ${cmd[*]}"
  start=$(date +%s)
  status=0
  "${cmd[@]}" >"$log" 2>&1 || status=$?
  took=$(( $(date +%s) - start ))
  cleanup_shm
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
  reports=$(grep -cE '^==[0-9]+==ERROR|^SUMMARY: |panicked at|Test unit written to' "$log" || true)
  echo "   $target: exit $status, ${took} s, ${runs:-?} runs, cov ${cov:-?}, ft ${ft:-?}, reports ${reports}"
  if [ "$status" -ne 0 ] || [ "$reports" -ne 0 ]; then
    failed+=("$target")
    echo "   --- $target failed; the end of $log:"
    tail -n 60 "$log" | sed 's/^/   | /'
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "== fuzzing found something in: ${failed[*]} (inputs under artifacts/TARGET/)"
  exit 1
fi
echo "== every target ran ${seconds} s clean: ${targets[*]}"

#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for a given time each, on the stable toolchain,
# and prints per target the inputs run, the coverage, the corpus size and the crashes found.
# Exits non-zero when any target crashed (the artifact paths are printed) or could not run.
#
# Usage: fuzz/run.sh SECONDS_PER_TARGET [TARGET...]
#   JOBS=N         targets fuzzed at the same time (default: the number of CPUs)
#   SANITIZER=S    address or none (default: address when it builds here, else none)
#   KEEP_GOING=1   fork mode: go on after a crash and collect every crashing input
#
# New inputs go to fuzz/runs/TARGET/ (kept between runs, not committed); the committed seeds in
# fuzz/corpus/TARGET/ are read, never written, and so is fuzz/dict/TARGET.dict when there is
# one. Crashes land in fuzz/artifacts/TARGET/.
set -euo pipefail

FUZZ_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$FUZZ_DIR")
cd "$ROOT"

die() {
    printf 'run.sh: %s\n' "$*" >&2
    exit 2
}

[ $# -ge 1 ] || die "usage: fuzz/run.sh SECONDS_PER_TARGET [TARGET...]"
SECS=$1
shift
[[ $SECS =~ ^[1-9][0-9]*$ ]] || die "SECONDS_PER_TARGET must be a positive number, not '$SECS'"
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a positive number, not '$JOBS'"

# cargo-fuzz passes -Z flags (the sanitizer, coverage instrumentation): stable rustc takes them
# with RUSTC_BOOTSTRAP=1.
export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never

if ! command -v cargo-fuzz >/dev/null; then
    printf '==> installing cargo-fuzz\n'
    cargo install cargo-fuzz --locked </dev/null
fi

# The fuzz workspace's lock file is committed: a stale one fails here instead of being
# rewritten by the build.
cargo metadata --locked --format-version 1 --manifest-path "$FUZZ_DIR/Cargo.toml" >/dev/null ||
    die "fuzz/Cargo.lock does not match fuzz/Cargo.toml and ../Cargo.toml: run 'cargo update --workspace --manifest-path fuzz/Cargo.toml' and commit fuzz/Cargo.lock"

TARGETS=("$@")
ALL=0
if [ ${#TARGETS[@]} -eq 0 ]; then
    mapfile -t TARGETS < <(cargo fuzz list)
    ALL=1
fi
[ ${#TARGETS[@]} -gt 0 ] || die "no fuzz targets found"

TARGET_DIR=$FUZZ_DIR/target
HOST=$(rustc -vV | sed -n 's/^host: //p')
mkdir -p "$FUZZ_DIR/runs"
BUILD_LOG=$FUZZ_DIR/runs/build.log
: >"$BUILD_LOG"

# Builds the targets with sanitizer $1: all of them at once, or the ones named one by one.
build_all() {
    local t
    if [ "$ALL" = 1 ]; then
        printf '==> cargo fuzz build --sanitizer %s\n' "$1"
        cargo fuzz build --sanitizer "$1" --target-dir "$TARGET_DIR" </dev/null >>"$BUILD_LOG" 2>&1
        return
    fi
    for t in "${TARGETS[@]}"; do
        printf '==> cargo fuzz build --sanitizer %s %s\n' "$1" "$t"
        cargo fuzz build --sanitizer "$1" --target-dir "$TARGET_DIR" "$t" \
            </dev/null >>"$BUILD_LOG" 2>&1 || return 1
    done
}

if [ -n "${SANITIZER:-}" ]; then
    build_all "$SANITIZER" || {
        tail -n 40 "$BUILD_LOG"
        die "the build with --sanitizer $SANITIZER failed (log: $BUILD_LOG)"
    }
else
    SANITIZER=address
    if ! build_all address; then
        printf 'the address sanitizer does not build here; falling back to none\n'
        tail -n 5 "$BUILD_LOG"
        SANITIZER=none
        build_all none || {
            tail -n 40 "$BUILD_LOG"
            die "the build failed (log: $BUILD_LOG)"
        }
    fi
fi
printf 'sanitizer: %s\n' "$SANITIZER"

MODE_ARGS=()
if [ "${KEEP_GOING:-0}" = 1 ]; then
    MODE_ARGS=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi

# Fuzzes one target for SECS seconds; its output goes to fuzz/runs/TARGET.log and its elapsed
# time to fuzz/runs/TARGET.time.
fuzz_one() {
    local t=$1 start=$SECONDS status=0 dict=()
    if [ -f "$FUZZ_DIR/dict/$t.dict" ]; then
        dict=(-dict="$FUZZ_DIR/dict/$t.dict")
    fi
    mkdir -p "$FUZZ_DIR/runs/$t" "$FUZZ_DIR/corpus/$t" "$FUZZ_DIR/artifacts/$t"
    touch "$FUZZ_DIR/runs/$t.start"
    cargo fuzz run --sanitizer "$SANITIZER" --target-dir "$TARGET_DIR" "$t" \
        "$FUZZ_DIR/runs/$t" "$FUZZ_DIR/corpus/$t" -- \
        -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        "${dict[@]}" "${MODE_ARGS[@]}" </dev/null >"$FUZZ_DIR/runs/$t.log" 2>&1 || status=$?
    printf '%s %s\n' "$((SECONDS - start))" "$status" >"$FUZZ_DIR/runs/$t.time"
}

printf '==> fuzzing %s target(s) for %s s each, %s at a time\n' "${#TARGETS[@]}" "$SECS" "$JOBS"
running=0
for t in "${TARGETS[@]}"; do
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    printf '    %s\n' "$t"
    fuzz_one "$t" &
    running=$((running + 1))
done
wait || true

# The last libFuzzer status line of a log, e.g. "#123 DONE cov: 10 ft: 20 corp: 5/100b ...".
field() {
    local name=$1 line=$2
    sed -n "s/.* $name: \([0-9]*\).*/\1/p" <<<"$line"
}

failed=0
printf '\n%-18s %8s %12s %9s %8s %8s %8s %8s\n' target seconds runs exec/s cov features corpus crashes
for t in "${TARGETS[@]}"; do
    log=$FUZZ_DIR/runs/$t.log
    read -r took status <"$FUZZ_DIR/runs/$t.time"
    last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -n 1 || true)
    runs=$(sed -n 's/^stat::number_of_executed_units: //p' "$log" | tail -n 1)
    if [ -z "$runs" ]; then
        runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
    fi
    corpus=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
    # Every input libFuzzer saved during this run: crash-*, timeout-*, oom-*, leak-*.
    artifacts=$(find "$FUZZ_DIR/artifacts/$t" -maxdepth 1 -type f \
        -newer "$FUZZ_DIR/runs/$t.start" | sort)
    crashes=0
    if [ -n "$artifacts" ]; then
        crashes=$(wc -l <<<"$artifacts")
    fi
    rate=$(sed -n 's/^stat::average_exec_per_sec: //p' "$log" | tail -n 1)
    if [ -z "$rate" ] && [ -n "$runs" ] && [ "$took" -gt 0 ]; then
        rate=$((runs / took))
    fi
    printf '%-18s %8s %12s %9s %8s %8s %8s %8s\n' "$t" "$took" "${runs:-?}" \
        "${rate:-?}" \
        "$(field cov "$last")" "$(field ft "$last")" "${corpus:-?}" "$crashes"
    if [ "$crashes" -gt 0 ]; then
        failed=1
        printf '  CRASH in %s (log: %s)\n' "$t" "$log"
        shown=0
        while IFS= read -r a; do
            shown=$((shown + 1))
            if [ "$shown" -le 3 ]; then
                printf '  artifact: %s\n' "$a"
                printf '  reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run -s %s %s %s\n' \
                    "$SANITIZER" "$t" "$a"
            fi
        done <<<"$artifacts"
        [ "$shown" -le 3 ] || printf '  ... and %s more in %s\n' "$((shown - 3))" "$FUZZ_DIR/artifacts/$t"
        # The distinct failures, by where they happened: each saved input (up to 50) run once
        # more, then counted by the place it failed, with the first message seen there.
        while IFS= read -r a; do
            "$TARGET_DIR/$HOST/release/$t" "$a" 2>&1 |
                grep -E -m 1 -A1 "panicked at|ERROR: AddressSanitizer|ERROR: libFuzzer" |
                sed -e 's/^thread .* panicked at //' -e 's/^==[0-9]*== *//' |
                paste -s -d '\t' - || true
        done < <(head -n 50 <<<"$artifacts") |
            awk -F '\t' '{ n[$1]++; if (!($1 in m)) m[$1] = $2 }
                END { for (k in n) printf "  %d x %s\n      %s\n", n[k], k, m[k] }' || true
    elif [ "$status" -ne 0 ]; then
        failed=1
        printf '  %s exited with status %s without a crash artifact (log: %s):\n' "$t" "$status" "$log"
        tail -n 5 "$log" | sed 's/^/  /'
    fi
done

if [ "$failed" -ne 0 ]; then
    printf '\nfuzzing FAILED (sanitizer: %s)\n' "$SANITIZER"
    exit 1
fi
printf '\nfuzzing passed: no crash in %s target(s), %s s each (sanitizer: %s)\n' \
    "${#TARGETS[@]}" "$SECS" "$SANITIZER"

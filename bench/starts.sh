#!/usr/bin/env bash
# What one refused CGI request costs the machine, without a web server: starts the static
# release binary (and any other builds given) one after another for a client over its limit,
# beside the no-op floor, in turns, and prints each program's median CPU time and wall time per
# start (bench/starts.c). Steadier than requests per second under Apache for comparing two
# builds of the program; bench/run.sh gives the figures under Apache.
#
# The configuration: bench/starter.sh's, a client allowed one request a day.
#
# Usage: bench/starts.sh [BLOCKS [STARTS_PER_BLOCK [PROGRAM...]]]   (defaults: 30, 200, the
#        release binary, built first)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TARGET=x86_64-unknown-linux-musl
BLOCKS=${1:-30}
STARTS=${2:-200}
shift $(($# < 2 ? $# : 2))
for tool in musl-gcc cc; do
    command -v "$tool" >/dev/null || {
        echo "starts: $tool not found (apt-get install musl-tools gcc)" >&2
        exit 1
    }
done
programs=("$@")
if [ "${#programs[@]}" -eq 0 ]; then
    CC_x86_64_unknown_linux_musl=musl-gcc cargo build --locked --quiet --release --target "$TARGET"
    programs=("$(realpath "${CARGO_TARGET_DIR:-target}/$TARGET/release/resolve")")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -Wall -o "$work/starts" bench/starts.c
musl-gcc -O2 -static -o "$work/noop" bench/noop.c
# Each program is measured from a copy made here, as the floor is: the same binary measured
# 5 to 10% apart depending on how its file came into the page cache (written by the linker,
# or copied), which would otherwise be taken for a difference between builds.
copies=()
for i in "${!programs[@]}"; do
    mkdir "$work/$i"
    cp "${programs[$i]}" "$work/$i/"
    copies+=("$work/$i/$(basename "${programs[$i]}")")
done

# shellcheck source=bench/starter.sh
. bench/starter.sh
# The data directory where deploy.sh makes it, beside the configuration.
mkdir "$work/ratelimit"
refusing_config "$work/ratelimit" 1 >"$work/config.json"
# The first request is admitted (and fails on the discard port: a 502), every later one refused.
answer() {
    cgi_request "$work/config.json" text/plain "$1" 2>/dev/null | head -n 1
}
for program in "${copies[@]}"; do
    answer "$program" >/dev/null
    case $(answer "$program") in
        "Status: 429"*) ;;
        *) echo "starts: $program does not refuse the client over its limit" >&2; exit 1 ;;
    esac
done
cgi_request "$work/config.json" text/plain "$work/starts" "$BLOCKS" "$STARTS" "$work/noop" "${copies[@]}"

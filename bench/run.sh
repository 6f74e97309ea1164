#!/usr/bin/env bash
# The benchmark suite, on loopback only and never part of the tests. Builds the static release
# binary and a no-op CGI program that writes a fixed 429 (the floor of any process-per-request
# program), then runs benches/apache.rs: Apache (mod_cgid, then mod_fcgid) with MariaDB, Redis and
# a provider stand-in, driven by wrk, printing one table of requests/s, p50 and p99 with the
# ratios to the floor, the peak memory of one CGI request and the binary's size. Beside them, the
# PHP limiters an owner would keep instead (bench/php/) under PHP-FPM (pm static, 8 children)
# behind mod_proxy_fcgi, on the same MariaDB, and resolve's ratios to them. With
# --criterion it also runs the in-process criterion benches (benches/decisions.rs: decision time
# per store, the file store with 10 to 100,000 keys, sweeping; benches/requests.rs: request
# parsing and answer rendering).
#
# With --journal-cost it measures only what the usage journal costs the CGI 429 path with each
# store (the 429 with and without the journal, in alternation with the floor, 3 rounds of 1 s
# each after a warm-up of up to 3 s) and fails if the bench breaks or the journal did not
# count the 429s it answered; it prints the figure and judges nothing, since a busy machine
# moves it. tests/run-all.sh runs it. The harness is then built like the tests (the figure is
# the static binary's: the harness only starts servers and reads wrk's output).
#
# Usage: bench/run.sh [--criterion] [SECONDS] [CONNECTIONS]     (defaults: 10 s, 32 connections)
#        bench/run.sh --journal-cost [SECONDS]                  (default: 3 s per row)
#        bench/run.sh --before PROGRAM [SECONDS] [CONNECTIONS]  (an earlier static build, its
#                                                               429 measured beside this one's)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

criterion=""
journal_cost=""
case "${1:-}" in
    --criterion)
        criterion=1
        shift
        ;;
    --journal-cost)
        journal_cost=1
        shift
        ;;
    --before)
        [ -f "${2:-}" ] || {
            echo "bench: --before takes the path of an earlier static build of resolve" >&2
            exit 1
        }
        RESOLVE_BENCH_BEFORE=$(realpath "$2")
        export RESOLVE_BENCH_BEFORE
        shift 2
        ;;
esac
SECONDS_PER_ROW=${1:-10}
CONNECTIONS=${2:-32}
if [ -n "$journal_cost" ]; then
    SECONDS_PER_ROW=${1:-3}
    CONNECTIONS=16
fi
TARGET=x86_64-unknown-linux-musl

missing=()
need() { command -v "$1" >/dev/null || missing+=("$2"); }
need wrk wrk
need musl-gcc musl-tools
need /usr/sbin/apache2 apache2
php_fpm=""
need /usr/sbin/mariadbd mariadb-server
need redis-server redis-server
if [ -z "$journal_cost" ]; then
    need /usr/bin/time time
    [ -e /usr/lib/apache2/modules/mod_fcgid.so ] || missing+=(libapache2-mod-fcgid)
    # Debian names the program after PHP's version (php-fpm8.2); the newest one installed.
    php_fpm=$(find /usr/sbin -maxdepth 1 -name 'php-fpm*' -type f | sort -V | tail -n 1)
    if [ -z "$php_fpm" ]; then
        missing+=(php-fpm php-mysql)
    elif ! "$php_fpm" -m 2>/dev/null | grep -x pdo_mysql >/dev/null; then
        missing+=(php-mysql)
    fi
fi
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bench: missing ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
fi

CC_x86_64_unknown_linux_musl=musl-gcc cargo build --locked --quiet --release --target "$TARGET"
binary="${CARGO_TARGET_DIR:-target}/$TARGET/release/resolve"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
musl-gcc -static -O2 -o "$work/noop" bench/noop.c
chmod 755 "$work" "$work/noop"

echo "binary: $binary ($(stat -c %s "$binary") bytes; $(file -b "$binary" | cut -d, -f1,4))"
RESOLVE_BENCH_BINARY=$(realpath "$binary")
RESOLVE_BENCH_FLOOR="$work/noop"
RESOLVE_BENCH_PHP_FPM="$php_fpm"
RESOLVE_BENCH_SECONDS="$SECONDS_PER_ROW"
RESOLVE_BENCH_CONNECTIONS="$CONNECTIONS"
export RESOLVE_BENCH_BINARY RESOLVE_BENCH_FLOOR RESOLVE_BENCH_PHP_FPM RESOLVE_BENCH_SECONDS \
    RESOLVE_BENCH_CONNECTIONS
if [ -n "$journal_cost" ]; then
    RESOLVE_BENCH_JOURNAL_COST=1 RESOLVE_BENCH_ROUNDS=3 \
        RESOLVE_BENCH_STORES=file,mysql,redis RESOLVE_BENCH_SERVERS=cgid \
        cargo test --locked --quiet --bench apache
    exit 0
fi
cargo bench --quiet --bench apache

if [ -n "$criterion" ]; then
    cargo bench --quiet --bench decisions --bench requests
fi

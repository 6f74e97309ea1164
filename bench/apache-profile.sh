#!/usr/bin/env bash
# Where the machine's CPU goes for one refused CGI request under Apache, beside the no-op floor:
# starts Apache (event MPM, mod_cgid) on loopback with both programs in its cgi-bin, drives each
# in turn with wrk while `perf record -a` samples every CPU (in rounds, each starting with the
# other program), and prints microseconds of CPU per request, the rounds' mean: by process (the
# server, the program, the client, idle), the program's own split (its code, the vDSO, the
# kernel's work for its file pages, for its other page faults, and the rest: system calls,
# exec, exit), and the kernel functions that grew the most. Complements
# bench/starts.sh, which measures the program alone and cannot see what it costs the server or
# what two requests at once cost each other. Judges nothing; loopback only.
#
# The configuration: bench/starter.sh's, a client allowed one request a day.
#
# Usage: bench/apache-profile.sh [SECONDS [ROUNDS [PROGRAM]]]   (defaults: 6 s per program and
#        round, 3 rounds, the release binary, built first). Needs root or perf_event_paranoid
#        <= 0 for the kernel's samples.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TARGET=x86_64-unknown-linux-musl
SECONDS_EACH=${1:-6}
ROUNDS=${2:-3}
PROGRAM=${3:-}
if ! [ "$SECONDS_EACH" -ge 4 ] 2>/dev/null || ! [ "$ROUNDS" -ge 1 ] 2>/dev/null; then
    echo "apache-profile: SECONDS must be a whole number, at least 4, and ROUNDS at least 1" >&2
    exit 1
fi
missing=()
for tool in /usr/sbin/apache2:apache2 wrk:wrk perf:linux-perf musl-gcc:musl-tools curl:curl; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "apache-profile: missing ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
fi
if [ -z "$PROGRAM" ]; then
    CC_x86_64_unknown_linux_musl=musl-gcc cargo build --locked --quiet --release --target "$TARGET"
    PROGRAM="${CARGO_TARGET_DIR:-target}/$TARGET/release/resolve"
fi

work=$(mktemp -d)
apache_pid=""
cleanup() {
    if [ -n "$apache_pid" ]; then
        kill "$apache_pid" 2>/dev/null || true
        wait "$apache_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/cgi" "$work/www" "$work/ratelimit" "$work/logs" "$work/run"
musl-gcc -O2 -static -o "$work/cgi/noop" bench/noop.c
# A copy, as bench/starts.sh measures: how the file came into the page cache moves its starts.
cp "$PROGRAM" "$work/cgi/resolve"
# shellcheck source=bench/starter.sh
. bench/starter.sh
# The data directory where deploy.sh makes it, beside the configuration.
refusing_config "$work/ratelimit" 1 >"$work/config.json"
# Apache's children run as its default user when started by root.
chmod -R a+rwX "$work"

port=$((20000 + RANDOM % 20000))
cat >"$work/httpd.conf" <<CONF
ServerRoot $work
ServerName localhost
Listen 127.0.0.1:$port
PidFile $work/run/httpd.pid
ScriptSock $work/run/cgid.sock
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule alias_module /usr/lib/apache2/modules/mod_alias.so
LoadModule env_module /usr/lib/apache2/modules/mod_env.so
LoadModule cgid_module /usr/lib/apache2/modules/mod_cgid.so
ErrorLog $work/logs/error.log
LogLevel error
KeepAlive On
MaxKeepAliveRequests 0
DocumentRoot $work/www
SetEnv RESOLVE_CONFIG $work/config.json
ScriptAlias /cgi-bin/ $work/cgi/
<Directory $work/cgi>
    Require all granted
</Directory>
CONF
/usr/sbin/apache2 -f "$work/httpd.conf" -D FOREGROUND &
apache_pid=$!
base="http://127.0.0.1:$port/cgi-bin"
query='?link=https%3A%2F%2Fexample.com%2Ffile'
for _ in $(seq 50); do
    curl -s -o /dev/null "$base/noop" && break
    sleep 0.1
done
# The first request is admitted (and fails on the discard port: a 502), every later one refused.
curl -s -o /dev/null "$base/resolve$query" || true
status=$(curl -s -o /dev/null -w '%{http_code}' "$base/resolve$query" || true)
if [ "$status" != 429 ]; then
    echo "apache-profile: the program answered $status, not 429; Apache's log:" >&2
    cat "$work/logs/error.log" >&2
    exit 1
fi

cpus=$(nproc)
# One round of a program: its requests/s appended to NAME.rps, perf's samples appended to
# NAME.tsv as "comm<TAB>dso<TAB>symbol<TAB>us per request".
measure() {
    local name=$1 url=$2 rps
    wrk -t2 -c32 -d"${SECONDS_EACH}s" "$url" >"$work/$name.wrk" &
    sleep 1
    if ! perf record -q -a -F 4999 -o "$work/$name.perf" -- sleep $((SECONDS_EACH - 2)); then
        echo "apache-profile: perf could not sample every CPU (run as root, or set" \
            "kernel.perf_event_paranoid to 0 or below)" >&2
        exit 1
    fi
    wait $!
    rps=$(awk '/^Requests\/sec/ {print $2}' "$work/$name.wrk")
    perf report -i "$work/$name.perf" --sort comm,dso,sym --stdio 2>/dev/null |
        awk -v rps="$rps" -v cpus="$cpus" -v prog="$name" '
            /^#/ || NF < 5 { next }
            {
                pct = $1; sub("%", "", pct)
                sym = $5; for (i = 6; i <= NF; i++) sym = sym " " $i
                comm = ($2 == prog) ? "PROGRAM" : $2
                printf "%s\t%s\t%s\t%.4f\n", comm, $3, sym, pct / 100 * cpus * 1e6 / rps
            }' >>"$work/$name.tsv"
    echo "$rps" >>"$work/$name.rps"
}
# Warmed up first: the files made and the pages in memory.
wrk -t2 -c32 -d3s "$base/noop" >/dev/null
wrk -t2 -c32 -d3s "$base/resolve$query" >/dev/null
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        measure noop "$base/noop"
        measure resolve "$base/resolve$query"
    else
        measure resolve "$base/resolve$query"
        measure noop "$base/noop"
    fi
done
floor_rps=$(awk '{ s += $1 } END { print s / NR }' "$work/noop.rps")
ours_rps=$(awk '{ s += $1 } END { print s / NR }' "$work/resolve.rps")
ratios=$(paste "$work/noop.rps" "$work/resolve.rps" | awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $2 / $1 }')

awk -F'\t' -v floor_rps="$floor_rps" -v ours_rps="$ours_rps" -v secs="$SECONDS_EACH" \
    -v rounds="$ROUNDS" -v ratios="$ratios" '
    function group(comm) {
        if (comm == "PROGRAM" || comm == "apache2" || comm == "wrk" || comm == "swapper") return comm
        return "other"
    }
    function part(dso, sym) {
        if (dso == "[vdso]") return "vdso"
        if (dso != "[kernel.kallsyms]") return "code"
        if (sym ~ /folio|filemap|rmap|unmap_page_range|zap_|pte_batch/) return "file pages"
        if (sym ~ /page_fault|handle_mm_fault|anonymous|clear_page|charge|alloc_pages|get_page_from_freelist|lru/) return "faults"
        return "kernel other"
    }
    FNR == 1 { f++ }
    {
        us = $4 / rounds
        by[f, group($1)] += us
        total[f] += us
        if ($1 == "PROGRAM") {
            split_[f, part($2, $3)] += us
            if ($2 == "[kernel.kallsyms]") { k[f, $3] += us; ks[$3] = 1 }
        }
    }
    END {
        printf "Apache (event MPM, mod_cgid), wrk -t2 -c32, %d rounds of %d s each, perf sampling every CPU;\n", rounds, secs
        printf "the rounds'\'' ratios of requests/s to the floor'\''s: %s; figures are the rounds'\'' means\n", ratios
        printf "%-34s %10s %10s %10s\n", "CPU per request (us)", "floor", "resolve", "change"
        printf "%-34s %10.0f %10.0f %10.2fx\n", "requests/s", floor_rps, ours_rps, ours_rps / floor_rps
        n = split("PROGRAM:the program|apache2:Apache|wrk:wrk (the client)|swapper:idle|other:other processes", rows, "|")
        for (i = 1; i <= n; i++) {
            split(rows[i], kv, ":")
            printf "%-34s %10.1f %10.1f %+10.1f\n", kv[2], by[1, kv[1]], by[2, kv[1]], by[2, kv[1]] - by[1, kv[1]]
        }
        printf "%-34s %10.1f %10.1f %+10.1f\n", "all (samples)", total[1], total[2], total[2] - total[1]
        print ""
        printf "%-34s %10s %10s %10s\n", "the program, by part (us)", "floor", "resolve", "change"
        n = split("code|vdso|file pages|faults|kernel other", parts, "|")
        for (i = 1; i <= n; i++)
            printf "%-34s %10.1f %10.1f %+10.1f\n", parts[i], split_[1, parts[i]], split_[2, parts[i]], split_[2, parts[i]] - split_[1, parts[i]]
        print ""
        print "the program'\''s kernel functions that grew the most (us per request):"
        for (s in ks) d[s] = k[2, s] - k[1, s]
        for (j = 0; j < 15; j++) {
            best = ""; for (s in d) if (best == "" || d[s] > d[best]) best = s
            if (best == "" || d[best] <= 0) break
            printf "  %+7.2f  %s\n", d[best], best
            delete d[best]
        }
    }' "$work/noop.tsv" "$work/resolve.tsv"

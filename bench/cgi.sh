#!/usr/bin/env bash
# Requests per second of resolve under Apache (event MPM + mod_cgid) next to a static no-op CGI
# program that writes a fixed 429: the floor of any process-per-request program. All on
# loopback; prints one table. Usage: bench/cgi.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${1:-10}
CONNECTIONS=${2:-32}
TARGET=x86_64-unknown-linux-musl

need() { command -v "$1" >/dev/null || { echo "bench: $1 not found (apt-get install $2)" >&2; exit 1; }; }
need wrk wrk
need musl-gcc musl-tools
[ -x /usr/sbin/apache2 ] || { echo "bench: apache2 not found (apt-get install apache2)" >&2; exit 1; }

CC_x86_64_unknown_linux_musl=musl-gcc cargo build --quiet --release --target "$TARGET"

work=$(mktemp -d)
chmod 755 "$work"
apache_pid=""
cleanup() {
    if [ -n "$apache_pid" ]; then kill "$apache_pid" 2>/dev/null || true; sleep 0.5; fi
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/cgi-bin" "$work/logs" "$work/data-429" "$work/data-200"
cat >"$work/noop.c" <<'C'
#include <unistd.h>
static const char answer[] =
    "Status: 429 Too Many Requests\nContent-Type: text/plain; charset=utf-8\n"
    "Retry-After: 60\nCache-Control: no-store\n\nToo many requests: try again in 60 seconds.\n";
int main(void) { return write(1, answer, sizeof answer - 1) < 0; }
C
musl-gcc -static -O2 -o "$work/cgi-bin/noop" "$work/noop.c"
cp "target/$TARGET/release/resolve" "$work/cgi-bin/resolve"
cp "target/$TARGET/release/resolve" "$work/cgi-bin/resolve-ok"
cat >"$work/limited.json" <<JSON
{"provider": {"kind": "echo"}, "store": {"dir": "$work/data-429", "sweep_one_in": 0},
 "rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}]}
JSON
cat >"$work/open.json" <<JSON
{"provider": {"kind": "echo"}, "store": {"dir": "$work/data-200", "sweep_one_in": 0},
 "rules": [{"name": "ip", "key": "ip", "limit": 4000000000, "window_secs": 3600}]}
JSON

user_lines=""
if [ "$(id -u)" -eq 0 ]; then
    user_lines="User www-data
Group www-data"
    chown -R www-data:www-data "$work/data-429" "$work/data-200" "$work/logs"
fi
port=$((20000 + RANDOM % 20000))
modules=/usr/lib/apache2/modules
cat >"$work/httpd.conf" <<CONF
ServerRoot "$work"
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile $work/logs/httpd.pid
ErrorLog $work/logs/error.log
LogLevel warn
$user_lines
LoadModule mpm_event_module $modules/mod_mpm_event.so
LoadModule authz_core_module $modules/mod_authz_core.so
LoadModule alias_module $modules/mod_alias.so
LoadModule env_module $modules/mod_env.so
LoadModule cgid_module $modules/mod_cgid.so
ScriptSock $work/logs/cgid.sock
StartServers 2
ServerLimit 16
ThreadsPerChild 64
MaxRequestWorkers 512
ThreadLimit 64
KeepAlive On
MaxKeepAliveRequests 0
ScriptAlias /cgi-bin/ "$work/cgi-bin/"
<Directory "$work/cgi-bin">
    Require all granted
</Directory>
<Location /cgi-bin/resolve>
    SetEnv RESOLVE_CONFIG $work/limited.json
</Location>
<Location /cgi-bin/resolve-ok>
    SetEnv RESOLVE_CONFIG $work/open.json
</Location>
CONF
/usr/sbin/apache2 -f "$work/httpd.conf" -k start
for _ in $(seq 50); do
    [ -s "$work/logs/httpd.pid" ] && curl -s -o /dev/null "http://127.0.0.1:$port/cgi-bin/noop" && break
    sleep 0.1
done
apache_pid=$(cat "$work/logs/httpd.pid")

query='link=https%3A%2F%2Fhost.example%2Ffile.zip'
# The limited configuration admits one request an hour: spend it, so the run is all 429s.
curl -s -o /dev/null "http://127.0.0.1:$port/cgi-bin/resolve?$query"
check=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/cgi-bin/resolve?$query")
[ "$check" = 429 ] || { echo "bench: expected 429 from the limited path, got $check" >&2; exit 1; }

run() { # name path -> "rps p50 p99 non2xx"
    local out
    out=$(wrk -t 2 -c "$CONNECTIONS" -d "${DURATION}s" --latency "http://127.0.0.1:$port$2" 2>&1)
    local rps p50 p99 errors
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    errors=$(awk '/Non-2xx or 3xx responses/ {print $5}' <<<"$out")
    printf '%-34s %10s %10s %10s %10s\n' "$1" "$rps" "$p50" "$p99" "${errors:-0}"
    echo "$rps" >"$work/rps-$3"
}

echo "Apache mod_cgid, $CONNECTIONS connections, ${DURATION}s each, $(nproc) cores"
printf '%-34s %10s %10s %10s %10s\n' "program" "req/s" "p50" "p99" "non-2xx"
run "no-op static CGI (429, floor)" "/cgi-bin/noop" floor
run "resolve, file store, 429 path" "/cgi-bin/resolve?$query" limited
run "resolve, file store, 200 path" "/cgi-bin/resolve-ok?$query" open
floor=$(cat "$work/rps-floor")
for name in limited open; do
    awk -v a="$(cat "$work/rps-$name")" -v f="$floor" -v n="$name" \
        'BEGIN { printf "ratio %s / floor: %.2f\n", n, a / f }'
done

# shellcheck shell=bash
# Sourced by bench/starts.sh and bench/request-path.sh: deploy.sh's starter configuration for a
# client to be refused, with two changes. The per-minute rule allows LIMIT requests a day, so
# that the client stays refused however long a run takes; the provider is a preset with a
# made-up token whose address is loopback's discard port, so that a request admitted by
# mistake fails there and nothing leaves the machine.
#
# Usage: refusing_config DATA_DIR LIMIT PROVIDER_JSON   (PROVIDER_JSON empty: that preset)
refusing_config() {
    local provider=${3:-'{"preset": "realdebrid", "token": "MADEUPTOKEN0123456789", "base_url": "http://127.0.0.1:9"}'}
    cat <<JSON
{
  "provider": $provider,
  "store": {"kind": "file", "dir": "$1", "on_error": "allow"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": $2, "window_secs": 86400},
    {"name": "ip-day", "key": "ip", "limit": 300, "window_secs": 86400}
  ],
  "spend": [
    {"name": "day", "limit": 100, "window_secs": 86400},
    {"name": "month", "limit": 1500, "window_secs": 2592000}
  ],
  "allowed_origins": ["https://example.com", "https://www.example.com"],
  "client": {"ipv6_prefix": 64, "trusted_proxies": [], "forwarded_header": "X-Forwarded-For"},
  "request": {"max_body_bytes": 8192}
}
JSON
}

# One CGI request from 192.0.2.9 for a link, as Apache would start PROGRAM (with any wrapper
# in front of it), with the configuration file and Accept header given. Its document root is
# public_html/ beside the configuration (made here), the program in its cgi-bin/, as on a cPanel
# account: what the program judges of the web root is paid where a request pays it.
#
# Usage: cgi_request CONFIG ACCEPT PROGRAM [ARGS...]
cgi_request() {
    local config=$1 accept=$2 web
    shift 2
    web="$(dirname "$config")/public_html"
    mkdir -p "$web/cgi-bin"
    env -i GATEWAY_INTERFACE=CGI/1.1 SERVER_SOFTWARE=Apache REQUEST_METHOD=GET \
        QUERY_STRING='link=https%3A%2F%2Fexample.com%2Ffile' REMOTE_ADDR=192.0.2.9 \
        DOCUMENT_ROOT="$web" SCRIPT_FILENAME="$web/cgi-bin/resolve" SCRIPT_NAME=/cgi-bin/resolve \
        HTTP_ACCEPT="$accept" RESOLVE_CONFIG="$config" "$@"
}

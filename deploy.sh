#!/usr/bin/env bash
# Deploys resolve to a cPanel-style account: builds the static binary, puts it in
# public_html/cgi-bin/resolve and the page in public_html/resolve/, prepares ~/resolve/ (the
# data directory, a starter configuration and the list of files it installed), then runs
# `resolve check` on the host. Transports: local (this machine), ssh (rsync or scp), ftps
# (lftp). With --package DIR it builds the archives owners install with cPanel's File Manager
# instead. See ./deploy.sh --help.
set -euo pipefail

ME=deploy.sh
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MUSL_TARGET=x86_64-unknown-linux-musl
ID="$(date +%s)-$$"
TMP_PREFIX=".resolve-deploy.$ID"

usage() {
    cat <<'EOF'
Usage: ./deploy.sh [OPTIONS]

Builds the static resolve binary and installs a working site in a cPanel-style account:

  public_html/cgi-bin/resolve   the program (mode 755; uploaded under a temporary name,
                                then renamed, so no request ever runs a half-written file)
  public_html/resolve/          the page: the files of public/ (index.html, style.css, app.js)
  ~/resolve/ratelimit/          the rate-limit data (mode 700), outside the web root
  ~/resolve/config.json         a starter configuration (mode 600: the echo provider, a spend
                                limit, your domain's origins), written only when none exists
  ~/resolve/installed.txt       what deploy.sh installed (path and sha256 of each file)

An existing configuration and existing limit data are never overwritten or deleted, so running
it again (to upgrade) is safe. It replaces only files it installed itself and that are unchanged
since (listed in ~/resolve/installed.txt). A file of the page you edited since is kept, and the
new version's is put beside it as NAME.new (said in a warning); any other file in the way stops
it before anything is changed, naming the file (--force replaces it). Where a shell is available (local, ssh) it then
runs `resolve check` on the host and prints its report.

Where to:
  --transport local|ssh|ftps  local: a home directory on this machine (on the host itself);
                              ssh: rsync (or scp) and a shell over ssh;
                              ftps: FTP over TLS with lftp, for accounts without a shell
  --target DIR                local: the account's home directory (default: $HOME; required
                              when running as root, and then the files are written as the
                              directory's owner)
  --host HOST                 ssh, ftps: the server (an ssh config alias works for ssh)
  --user NAME                 ssh, ftps: the account name (ftps: required)
  --port N                    ssh (default 22), ftps (default 21, explicit TLS)
  --identity FILE             ssh: the private key to use
  --ssh-config FILE           ssh: use this ssh configuration instead of ~/.ssh/config
  --remote-home DIR           ssh, ftps: the account's home directory on the server (default:
                              the directory a login starts in, which on cPanel is the home)
  --web-root DIR              the web root, relative to the home (default: public_html)
  --password-file FILE        ftps: a file whose first line is the FTP password (else the
                              LFTP_PASSWORD environment variable, else it is asked for)
  --ca-file FILE              ftps: trust the certificate(s) in this PEM file, for a server
                              whose certificate is self-signed (certificates are always checked)
  --allow-plain-ftp           ftps: allow plain FTP when the server offers no TLS (sends the
                              password unencrypted; refused by default)

What:
  --binary FILE               upload this static binary instead of building one
  --no-install                never install missing build tools (the rustup target
                              x86_64-unknown-linux-musl, Debian's musl-tools)
  --create-cgi-bin            create public_html/cgi-bin (mode 755) when it is missing (only
                              useful where the host has CGI enabled for the account)
  --page-dir DIR              the page's folder, relative to the web root (default: resolve,
                              so the page is https://DOMAIN/resolve/; . for the web root)
  --endpoint PATH             where the page sends links (default: /cgi-bin/resolve)
  --force                     replace files in the way that deploy.sh did not install (or that
                              were changed since it did, the page's files you edited too)

The configuration, written only when there is none yet:
  --provider NAME             a provider preset: realdebrid, alldebrid, premiumize, debridlink
                              or torbox (default: the echo provider, which spends nothing)
  --token-file FILE           the provider's API token: the first line of FILE (mode 600,
                              outside any checkout); never taken on the command line
  --domain NAME               also: the site's own pages (https://NAME, https://www.NAME) are
                              the only ones allowed to use the program (allowed_origins)
  --admin-password            also: turn the owner's dashboard on (/cgi-bin/resolve/admin) with
                              a new random password, shown once before the upload; only its
                              hash is written (needs a Linux x86_64 machine to hash it)

Release archives (instead of deploying):
  --package DIR               build the binary and write into DIR the archives owners extract
                              with cPanel's File Manager: resolve-VERSION-x86_64-linux.zip and
                              .tar.gz (the program, the page and INSTALL.txt in the home
                              directory's layout; no configuration: the program writes its
                              starter at the first request) and SHA256SUMS

Afterwards:
  --url URL                   the address to open, printed at the end
  --domain NAME               the site's domain: the address printed is https://NAME/ and the
                              page's folder

Other:
  --settings FILE             read settings from FILE (default: deploy.conf beside this script,
                              when it exists; /dev/null for none); flags override it
  --dry-run                   print every step and change nothing (no build, no upload; the
                              host is only looked at)
  -h, --help                  this text

Exit status: 0 deployed (or dry run done), 1 failed, 2 bad options, 3 CGI is not set up for the
account (public_html/cgi-bin is missing).

Settings file: one `name = value` per line, names as the long options without the dashes
(transport, target, host, user, port, identity, ssh-config, remote-home, web-root,
password-file, ca-file, allow-plain-ftp, binary, no-install, create-cgi-bin, page-dir,
endpoint, force, provider, token-file, admin-password, url, domain);
`#` starts a comment line; yes or no for switches. A password is never read from it: use
password-file. See deploy.conf.example.

Examples:
  ./deploy.sh --transport ssh --host example.com --user alice --domain example.com
  ./deploy.sh --transport ftps --host ftp.example.com --user alice \
      --password-file ~/.config/resolve-ftp-password --domain example.com
  ./deploy.sh --transport local --target "$HOME"      # on the host itself
  ./deploy.sh --transport ssh --host example.com --user alice --domain example.com \
      --provider realdebrid --token-file ~/.config/resolve-token
  ./deploy.sh --package dist                          # the archives for File Manager

Building needs Linux on x86_64 with Rust (rustup), and musl-gcc (Debian: musl-tools). Elsewhere,
build on such a machine and pass --binary.
EOF
}

# ---------------------------------------------------------------------------------------------
# Output

step() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "$ME" "$*" >&2; }
die() {
    printf '%s: %s\n' "$ME" "$*" >&2
    exit 1
}
usage_error() {
    printf '%s: %s (see ./deploy.sh --help)\n' "$ME" "$*" >&2
    exit 2
}

# Joins words into one shell command line, quoting only the words that need it.
shell_words() {
    local out="" a
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
            out+="${out:+ }$a"
        else
            out+="${out:+ }$(shq "$a")"
        fi
    done
    printf '%s' "$out"
}

# Prints a command as it would be typed.
show() {
    printf '+ %s\n' "$(shell_words "$@")"
}

# Prints a command, then runs it unless this is a dry run.
run() {
    show "$@"
    if [ "$DRY_RUN" = yes ]; then
        return 0
    fi
    "$@"
}

# Quotes one word for a POSIX shell.
shq() {
    local s=${1//\'/\'\\\'\'}
    printf "'%s'" "$s"
}

# ---------------------------------------------------------------------------------------------
# Settings: flags first, then the settings file for whatever the flags left unset.

SETTINGS_KEYS=" transport target host user port identity ssh-config remote-home web-root password-file ca-file allow-plain-ftp binary no-install create-cgi-bin page-dir endpoint force provider token-file admin-password url domain "
SWITCH_KEYS=" allow-plain-ftp no-install create-cgi-bin force dry-run admin-password "

var_name() {
    local k=${2//-/_}
    printf '%s_%s' "$1" "$k"
}

set_flag() {
    printf -v "$(var_name flag "$1")" '%s' "$2"
}

# The value of a setting: flag, else settings file, else the default ($2).
setting() {
    local f s
    f=$(var_name flag "$1")
    s=$(var_name file "$1")
    if [ -n "${!f+x}" ]; then
        printf '%s' "${!f}"
    elif [ -n "${!s+x}" ]; then
        printf '%s' "${!s}"
    else
        printf '%s' "${2-}"
    fi
}

# A path setting with a leading ~/ made absolute (a settings file is not read by a shell).
path_setting() {
    local v
    v=$(setting "$1" "")
    case "$v" in
        \~) v=$HOME ;;
        \~/*) v=$HOME/${v#\~/} ;;
    esac
    printf '%s' "$v"
}

# Normalises a switch value to yes/no.
yes_no() {
    case "$(printf '%s' "$2" | tr '[:upper:]' '[:lower:]')" in
        yes | true | on | 1) printf yes ;;
        no | false | off | 0 | "") printf no ;;
        *) usage_error "$1: expected yes or no, got \"$2\"" ;;
    esac
}

SETTINGS_FILE=""
PACKAGE_DIR=""
parse_args() {
    while [ $# -gt 0 ]; do
        local arg=$1 name value
        shift
        case "$arg" in
            -h | --help)
                usage
                exit 0
                ;;
            --dry-run)
                set_flag dry-run yes
                continue
                ;;
            --settings | --settings=* | --package | --package=*)
                name=${arg%%=*}
                if [[ $arg == *=* ]]; then
                    value=${arg#*=}
                else
                    local what=value
                    [ "$name" = --package ] && what=directory
                    [ $# -gt 0 ] || usage_error "$name needs a $what"
                    value=$1
                    shift
                fi
                if [ "$name" = --settings ]; then
                    SETTINGS_FILE=$value
                else
                    PACKAGE_DIR=$value
                fi
                continue
                ;;
            --token | --token=*)
                usage_error "tokens are never taken on the command line: put it in a file (chmod 600) and name it with --token-file FILE"
                ;;
            --password | --password=*)
                usage_error "passwords are never taken on the command line: use --password-file FILE or the LFTP_PASSWORD environment variable"
                ;;
            --*=*)
                name=${arg%%=*}
                name=${name#--}
                value=${arg#*=}
                ;;
            --*)
                name=${arg#--}
                if [[ $SETTINGS_KEYS != *" $name "* && $SWITCH_KEYS != *" $name "* ]]; then
                    usage_error "unknown option --$name"
                fi
                if [[ $SWITCH_KEYS == *" $name "* ]]; then
                    value=yes
                else
                    [ $# -gt 0 ] || usage_error "--$name needs a value"
                    value=$1
                    shift
                fi
                ;;
            *)
                usage_error "unexpected argument \"$arg\""
                ;;
        esac
        if [[ $SETTINGS_KEYS != *" $name "* && $SWITCH_KEYS != *" $name "* ]]; then
            usage_error "unknown option --$name"
        fi
        set_flag "$name" "$value"
    done
}

trim() {
    local s=$1
    s=${s#"${s%%[![:space:]]*}"}
    s=${s%"${s##*[![:space:]]}"}
    printf '%s' "$s"
}

load_settings() {
    local file=$SETTINGS_FILE
    if [ -z "$file" ]; then
        file=$REPO/deploy.conf
        [ -f "$file" ] || return 0
    fi
    # Any readable file: --settings /dev/null reads none (and ignores deploy.conf).
    if [ ! -r "$file" ] || [ -d "$file" ]; then
        usage_error "cannot read the settings file $file"
    fi
    local n=0 line key value
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=$(trim "$line")
        case "$line" in
            "" | "#"*) continue ;;
            *=*) ;;
            *) usage_error "$file line $n: expected \"name = value\", got \"$line\"" ;;
        esac
        key=$(trim "${line%%=*}")
        value=$(trim "${line#*=}")
        case "$value" in
            \"*\") value=${value#\"} value=${value%\"} ;;
            \'*\') value=${value#\'} value=${value%\'} ;;
        esac
        case "$key" in
            password | ftp-password | pass)
                usage_error "$file line $n: a password is never read from the settings file: put it in its own file (mode 600) and name it with password-file"
                ;;
            token | api-token)
                usage_error "$file line $n: a token is never read from the settings file: put it in its own file (mode 600) and name it with token-file"
                ;;
        esac
        if [[ $SETTINGS_KEYS != *" $key "* ]]; then
            usage_error "$file line $n: unknown setting \"$key\""
        fi
        printf -v "$(var_name file "$key")" '%s' "$value"
    done <"$file"
    printf 'settings: %s\n' "$file"
}

# ---------------------------------------------------------------------------------------------
# The starter configuration: comment-free JSON the owner edits (README: Configuration). Safe
# from the first request: a spend limit on paid calls (100 a day, 1500 in 30 days: adjust them
# to your plan), the site's own origins when the domain is known, and the echo provider (which
# spends nothing) unless a preset and its token were given.

PRESETS=" realdebrid alldebrid premiumize debridlink torbox "

# The origins of the site's pages for a domain: https://example.com and https://www.example.com.
site_origins() {
    local d=$1
    [ -n "$d" ] || return 0
    d=${d#www.}
    printf '"https://%s", "https://www.%s"' "$d" "$d"
}

# Usage: starter_config DOMAIN PROVIDER TOKEN [ADMIN_HASH] (PROVIDER and TOKEN empty for the
# echo provider; with ADMIN_HASH, the dashboard is on with that password hash).
starter_config() {
    local provider='{"kind": "echo"}' admin=""
    if [ -n "$2" ]; then
        provider="{\"preset\": \"$2\", \"token\": \"$3\"}"
    fi
    if [ -n "${4-}" ]; then
        admin=$(printf ',\n  "admin": {"password_hash": "%s"}' "$4")
    fi
    cat <<JSON
{
  "provider": $provider,
  "store": {"kind": "file", "dir": "ratelimit", "on_error": "allow"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": 30, "window_secs": 60},
    {"name": "ip-day", "key": "ip", "limit": 300, "window_secs": 86400}
  ],
  "spend": [
    {"name": "day", "limit": 100, "window_secs": 86400},
    {"name": "month", "limit": 1500, "window_secs": 2592000}
  ],
  "allowed_origins": [$(site_origins "$1")],
  "client": {"ipv6_prefix": 64, "trusted_proxies": [], "forwarded_header": "X-Forwarded-For"},
  "request": {"max_body_bytes": 8192}$admin
}
JSON
}

# Reads the provider token from --token-file into TOKEN (never echoed, never on a command line).
TOKEN=""
read_token() {
    local file=$1
    if [ ! -f "$file" ] || [ ! -r "$file" ]; then
        die "cannot read the token file $file"
    fi
    # shellcheck disable=SC2012 # one named file; ls -l is the portable way to its mode
    case $(ls -ln -- "$file" | awk '{ print substr($1, 5, 6) }') in
        *r* | *w*) warn "$file can be read by others: chmod 600 $file" ;;
    esac
    IFS= read -r TOKEN <"$file" || [ -n "$TOKEN" ] || die "the token file $file is empty"
    TOKEN=$(trim "$TOKEN")
    TOKEN=${TOKEN%$'\r'}
    [ -n "$TOKEN" ] || die "the token file $file is empty"
    # Tokens are letters, digits and a few marks; anything else would need JSON escaping and is
    # more likely a wrong file. The token itself is never shown.
    [[ $TOKEN =~ ^[A-Za-z0-9._~+/=:-]+$ ]] || die "the first line of $file does not look like an API token (letters, digits and ._~+/=:- only; ${#TOKEN} characters): is it the right file?"
}

# ---------------------------------------------------------------------------------------------
# The host side (local and ssh): a POSIX sh script run in the account, as the account.
# Usage: sh -s -- ACTION HOME WEB_ROOT ID CREATE_CGI_BIN PAGE_DIR [ARGS...]
#   preflight  look (never change anything) and report what a deployment would do
#   inventory  print the list of installed files (resolve/installed.txt) and the sha256 of
#              each path given (ARGS), for deciding what may be replaced
#   prepare    create cgi-bin when it is missing and that was asked for
#   install    move the uploaded files (named .resolve-deploy.ID.*) into place: the page files
#              (ARGS) into PAGE_DIR, the program into cgi-bin, the configuration (only when
#              there is none) and the list of installed files into resolve/; check modes
#   check      run the deployed binary's `check`, as the web server will run it
#   cleanup    remove this deployment's uploaded temporary files
# PAGE_DIR is the page's directory relative to the home (public_html/resolve by default).

# Usage: no_cgi_bin WHERE WEB: says on stderr that the cgi-bin at WHERE (prefixed with who
# says it) does not exist and how to make one in WEB, the web root; exits 3. The host script
# (local, ssh) carries it too, as this definition.
no_cgi_bin() {
    cat >&2 <<EOF
$1 does not exist: CGI is not set up for this account.
  cPanel creates public_html/cgi-bin for accounts that may run CGI programs. To fix:
  - in cPanel, open File Manager, go to $2 and create the folder cgi-bin with
    permissions 0755 (or run deploy.sh again with --create-cgi-bin);
  - if programs in cgi-bin still do not run (the browser gets 403, 404, a download or
    "500 Internal Server Error" and the Errors page in cPanel (Metrics -> Errors) says
    "Options ExecCGI is off" or "script not found"), CGI is switched off for the account:
    ask your host to enable CGI scripts for it.
EOF
    exit 3
}

host_script() {
    declare -f no_cgi_bin
    cat <<'HOST'
set -eu
action=$1 home=$2 web=$3 id=$4 create_cgi=$5 pagedir=$6
shift 6
tmp=".resolve-deploy.$id"

say() { printf 'host: %s\n' "$*"; }
fail() { printf 'host: %s\n' "$*" >&2; exit 1; }

if [ -z "$home" ]; then
    home=${HOME:-}
    [ -n "$home" ] || home=$(awk -F: -v u="$(id -u)" '$3 == u { print $6 }' /etc/passwd)
fi
[ -d "$home" ] || fail "the home directory $home does not exist"
cd "$home"
me=$(id -u)
cgi="$web/cgi-bin"

# ls -ldn: permissions, link count, uid, gid, ...
perms() { ls -ldn -- "$1" | awk '{ print substr($1, 1, 10) }'; }
owner() { ls -ldn -- "$1" | awk '{ print $3 }'; }
writable_by_others() {
    case $(perms "$1") in
        ?????w* | ????????w*) return 0 ;;
    esac
    return 1
}

no_cgi() {
    no_cgi_bin "host: $home/$cgi" "$web"
}

preflight() {
    say "home directory $home (uid $me)"
    [ -d "$web" ] || fail "$home/$web does not exist: is $home the account's home directory? (--target / --remote-home, --web-root)"
    if [ ! -d "$cgi" ]; then
        if [ "$create_cgi" = yes ]; then
            say "$cgi is missing: it will be created (mode 755)"
        else
            no_cgi
        fi
    else
        [ "$(owner "$cgi")" = "$me" ] || fail "wrong permissions: $home/$cgi belongs to uid $(owner "$cgi"), not to this account (uid $me); suEXEC runs only programs in directories the account owns. Ask the host to give it back (chown) or remove it and deploy with --create-cgi-bin"
        [ -w "$cgi" ] || fail "wrong permissions: $home/$cgi is not writable by this account ($(perms "$cgi")); set it to 755 (cPanel File Manager: Permissions)"
        if writable_by_others "$cgi"; then
            say "$cgi is $(perms "$cgi"): suEXEC refuses group- or world-writable directories; it will be set to 755"
        fi
        if [ -e "$cgi/resolve" ]; then
            say "$cgi/resolve exists: it will be replaced (renamed over)"
        fi
    fi
    if writable_by_others "$web"; then
        say "warning: $web is $(perms "$web"): anyone on the server could change the site; 755 or 750 is usual"
    fi
    for d in resolve resolve/ratelimit; do
        if [ -d "$d" ]; then
            [ "$(owner "$d")" = "$me" ] || fail "wrong permissions: $home/$d belongs to uid $(owner "$d"), not to this account (uid $me): the program runs as the account and could not use it"
            say "$d exists ($(perms "$d")): kept as it is"
        elif [ -e "$d" ]; then
            fail "$home/$d exists but is not a directory"
        else
            say "$d will be created (mode 700)"
        fi
    done
    if [ -e resolve/config.json ]; then
        say "resolve/config.json exists: kept as it is"
    else
        say "resolve/config.json will be created (mode 600)"
    fi
    if [ -e "$pagedir" ] && [ ! -d "$pagedir" ]; then
        fail "$home/$pagedir exists but is not a directory: choose another place for the page with --page-dir"
    fi
    if [ -d "$pagedir" ]; then
        say "the page goes into $pagedir/"
    else
        say "the page goes into $pagedir/ (created, mode 755)"
    fi
}

sha() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum <"$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 <"$1" | cut -d' ' -f1
    else
        openssl dgst -sha256 -r <"$1" | cut -d' ' -f1
    fi
}

inventory() {
    if [ -f resolve/installed.txt ]; then
        sed 's/^/manifest /' resolve/installed.txt
    fi
    for p in "$@"; do
        if [ -L "$p" ] || { [ -e "$p" ] && [ ! -f "$p" ]; }; then
            printf 'file other %s\n' "$p"
        elif [ -f "$p" ]; then
            printf 'file %s %s\n' "$(sha "$p")" "$p"
        else
            printf 'file missing %s\n' "$p"
        fi
    done
}

verify_mode() {
    # $1 path, $2 expected permissions (a pattern)
    got=$(perms "$1")
    # shellcheck disable=SC2254
    case $got in
        $2) ;;
        *) fail "wrong permissions: $home/$1 is $got after chmod 755 (suEXEC refuses group- or world-writable programs and directories); set 755 in cPanel File Manager (Permissions)" ;;
    esac
    [ "$(owner "$1")" = "$me" ] || fail "wrong permissions: $home/$1 belongs to uid $(owner "$1"), not to this account (uid $me); suEXEC runs only the account's own programs"
}

install() {
    preflight >/dev/null
    umask 022
    # The data directory and the configuration first, so that the program never runs without
    # them; then the page; the program last, once its directory has the right mode.
    for d in resolve resolve/ratelimit; do
        if [ ! -d "$d" ]; then
            mkdir -m 700 "$d"
            say "created $d (mode 700)"
        fi
    done
    if [ ! -e resolve/config.json ] && [ -f "$tmp.config.json" ]; then
        chmod 600 "$tmp.config.json"
        # ln never replaces an existing file: a configuration that appeared meanwhile wins.
        if ln "$tmp.config.json" resolve/config.json 2>/dev/null; then
            say "created resolve/config.json (mode 600)"
        elif [ -e resolve/config.json ]; then
            say "kept resolve/config.json"
        else
            rm -f "$tmp.config.json"
            fail "cannot create $home/resolve/config.json"
        fi
    else
        say "kept resolve/config.json"
    fi
    rm -f "$tmp.config.json"
    if [ ! -d "$pagedir" ]; then
        mkdir -p "$pagedir"
        chmod 755 "$pagedir"
        say "created $pagedir (mode 755)"
    fi
    for f in "$@"; do
        [ -f "$web/$tmp.$f" ] || fail "upload failed: $home/$web/$tmp.$f is missing"
        chmod 644 "$web/$tmp.$f"
        mv -f "$web/$tmp.$f" "$pagedir/$f"
        say "installed $pagedir/$f"
    done
    chmod 755 "$cgi"
    verify_mode "$cgi" 'drwxr-[xs]r-x'
    [ -f "$cgi/$tmp.resolve" ] || fail "upload failed: $home/$cgi/$tmp.resolve is missing"
    chmod 755 "$cgi/$tmp.resolve"
    verify_mode "$cgi/$tmp.resolve" -rwxr-xr-x
    mv -f "$cgi/$tmp.resolve" "$cgi/resolve"
    say "installed $cgi/resolve"
    if [ -f "$tmp.installed.txt" ]; then
        chmod 600 "$tmp.installed.txt"
        mv -f "$tmp.installed.txt" resolve/installed.txt
        say "recorded the installed files in resolve/installed.txt"
    fi
}

prepare() {
    preflight >/dev/null
    if [ ! -d "$cgi" ]; then
        mkdir -m 755 "$cgi"
        say "created $cgi (mode 755)"
    fi
}

check() {
    env -u RESOLVE_CONFIG "$home/$cgi/resolve" check
}

cleanup() {
    rm -f "$cgi/$tmp.resolve" "$tmp.config.json" "$tmp.installed.txt"
    for f in "$@"; do
        rm -f "$web/$tmp.$f"
    done
}

case $action in
    preflight) preflight ;;
    inventory) inventory "$@" ;;
    prepare) prepare ;;
    install) install "$@" ;;
    check) check ;;
    cleanup) cleanup "$@" ;;
    *) fail "unknown action $action" ;;
esac
HOST
}

# ---------------------------------------------------------------------------------------------
# Building and checking the binary

target_dir() {
    local meta dir
    if meta=$(cargo metadata --no-deps --format-version 1 --manifest-path "$REPO/Cargo.toml" 2>/dev/null); then
        dir=$(printf '%s' "$meta" | grep -o '"target_directory":"[^"]*"' | head -n 1 | cut -d'"' -f4)
        if [ -n "$dir" ]; then
            printf '%s' "$dir"
            return
        fi
    fi
    printf '%s' "${CARGO_TARGET_DIR:-$REPO/target}"
}

ensure_build_tools() {
    command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs), or build elsewhere and pass --binary FILE"
    if command -v rustup >/dev/null; then
        if ! rustup target list --installed | grep -qx "$MUSL_TARGET"; then
            [ "$NO_INSTALL" = no ] || die "the Rust target $MUSL_TARGET is not installed: run rustup target add $MUSL_TARGET (or drop --no-install)"
            run rustup target add "$MUSL_TARGET"
        fi
    fi
    if ! command -v musl-gcc >/dev/null; then
        local how="apt-get install musl-tools"
        [ "$NO_INSTALL" = no ] || die "musl-gcc not found: run $how (Debian, Ubuntu) or drop --no-install"
        command -v apt-get >/dev/null || die "musl-gcc not found: install musl-tools (it provides musl-gcc), or pass --binary FILE"
        if [ "$(id -u)" -eq 0 ]; then
            run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q musl-tools
        elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            run sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q musl-tools
        else
            die "musl-gcc not found: run sudo $how, then deploy again"
        fi
    fi
}

build() {
    step "build the static binary ($MUSL_TARGET)"
    if [ "$DRY_RUN" = yes ]; then
        show env CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --target "$MUSL_TARGET" --manifest-path "$REPO/Cargo.toml"
        note "(dry run: not built; the binary would be $(target_dir)/$MUSL_TARGET/release/resolve)"
        BINARY=""
        return
    fi
    ensure_build_tools
    # From the repository, wherever deploy.sh was started: cargo reads the build settings in
    # .cargo/config.toml (position-dependent code, symbol names for the code layout) from the
    # directory it runs in.
    (cd "$REPO" && run env CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --target "$MUSL_TARGET" --manifest-path "$REPO/Cargo.toml")
    BINARY="$(target_dir)/$MUSL_TARGET/release/resolve"
    [ -f "$BINARY" ] || die "the build did not produce $BINARY"
}

check_static() {
    local bin=$1 desc="" checked=""
    [ -f "$bin" ] || die "$bin does not exist"
    [ "$(head -c 4 "$bin" | od -An -c | tr -d ' ')" = '177ELF' ] || die "$bin is not an ELF program: pass the Linux binary (target/$MUSL_TARGET/release/resolve)"
    if command -v file >/dev/null; then
        desc=$(file -b "$bin")
        case "$desc" in
            *x86-64*) ;;
            *) die "$bin is not an x86-64 program ($desc): cPanel servers run x86-64 Linux" ;;
        esac
        case "$desc" in
            *"statically linked"* | *"static-pie linked"*) checked=1 ;;
            *) die "$bin is not statically linked ($desc): build for $MUSL_TARGET" ;;
        esac
    fi
    if command -v readelf >/dev/null; then
        if readelf -lW "$bin" | grep -q 'INTERP'; then
            die "$bin is not statically linked: it names a program interpreter; build for $MUSL_TARGET"
        fi
        if readelf -dW "$bin" | grep -q '(NEEDED)'; then
            die "$bin is not statically linked: it needs shared libraries: $(readelf -dW "$bin" | grep '(NEEDED)' | tr -s ' ')"
        fi
        checked=1
    fi
    [ -n "$checked" ] || die "cannot check that $bin is statically linked: install file or binutils (readelf)"
    note "static binary: $bin ($(wc -c <"$bin" | tr -d ' ') bytes${desc:+; $desc})"
}

# ---------------------------------------------------------------------------------------------
# Transports

PAGE_FILES=()
collect_pages() {
    local f
    [ -f "$REPO/public/index.html" ] || die "$REPO/public/index.html is missing: run deploy.sh from a checkout of resolve"
    for f in "$REPO"/public/*; do
        if [ -f "$f" ]; then
            PAGE_FILES+=("$(basename "$f")")
        elif [ -e "$f" ]; then
            warn "public/$(basename "$f") is not a file: not uploaded"
        fi
    done
}

sha256_of() {
    if command -v sha256sum >/dev/null; then
        sha256sum <"$1" | cut -d' ' -f1
    else
        shasum -a 256 <"$1" | cut -d' ' -f1
    fi
}

# The version in Cargo.toml: the one the build will have.
repo_version() {
    sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$REPO/Cargo.toml" | head -n 1
}

# Copies the page into $WORK/page with the form's action pointing at the endpoint, so the page
# works from any folder (whatever action public/index.html has), and the version filled in
# where the page says @VERSION@ (its footer's HTML comment).
prepare_page() {
    local dir=$1 f
    mkdir -p "$dir"
    for f in "${PAGE_FILES[@]}"; do
        cp "$REPO/public/$f" "$dir/$f"
    done
    awk -v ep="$ENDPOINT" -v version="$(repo_version)" '
        !done && match($0, /[[:space:]]action="[^"]*"/) {
            $0 = substr($0, 1, RSTART) "action=\"" ep "\"" substr($0, RSTART + RLENGTH)
            done = 1
        }
        { gsub(/@VERSION@/, version) }
        { print }
        END { if (!done) exit 3 }
    ' "$REPO/public/index.html" >"$dir/index.html" ||
        die "public/index.html has no form with action=\"...\" to point at $ENDPOINT"
}

# What is on the host, from the inventory: the installed-files list (OLD_MANIFEST: "SHA  PATH"
# lines) and each destination's state (REMOTE_FILES: "SHA|missing|other PATH").
OLD_MANIFEST=()
REMOTE_FILES=()
CONFIG_EXISTS=no
read_inventory() {
    local line
    OLD_MANIFEST=()
    REMOTE_FILES=()
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in
            "manifest "*) OLD_MANIFEST+=("${line#manifest }") ;;
            "file "*) REMOTE_FILES+=("${line#file }") ;;
        esac
    done <"$1"
    if [ "$(remote_state resolve/config.json)" != missing ]; then
        CONFIG_EXISTS=yes
    fi
}

remote_state() {
    local l
    for l in "${REMOTE_FILES[@]}"; do
        if [ "${l#* }" = "$1" ]; then
            printf '%s' "${l%% *}"
            return
        fi
    done
    printf missing
}

manifest_sha() {
    local l
    for l in "${OLD_MANIFEST[@]}"; do
        case "$l" in
            "#"*) ;;
            *"  $1")
                printf '%s' "${l%%  *}"
                return 0
                ;;
        esac
    done
    return 1
}

# The files this run installs: DESTS (paths from the home) and SRCS (local files); NEW_SHA for
# those known before the build (the page).
DESTS=()
SRCS=()
NEW_SHA=()
plan_files() {
    local f
    DESTS=()
    SRCS=()
    NEW_SHA=()
    for f in "${PAGE_FILES[@]}"; do
        DESTS+=("$PAGE_PATH/$f")
        SRCS+=("$WORK/page/$f")
        NEW_SHA+=("$(sha256_of "$WORK/page/$f")")
    done
    DESTS+=("$WEB/cgi-bin/resolve")
    SRCS+=("")
    NEW_SHA+=("")
}

# Refuses (before anything is built or changed) to replace a file deploy.sh did not install, or
# the program changed since it did, unless --force. A file of the page the owner edited since is
# kept: the new version's goes beside it as NAME.new (unless --force, which replaces it).
check_overwrites() {
    local problems=() i dest cur mine
    for i in "${!DESTS[@]}"; do
        dest=${DESTS[i]}
        cur=$(remote_state "$dest")
        case "$cur" in
            missing) continue ;;
            other) die "$dest exists and is not a regular file: move it away or put the page elsewhere with --page-dir DIR" ;;
        esac
        if [ -n "${NEW_SHA[i]}" ] && [ "$cur" = "${NEW_SHA[i]}" ]; then
            continue
        fi
        if mine=$(manifest_sha "$dest"); then
            [ "$cur" = "$mine" ] && continue
            if [ "$FORCE" = no ] && [ "$dest" != "$WEB/cgi-bin/resolve" ] && [ "${dest%.new}" = "$dest" ]; then
                keep_edited "$i"
                continue
            fi
            problems+=("$dest: changed since deploy.sh installed it")
        elif [ "$dest" = "$WEB/cgi-bin/resolve" ]; then
            problems+=("$dest: not installed by this deploy.sh (an earlier resolve, installed before deploy.sh listed its files in resolve/installed.txt, is replaced with --force)")
        else
            problems+=("$dest: not installed by deploy.sh")
        fi
    done
    [ "${#problems[@]}" -gt 0 ] || return 0
    local p
    if [ "$FORCE" = yes ]; then
        for p in "${problems[@]}"; do
            warn "--force: replacing ${p%%: *} (${p#*: })"
        done
        return 0
    fi
    {
        printf '%s: these files are in the way, and deploy.sh replaces only files it installed itself:\n' "$ME"
        for p in "${problems[@]}"; do
            printf '  %s\n' "$p"
        done
        printf '  Nothing was changed. Move or rename them (cPanel File Manager), put the page in another\n'
        printf '  folder with --page-dir DIR, or replace them with --force.\n'
    } >&2
    exit 1
}

# The page file DESTS[$1], edited by the owner since deploy.sh installed it, stays as it is: this
# run installs the new version's as NAME.new beside it, and says so.
keep_edited() {
    local i=$1 dest name j
    dest=${DESTS[i]}
    name=${dest##*/}
    mv -f "$WORK/page/$name" "$WORK/page/$name.new"
    for j in "${!PAGE_FILES[@]}"; do
        [ "${PAGE_FILES[j]}" = "$name" ] && PAGE_FILES[j]=$name.new
    done
    DESTS[i]=$dest.new
    SRCS[i]=$WORK/page/$name.new
    warn "$dest was edited since deploy.sh installed it: it is kept as it is, and the new version's goes beside it as $dest.new; compare them, copy what you want from the new one, then delete $dest.new"
}

# The new list of installed files: this run's files, and earlier entries for other paths (a
# page left in a former --page-dir stays deploy.sh's to replace).
write_manifest() {
    local out=$1 i l keep
    {
        printf '# Files deploy.sh installed: sha256 and path from the home directory. A later\n'
        printf '# deploy.sh replaces only these, and only while unchanged (else --force).\n'
        for l in "${OLD_MANIFEST[@]}"; do
            case "$l" in
                "#"* | "") continue ;;
            esac
            keep=yes
            for i in "${!DESTS[@]}"; do
                [ "${l#*  }" = "${DESTS[i]}" ] && keep=no
            done
            [ "$keep" = no ] || printf '%s\n' "$l"
        done
        for i in "${!DESTS[@]}"; do
            printf '%s  %s\n' "$(sha256_of "${SRCS[i]}")" "${DESTS[i]}"
        done
    } >"$out"
}

# The configuration a first deployment writes, and `resolve check` on it with the binary about
# to be uploaded (when this machine can run it), before anything leaves this machine.
write_new_config() {
    local out=$1
    (
        umask 077
        starter_config "$DOMAIN" "$PROVIDER" "$TOKEN" "$ADMIN_HASH" >"$out"
    )
}

show_new_config() {
    local shown="" admin=""
    [ -z "$PROVIDER" ] || shown="(the first line of $TOKEN_FILE)"
    [ "$ADMIN_PASSWORD" = no ] || admin="(the hash of a new random password, shown once)"
    starter_config "$DOMAIN" "$PROVIDER" "$shown" "$admin" | sed 's/^/        /'
}

# --admin-password: a random password for the dashboard (120 bits from /dev/urandom, 20
# characters of A-Z a-z 0-9 - _) and its hash, made by the binary about to be uploaded. The
# password stays in this process (never on a command line, never in a file) until it is shown
# once at the end; the configuration gets the hash only.
ADMIN_PW=""
ADMIN_HASH=""
new_admin_password() {
    local bin=$1
    if [ "$(uname -sm)" != "Linux x86_64" ]; then
        die "--admin-password hashes the password with the binary, which this machine cannot run: deploy without it, then on the host run resolve hash-password and add \"admin\": {\"password_hash\": \"THE HASH\"} to ~/resolve/config.json (README: Dashboard)"
    fi
    [ -r /dev/urandom ] || die "--admin-password needs /dev/urandom"
    ADMIN_PW=$(head -c 15 /dev/urandom | base64 | tr '+/' '-_')
    [[ $ADMIN_PW =~ ^[A-Za-z0-9_-]{20}$ ]] || die "could not make a random password"
    ADMIN_HASH=$(printf '%s' "$ADMIN_PW" | env -u GATEWAY_INTERFACE -u RESOLVE_CONFIG "$bin" hash-password) ||
        die "resolve hash-password failed (see above)"
    [[ $ADMIN_HASH =~ ^\$argon2id\$[A-Za-z0-9+/=,\$]+$ ]] || die "resolve hash-password printed no hash"
}

# Shows the dashboard's password, this once.
show_admin_password() {
    local address=$1
    step "the dashboard's password (shown this once: write it down now)"
    note "$ADMIN_PW"
    note "sign in at $address; only its hash is kept (admin.password_hash in ~/resolve/config.json)"
    note "lost it? make a new hash with resolve hash-password and replace admin.password_hash (README: Dashboard)"
    ADMIN_PW=""
}

check_new_config() {
    local config=$1 bin=$2
    if [ "$(uname -sm)" != "Linux x86_64" ]; then
        note "resolve check on the new configuration: skipped (this machine cannot run the Linux binary); it runs on the host"
        return 0
    fi
    step "resolve check on the new configuration (here, before uploading it)"
    # The report without the effective configuration (the check on the host prints it).
    if ! env -u GATEWAY_INTERFACE -u RESOLVE_CONFIG "$bin" check --config "$config" 2>&1 |
        sed -e '/^effective configuration/,/^}/d' -e 's/^/    /'; then
        die "the new configuration does not pass resolve check (see above); nothing was uploaded"
    fi
}

# local ----------------------------------------------------------------------------------------

AS_OWNER=()
local_setup() {
    TARGET=$(path_setting target)
    if [ -z "$TARGET" ]; then
        [ "$(id -u)" -ne 0 ] || usage_error "running as root: name the account's home directory with --target /home/USER"
        TARGET=${HOME:-}
        [ -n "$TARGET" ] || usage_error "--target DIR is required (no HOME)"
    fi
    [ -d "$TARGET" ] || die "--target $TARGET does not exist"
    TARGET=$(cd "$TARGET" && pwd)
    local owner_uid owner_name
    owner_uid=$(stat -c %u -- "$TARGET")
    if [ "$owner_uid" != "$(id -u)" ]; then
        [ "$(id -u)" -eq 0 ] || die "wrong permissions: $TARGET belongs to uid $owner_uid, not to you (uid $(id -u)): run deploy.sh as that account"
        owner_name=$(awk -F: -v u="$owner_uid" '$3 == u { print $1; exit }' /etc/passwd)
        [ -n "$owner_name" ] || die "$TARGET belongs to uid $owner_uid, which has no account in /etc/passwd"
        # Root deploys as the account would: every file is written by the account itself.
        if command -v runuser >/dev/null; then
            AS_OWNER=(runuser -u "$owner_name" --)
        elif command -v setpriv >/dev/null; then
            AS_OWNER=(setpriv --reuid="$owner_uid" --regid="$(id -g "$owner_name")" --init-groups --)
        else
            die "running as root for $TARGET (owned by $owner_name): need runuser or setpriv to act as $owner_name"
        fi
        note "files are written as $owner_name (uid $owner_uid), the owner of $TARGET"
    elif [ "$owner_uid" = 0 ]; then
        warn "$TARGET belongs to root: suEXEC never runs programs as root; use the account's home"
    fi
}

local_host() {
    host_script | ${AS_OWNER[@]+"${AS_OWNER[@]}"} sh -s -- "$@"
}

local_upload() {
    local src=$1 rel=$2
    show cp "$src" "$TARGET/$rel"
    [ "$DRY_RUN" = yes ] && return 0
    # shellcheck disable=SC2016 # $1 belongs to the inner shell
    ${AS_OWNER[@]+"${AS_OWNER[@]}"} sh -c 'umask 077 && cat >"$1"' sh "$TARGET/$rel" <"$src" || {
        warn "upload failed: cannot write $TARGET/$rel"
        return 1
    }
}

# ssh -------------------------------------------------------------------------------------------

SSH=()
SSH_DEST=""
ssh_setup() {
    local host user port identity config
    host=$(setting host "")
    user=$(setting user "")
    port=$(setting port "")
    identity=$(path_setting identity)
    config=$(path_setting ssh-config)
    [ -n "$host" ] || usage_error "--host is required for --transport ssh"
    [ -z "$config" ] || [ -r "$config" ] || die "cannot read the ssh configuration $config"
    SSH_DEST=${user:+$user@}$host
    SSH=(ssh)
    [ -z "$config" ] || SSH+=(-F "$config")
    SSH+=(-o ControlMaster=auto -o "ControlPath=$WORK/ssh-%C" -o ControlPersist=120)
    [ -z "$port" ] || SSH+=(-p "$port")
    [ -z "$identity" ] || SSH+=(-i "$identity")
}

ssh_host() {
    local status=0
    host_script | "${SSH[@]}" "$SSH_DEST" "$(shell_words sh -s -- "$@")" || status=$?
    if [ "$status" -eq 255 ]; then
        warn "ssh to $SSH_DEST failed (see ssh's message above): check --host, --user, --port and your key, and that the host gives the account a shell"
    fi
    return "$status"
}

# Path on the server for a path relative to the home.
remote_path() {
    if [ -n "$REMOTE_HOME" ]; then
        printf '%s/%s' "${REMOTE_HOME%/}" "$1"
    else
        printf '%s' "$1"
    fi
}

ssh_upload() {
    local src=$1 rel=$2 dest
    dest=$(remote_path "$rel")
    [[ $dest =~ ^[A-Za-z0-9_./~@+-]+$ ]] || die "cannot upload to \"$dest\" over ssh: use a remote home without spaces or special characters"
    if command -v rsync >/dev/null; then
        run rsync --chmod=F600 -e "$(shell_words "${SSH[@]}")" "$src" "$SSH_DEST:$dest" || {
            warn "upload failed: rsync could not copy $src to $SSH_DEST:$dest"
            return 1
        }
    else
        local scp=(scp -q)
        local port identity config
        port=$(setting port "")
        identity=$(path_setting identity)
        config=$(path_setting ssh-config)
        [ -z "$config" ] || scp+=(-F "$config")
        scp+=(-o ControlMaster=auto -o "ControlPath=$WORK/ssh-%C")
        [ -z "$port" ] || scp+=(-P "$port")
        [ -z "$identity" ] || scp+=(-i "$identity")
        run "${scp[@]}" "$src" "$SSH_DEST:$dest" || {
            warn "upload failed: scp could not copy $src to $SSH_DEST:$dest"
            return 1
        }
    fi
}

# shellcheck disable=SC2317 # called from the EXIT trap
ssh_close() {
    if [ "${#SSH[@]}" -gt 0 ]; then
        "${SSH[@]}" -O exit "$SSH_DEST" >/dev/null 2>&1 || true
    fi
}

# ftps ------------------------------------------------------------------------------------------

FTP_PASSWORD=""
ftps_setup() {
    FTP_HOST=$(setting host "")
    FTP_USER=$(setting user "")
    FTP_PORT=$(setting port 21)
    [ -n "$FTP_HOST" ] || usage_error "--host is required for --transport ftps"
    [ -n "$FTP_USER" ] || usage_error "--user is required for --transport ftps"
    FTP_CA_FILE=$(path_setting ca-file)
    [ -z "$FTP_CA_FILE" ] || [ -r "$FTP_CA_FILE" ] || die "cannot read the certificate file $FTP_CA_FILE"
    command -v lftp >/dev/null || die "lftp not found: install it (Debian, Ubuntu: apt-get install lftp; macOS: brew install lftp)"
    if [ "$ALLOW_PLAIN_FTP" = yes ]; then
        warn "--allow-plain-ftp: if the server offers no TLS, the password is sent unencrypted"
    fi
    local pwfile
    pwfile=$(path_setting password-file)
    if [ -n "$pwfile" ]; then
        [ -r "$pwfile" ] || die "cannot read the password file $pwfile"
        # shellcheck disable=SC2012 # one named file; ls -l is the portable way to its mode
        case $(ls -ln -- "$pwfile" | awk '{ print substr($1, 5, 6) }') in
            *r* | *w*) warn "$pwfile can be read by others: chmod 600 $pwfile" ;;
        esac
        IFS= read -r FTP_PASSWORD <"$pwfile" || [ -n "$FTP_PASSWORD" ] || die "the password file $pwfile is empty"
    elif [ -n "${LFTP_PASSWORD:-}" ]; then
        FTP_PASSWORD=$LFTP_PASSWORD
    elif [ -t 0 ]; then
        read -r -s -p "FTP password for $FTP_USER@$FTP_HOST: " FTP_PASSWORD
        printf '\n'
    else
        die "no FTP password: use --password-file FILE or set LFTP_PASSWORD"
    fi
    [ -n "$FTP_PASSWORD" ] || die "the FTP password is empty"
}

# lftp quoting: double quotes, with \ and " escaped.
lq() {
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}

# Writes the start of every lftp script: TLS settings and the login (the password comes from
# LFTP_PASSWORD, which only the lftp process gets).
ftp_preamble() {
    local force=true
    [ "$ALLOW_PLAIN_FTP" = no ] || force=false
    cat <<EOF
set cmd:fail-exit yes
set cmd:interactive no
set ftp:ssl-allow true
set ftp:ssl-force $force
set ftp:ssl-protect-data true
set ftp:ssl-protect-list true
set ssl:verify-certificate true
set xfer:use-temp-file no
set net:max-retries 2
set net:reconnect-interval-base 5
set net:timeout 30
EOF
    if [ -n "$FTP_CA_FILE" ]; then
        printf 'set ssl:ca-file %s\n' "$(lq "$FTP_CA_FILE")"
    fi
    printf 'open --env-password -u %s -p %s %s\n' "$(lq "$FTP_USER")" "$FTP_PORT" "$(lq "ftp://$FTP_HOST")"
    if [ -n "$REMOTE_HOME" ]; then
        printf 'cd %s\n' "$(lq "$REMOTE_HOME")"
    fi
}

# Runs an lftp script (from stdin); prints it first. Output goes to $WORK/lftp.out; on failure
# lftp's messages are shown and LFTP_REASON says what went wrong, for the caller's message.
LFTP_REASON=""
lftp_run() {
    local script=$WORK/lftp.script
    LFTP_REASON=""
    {
        ftp_preamble
        cat
    } >"$script"
    printf '+ lftp -f %s <<\n' "$script"
    sed 's/^/    /' "$script"
    LFTP_PASSWORD=$FTP_PASSWORD lftp -f "$script" >"$WORK/lftp.out" 2>"$WORK/lftp.err" && return 0
    local status=$?
    sed 's/^/    lftp: /' "$WORK/lftp.err" >&2
    if grep -qi 'ssl-force\|does not support or allow SSL\|AUTH TLS' "$WORK/lftp.err"; then
        LFTP_REASON="the server refused FTP over TLS; deploy.sh does not send the password unencrypted unless --allow-plain-ftp"
    elif grep -qi 'Login incorrect\|Login failed\|530 ' "$WORK/lftp.err"; then
        LFTP_REASON="login refused: check --user and the password"
    elif grep -qi '^chmod:' "$WORK/lftp.err"; then
        LFTP_REASON="wrong permissions: the server refused to change file modes (SITE CHMOD), and suEXEC needs 755 for the program; set the modes in cPanel File Manager (Permissions) or ask the host"
    else
        LFTP_REASON="see lftp's messages above"
    fi
    return "$status"
}

# Lines of the last listing: "PERMISSIONS PATH" or "missing PATH".
FTP_LISTED=()
read_listing() {
    local line
    FTP_LISTED=()
    while IFS= read -r line || [ -n "$line" ]; do
        FTP_LISTED+=("$line")
    done <"$WORK/lftp.out"
}

ftps_preflight() {
    step "look at $FTP_USER@$FTP_HOST (read only)"
    local p
    {
        # Unconditional, so that a refused login stops here instead of reading as "missing".
        printf 'cls -1d --perms .\n'
        for p in "$WEB" "$WEB/cgi-bin" resolve resolve/ratelimit resolve/config.json resolve/installed.txt "$PAGE_PATH" "${DESTS[@]}"; do
            printf 'cls -1d --perms %s || echo %s\n' "$(lq "$p")" "$(lq "missing $p")"
        done
    } >"$WORK/preflight.lftp"
    lftp_run <"$WORK/preflight.lftp" || die "cannot look at the FTP account: $LFTP_REASON"
    read_listing
    local line
    for line in "${FTP_LISTED[@]}"; do
        case "$line" in
            . | ./ | *" ." | *" ./") ;;
            *) note "server: $line" ;;
        esac
    done
    ftp_exists "$WEB" || die "no $WEB in the FTP login directory${REMOTE_HOME:+ ($REMOTE_HOME)}: is it the account's home? (--remote-home, --web-root)"
    if ! ftp_exists "$WEB/cgi-bin"; then
        if [ "$CREATE_CGI_BIN" = yes ]; then
            note "$WEB/cgi-bin is missing: it will be created (mode 755)"
        else
            no_cgi_bin "$ME: $WEB/cgi-bin" "$WEB"
        fi
    fi
    for p in resolve resolve/ratelimit resolve/config.json; do
        if ftp_exists "$p"; then
            note "$p exists: kept as it is"
        else
            note "$p will be created"
        fi
    done
    note "the page goes into $PAGE_PATH/"
}

# The same inventory as the host script's, from files fetched over FTPS and hashed here.
ftps_inventory() {
    local i p n=0
    mkdir -p "$WORK/remote"
    {
        printf 'set xfer:clobber on\n'
        if ftp_exists resolve/installed.txt; then
            printf 'get %s -o %s\n' "$(lq resolve/installed.txt)" "$(lq "$WORK/remote/manifest")"
        fi
        for p in "${DESTS[@]}"; do
            n=$((n + 1))
            case "$(ftp_perms_of "$p" || true)" in
                -*) printf 'get %s -o %s\n' "$(lq "$p")" "$(lq "$WORK/remote/$n")" ;;
            esac
        done
    } >"$WORK/inventory.lftp"
    if grep -q '^get ' "$WORK/inventory.lftp"; then
        lftp_run <"$WORK/inventory.lftp" || die "cannot read the files in the way over FTPS: $LFTP_REASON"
    fi
    {
        if [ -f "$WORK/remote/manifest" ]; then
            sed 's/^/manifest /' "$WORK/remote/manifest"
        fi
        if ftp_exists resolve/config.json; then
            printf 'file present resolve/config.json\n'
        fi
        i=0
        for p in "${DESTS[@]}"; do
            i=$((i + 1))
            if [ -f "$WORK/remote/$i" ]; then
                printf 'file %s %s\n' "$(sha256_of "$WORK/remote/$i")" "$p"
            elif ftp_exists "$p"; then
                printf 'file other %s\n' "$p"
            fi
        done
    } >"$WORK/inventory"
    read_inventory "$WORK/inventory"
}

ftp_perms_of() {
    local line
    for line in "${FTP_LISTED[@]}"; do
        case "$line" in
            "missing $1") return 1 ;;
            *" $1" | *" $1/") printf '%s' "${line%% *}" && return 0 ;;
        esac
    done
    return 1
}

ftp_exists() {
    ftp_perms_of "$1" >/dev/null
}

ftps_deploy() {
    local bin=$1 f
    local cgi="$WEB/cgi-bin"
    step "upload over FTPS (temporary names, then renamed)"
    {
        if ! ftp_exists "$cgi"; then
            printf 'mkdir %s\nchmod 755 %s\n' "$(lq "$cgi")" "$(lq "$cgi")"
        fi
        if ! ftp_exists resolve; then
            printf 'mkdir resolve\n'
        fi
        if ! ftp_exists resolve/ratelimit; then
            printf 'mkdir resolve/ratelimit\n'
        fi
        if ! ftp_exists resolve; then
            printf 'chmod 700 resolve\n'
        fi
        if ! ftp_exists resolve/ratelimit; then
            printf 'chmod 700 resolve/ratelimit\n'
        fi
        if ! ftp_exists "$PAGE_PATH"; then
            printf 'mkdir -p %s\nchmod 755 %s\n' "$(lq "$PAGE_PATH")" "$(lq "$PAGE_PATH")"
        fi
        for f in "${PAGE_FILES[@]}"; do
            printf 'put %s -o %s\nchmod 644 %s\n' "$(lq "$WORK/page/$f")" \
                "$(lq "$WEB/$TMP_PREFIX.$f")" "$(lq "$WEB/$TMP_PREFIX.$f")"
        done
        if [ "$CONFIG_EXISTS" = no ]; then
            printf 'put %s -o %s\nchmod 600 %s\n' "$(lq "$WORK/cfg/config.json")" \
                "$(lq "resolve/$TMP_PREFIX.config.json")" "$(lq "resolve/$TMP_PREFIX.config.json")"
        fi
        printf 'put %s -o %s\nchmod 755 %s\n' "$(lq "$bin")" \
            "$(lq "$cgi/$TMP_PREFIX.resolve")" "$(lq "$cgi/$TMP_PREFIX.resolve")"
        printf 'put %s -o %s\nchmod 600 %s\n' "$(lq "$WORK/installed.txt")" \
            "$(lq "resolve/$TMP_PREFIX.installed.txt")" "$(lq "resolve/$TMP_PREFIX.installed.txt")"
    } >"$WORK/upload.lftp"
    if [ "$DRY_RUN" = yes ]; then
        printf '+ lftp (not run: dry run) <<\n'
        sed 's/^/    /' "$WORK/upload.lftp"
    else
        lftp_run <"$WORK/upload.lftp" || {
            local reason=$LFTP_REASON
            ftps_cleanup
            die "upload failed: $reason; nothing was renamed, the site is as it was"
        }
    fi

    step "rename into place"
    local renames=()
    for f in "${PAGE_FILES[@]}"; do
        renames+=("$WEB/$TMP_PREFIX.$f" "$PAGE_PATH/$f")
    done
    if [ "$CONFIG_EXISTS" = no ]; then
        renames+=("resolve/$TMP_PREFIX.config.json" resolve/config.json)
    fi
    renames+=("$cgi/$TMP_PREFIX.resolve" "$cgi/resolve")
    renames+=("resolve/$TMP_PREFIX.installed.txt" resolve/installed.txt)
    local i from to
    for ((i = 0; i < ${#renames[@]}; i += 2)); do
        from=${renames[i]}
        to=${renames[i + 1]}
        if [ "$DRY_RUN" = yes ]; then
            printf '+ lftp: mv %s %s\n' "$(lq "$from")" "$(lq "$to")"
            continue
        fi
        printf 'mv %s %s\n' "$(lq "$from")" "$(lq "$to")" >"$WORK/rename.lftp"
        if ! lftp_run <"$WORK/rename.lftp"; then
            # Some FTP servers refuse to rename over an existing file: remove it first (a
            # request in that instant gets 404 rather than a half-written file).
            warn "the server did not rename $from over $to: removing $to first"
            printf 'rm %s\nmv %s %s\n' "$(lq "$to")" "$(lq "$from")" "$(lq "$to")" >"$WORK/rename.lftp"
            lftp_run <"$WORK/rename.lftp" || {
                local reason=$LFTP_REASON
                ftps_cleanup
                die "upload failed: could not rename $from to $to on the server: $reason"
            }
        fi
    done

    step "check permissions on the server"
    if [ "$DRY_RUN" = yes ]; then
        printf '+ lftp: chmod 755 %s; cls -1d --perms %s %s\n' "$(lq "$cgi")" "$(lq "$cgi")" "$(lq "$cgi/resolve")"
        return
    fi
    {
        printf 'chmod 755 %s\n' "$(lq "$cgi")"
        printf 'cls -1d --perms %s %s resolve resolve/ratelimit\n' "$(lq "$cgi")" "$(lq "$cgi/resolve")"
    } >"$WORK/verify.lftp"
    lftp_run <"$WORK/verify.lftp" || die "wrong permissions: could not set or read the modes of $cgi: $LFTP_REASON"
    read_listing
    ftp_expect "$cgi" drwxr-xr-x
    ftp_expect "$cgi/resolve" -rwxr-xr-x
    local p
    for p in resolve resolve/ratelimit; do
        case "$(ftp_perms_of "$p" || true)" in
            d???------) ;;
            *) warn "$p is $(ftp_perms_of "$p" || printf 'missing'): the data should be private to the account (700); set it in cPanel File Manager" ;;
        esac
    done
}

ftp_expect() {
    local got
    got=$(ftp_perms_of "$1" || printf 'missing')
    if [ "$got" != "$2" ]; then
        die "wrong permissions: $1 is $got on the server, expected $2; suEXEC refuses group- or world-writable programs and directories. The FTP server may not allow SITE CHMOD: set the mode in cPanel File Manager (Permissions)"
    fi
    note "$1: $got"
}

ftps_cleanup() {
    local f
    {
        printf 'set cmd:fail-exit no\n'
        printf 'rm -f %s\n' "$(lq "$WEB/cgi-bin/$TMP_PREFIX.resolve")" "$(lq "resolve/$TMP_PREFIX.config.json")" \
            "$(lq "resolve/$TMP_PREFIX.installed.txt")"
        for f in "${PAGE_FILES[@]}"; do
            printf 'rm -f %s\n' "$(lq "$WEB/$TMP_PREFIX.$f")"
        done
    } >"$WORK/cleanup.lftp"
    lftp_run <"$WORK/cleanup.lftp" >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------------------------------------
# Deployment over a shell (local, ssh)

# Runs the host script's ACTION in the account, with ARGS.
on_host() {
    local action=$1
    shift
    set -- "$action" "$HOST_HOME" "$WEB" "$ID" "$CREATE_CGI_BIN" "$PAGE_PATH" "$@"
    if [ "$TRANSPORT" = ssh ]; then
        ssh_host "$@"
    else
        local_host "$@"
    fi
}

# Copies a local file to a path relative to the account's home.
upload() {
    if [ "$TRANSPORT" = ssh ]; then
        ssh_upload "$@"
    else
        local_upload "$@"
    fi
}

shell_deploy() {
    local bin=$1 f
    if [ "$CREATE_CGI_BIN" = yes ] && [ "$DRY_RUN" = no ]; then
        on_host prepare || die "cannot create $WEB/cgi-bin (see above)"
    fi
    step "upload (temporary names in the destination directories)"
    local failed=""
    for f in "${PAGE_FILES[@]}"; do
        upload "$WORK/page/$f" "$WEB/$TMP_PREFIX.$f" || failed=1
    done
    if [ -z "$failed" ] && [ "$CONFIG_EXISTS" = no ]; then
        upload "$WORK/cfg/config.json" "$TMP_PREFIX.config.json" || failed=1
    fi
    if [ -z "$failed" ]; then
        # Only a dry run gets here without a binary: it names the one a build would make.
        upload "${bin:-(the built binary)}" "$WEB/cgi-bin/$TMP_PREFIX.resolve" || failed=1
    fi
    if [ -z "$failed" ] && [ "$DRY_RUN" = no ]; then
        upload "$WORK/installed.txt" "$TMP_PREFIX.installed.txt" || failed=1
    fi
    if [ "$DRY_RUN" = yes ]; then
        step "install on the host (not run: dry run)"
        note "chmod 755 and rename $WEB/cgi-bin/$TMP_PREFIX.resolve to $WEB/cgi-bin/resolve; cgi-bin 755"
        note "chmod 644 and rename each page file into $PAGE_PATH/ (created when missing, 755)"
        note "create resolve/ and resolve/ratelimit/ (700) when missing; list the installed files in resolve/installed.txt"
        if [ "$CONFIG_EXISTS" = no ]; then
            note "create resolve/config.json (600):"
            show_new_config
        fi
        step "resolve check on the host (not run: dry run)"
        return 0
    fi
    if [ -n "$failed" ]; then
        on_host cleanup "${PAGE_FILES[@]}" || true
        die "upload failed; the site is as it was"
    fi

    step "install on the host"
    if ! on_host install "${PAGE_FILES[@]}"; then
        on_host cleanup "${PAGE_FILES[@]}" || true
        die "installing on the host failed (see above)"
    fi

    step "resolve check on the host"
    if ! on_host check; then
        die "deployed, but resolve check reports problems: fix the lines marked FAIL in ~/resolve/config.json (README: Configuration), then run deploy.sh again or resolve check"
    fi
}

# ---------------------------------------------------------------------------------------------
# Release archives: the home directory's layout, for cPanel's File Manager (docs/INSTALL.txt)

# Writes ARCHIVE.zip from the staged tree: Unix modes in every entry, entries sorted, one fixed
# time, so that the same commit gives the same bytes. No entry for the web root itself, so that
# extracting never changes its mode.
write_zip() {
    python3 - "$1" "$2" "$3" "$WEB" <<'PY'
import os, stat, sys, time, zipfile
root, out, epoch, web = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
when = time.gmtime(max(epoch, 315532800))[:6]
paths = []
for d, dirs, files in os.walk(root):
    for n in dirs + files:
        paths.append(os.path.relpath(os.path.join(d, n), root))
with zipfile.ZipFile(out, "w") as z:
    for rel in sorted(paths):
        # No entry for the web root or ~/resolve: extracting never changes their modes (the
        # page's folder, where an archive extracted into the web root puts resolve/, stays 755).
        if rel in (web, "resolve"):
            continue
        st = os.lstat(os.path.join(root, rel))
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            info = zipfile.ZipInfo(rel + "/", when)
            info.external_attr = ((stat.S_IFDIR | mode) << 16) | 0x10
            data = b""
        else:
            info = zipfile.ZipInfo(rel, when)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
        info.create_system = 3
        z.writestr(info, data)
PY
}

make_package() {
    local out=$1 version name stage epoch f
    [ -z "$PROVIDER" ] || usage_error "--package makes archives to share: they never hold a token (--provider, --token-file)"
    [ "$ADMIN_PASSWORD" = no ] || usage_error "--package makes archives to share: they never hold a password (--admin-password); after installing, turn the dashboard on with resolve hash-password (README: Dashboard)"
    [ "$DRY_RUN" = no ] || usage_error "--package has no --dry-run"
    [ -z "$DOMAIN" ] || warn "--domain does not change the archives: they hold no configuration (the program writes the starter, with an empty allowed_origins, at its first request)"
    version=$(repo_version)
    [ -n "$version" ] || die "no version in Cargo.toml"
    name=resolve-$version-x86_64-linux
    command -v python3 >/dev/null || die "python3 not found: it writes the zip (Debian: apt-get install python3)"
    command -v tar >/dev/null || die "tar not found"
    command -v gzip >/dev/null || die "gzip not found"
    if [ -n "$BINARY" ]; then
        step "use the prebuilt binary"
        BINARY=$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")
    else
        build
    fi
    check_static "$BINARY"

    # No settings in the archive: the program makes ~/resolve/config.json (the starter) at
    # its first request or command, so extracting any version anywhere never replaces the
    # owner's settings, and extracting into the web root by mistake puts nothing secret there.
    step "stage the home directory's layout"
    stage=$WORK/package
    mkdir -p "$stage/$WEB/cgi-bin"
    prepare_page "$stage/$PAGE_PATH"
    cp "$BINARY" "$stage/$WEB/cgi-bin/resolve"
    local page_url="https://YOUR-DOMAIN/"
    [ "$PAGE_DIR" = . ] || page_url="$page_url${PAGE_DIR#./}/"
    sed -e "s|@VERSION@|$version|g" -e "s|@PAGE_URL@|$page_url|g" -e "s|@PAGE_PATH@|$PAGE_PATH|g" \
        -e "s|@WEB@|$WEB|g" "$REPO/docs/INSTALL.txt" >"$stage/INSTALL.txt"
    # The list of the files installed, as deploy.sh keeps it: the program compares the page's
    # files with it, keeps a copy of those the owner edited and puts them back after the next
    # archive is extracted over them (the new ones beside them, as NAME.new).
    mkdir -p "$stage/resolve"
    {
        printf '# Files the archive installed: sha256 and path from the home directory. The program\n'
        printf '# keeps the page files you edit and puts them back after an upgrade.\n'
        for f in "${PAGE_FILES[@]}"; do
            printf '%s  %s\n' "$(sha256_of "$stage/$PAGE_PATH/$f")" "$PAGE_PATH/$f"
        done
        printf '%s  %s\n' "$(sha256_of "$stage/$WEB/cgi-bin/resolve")" "$WEB/cgi-bin/resolve"
    } >"$stage/resolve/installed.txt"
    find "$stage" -type d -exec chmod 755 {} +
    find "$stage" -type f -exec chmod 644 {} +
    chmod 755 "$stage/$WEB/cgi-bin/resolve"
    chmod 600 "$stage/resolve/installed.txt"

    epoch=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || true)
    [ -n "$epoch" ] || epoch=${SOURCE_DATE_EPOCH:-1704067200}
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    rm -f "$out/$name.zip" "$out/$name.tar.gz" "$out/SHA256SUMS"
    step "write $out/$name.zip and $name.tar.gz"
    write_zip "$stage" "$out/$name.zip" "$epoch"
    (
        cd "$stage"
        find . -mindepth 1 ! -path "./$WEB" ! -path ./resolve | sed 's|^\./||' | LC_ALL=C sort >"$WORK/package.list"
        tar --format=gnu --no-recursion --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
            -cf - -T "$WORK/package.list"
    ) | gzip -9 -n >"$out/$name.tar.gz"
    (
        cd "$out"
        sha256sum "$name.zip" "$name.tar.gz" >SHA256SUMS
    )
    for f in "$name.zip" "$name.tar.gz" SHA256SUMS; do
        note "$out/$f ($(wc -c <"$out/$f" | tr -d ' ') bytes)"
    done
    note "inside: INSTALL.txt, $WEB/cgi-bin/resolve, $PAGE_PATH/, resolve/installed.txt (no settings: the program makes them)"
}

# ---------------------------------------------------------------------------------------------

WORK=""
# shellcheck disable=SC2317 # the EXIT trap
cleanup_work() {
    if [ "${TRANSPORT:-}" = ssh ]; then
        ssh_close
    fi
    if [ -n "$WORK" ]; then
        rm -rf "$WORK"
    fi
}

main() {
    parse_args "$@"
    load_settings

    TRANSPORT=$(setting transport "")
    DRY_RUN=$(yes_no dry-run "$(setting dry-run no)")
    NO_INSTALL=$(yes_no no-install "$(setting no-install no)")
    CREATE_CGI_BIN=$(yes_no create-cgi-bin "$(setting create-cgi-bin no)")
    ALLOW_PLAIN_FTP=$(yes_no allow-plain-ftp "$(setting allow-plain-ftp no)")
    FORCE=$(yes_no force "$(setting force no)")
    ADMIN_PASSWORD=$(yes_no admin-password "$(setting admin-password no)")
    WEB=$(setting web-root public_html)
    WEB=${WEB%/}
    PAGE_DIR=$(setting page-dir resolve)
    ENDPOINT=$(setting endpoint /cgi-bin/resolve)
    PROVIDER=$(setting provider "")
    TOKEN_FILE=$(path_setting token-file)
    REMOTE_HOME=$(setting remote-home "")
    BINARY=$(path_setting binary)
    local url
    url=$(setting url "")
    DOMAIN=$(setting domain "")

    case "$WEB" in
        /* | *..* | "") usage_error "--web-root must be a path inside the home, like public_html" ;;
    esac
    PAGE_DIR=${PAGE_DIR%/}
    case "$PAGE_DIR" in
        . | "") PAGE_DIR=. ;;
        /* | *..* | cgi-bin | cgi-bin/*) usage_error "--page-dir must be a folder inside the web root (not cgi-bin), like resolve, or . for the web root" ;;
    esac
    [[ $PAGE_DIR =~ ^[A-Za-z0-9._/-]+$ ]] || usage_error "--page-dir: use letters, digits and ._-/ only"
    if [ "$PAGE_DIR" = . ]; then
        PAGE_PATH=$WEB
    else
        PAGE_PATH=$WEB/${PAGE_DIR#./}
    fi
    [[ $ENDPOINT =~ ^(/|https?://)[A-Za-z0-9._~/:%@+-]*$ ]] || usage_error "--endpoint must be a path like /cgi-bin/resolve (or a full https:// address)"
    [[ -z $DOMAIN || $DOMAIN =~ ^[A-Za-z0-9.-]+(:[0-9]+)?$ ]] || usage_error "--domain: a host name like example.com, without https:// or a path"
    if [ -n "$PROVIDER" ]; then
        [[ $PRESETS == *" $PROVIDER "* ]] || usage_error "unknown provider \"$PROVIDER\": one of$PRESETS(or edit the configuration for any other, README: Providers)"
        [ -n "$TOKEN_FILE" ] || usage_error "--provider $PROVIDER needs --token-file FILE (the API token on its first line)"
        read_token "$TOKEN_FILE"
    elif [ -n "$TOKEN_FILE" ]; then
        usage_error "--token-file needs --provider NAME (realdebrid, alldebrid, premiumize, debridlink or torbox)"
    fi
    if [ -n "$url" ] && [ -n "$DOMAIN" ]; then
        usage_error "give --url or --domain, not both"
    fi
    if [ -n "$DOMAIN" ]; then
        url="https://$DOMAIN/"
    fi

    if [ -n "$PACKAGE_DIR" ]; then
        [ -z "$TRANSPORT" ] || usage_error "--package builds archives: it takes no --transport"
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/resolve-deploy.XXXXXX")
        trap cleanup_work EXIT
        collect_pages
        make_package "$PACKAGE_DIR"
        return
    fi

    case "$TRANSPORT" in
        local | ssh | ftps) ;;
        "") usage_error "choose a transport: --transport local, ssh or ftps (or --package DIR)" ;;
        *) usage_error "unknown transport \"$TRANSPORT\": local, ssh or ftps" ;;
    esac
    [ "$TRANSPORT" = ftps ] || [ "$ALLOW_PLAIN_FTP" = no ] || usage_error "--allow-plain-ftp applies to --transport ftps only"

    WORK=$(mktemp -d "${TMPDIR:-/tmp}/resolve-deploy.XXXXXX")
    trap cleanup_work EXIT

    if [ "$DRY_RUN" = yes ]; then
        printf 'dry run: nothing is built, uploaded or changed\n'
    fi
    collect_pages
    prepare_page "$WORK/page"
    plan_files

    # The account is looked at first, so that a site that cannot work is reported before a
    # minute is spent building.
    HOST_HOME=""
    case "$TRANSPORT" in
        local)
            local_setup
            HOST_HOME=$TARGET
            printf 'deploying to %s (local)\n' "$TARGET"
            ;;
        ssh)
            ssh_setup
            HOST_HOME=$REMOTE_HOME
            printf 'deploying to %s over ssh\n' "$SSH_DEST"
            ;;
        ftps)
            ftps_setup
            printf 'deploying to %s@%s over FTPS\n' "$FTP_USER" "$FTP_HOST"
            ;;
    esac
    if [ "$TRANSPORT" = ftps ]; then
        ftps_preflight
        ftps_inventory
    else
        step "look at the account (read only)"
        local status=0
        on_host preflight || status=$?
        case $status in
            0) ;;
            3) exit 3 ;;
            *) die "the account is not ready (see above)" ;;
        esac
        on_host inventory resolve/config.json "${DESTS[@]}" >"$WORK/inventory" || die "cannot look at the files in the way (see above)"
        read_inventory "$WORK/inventory"
    fi
    check_overwrites
    if [ -n "$PROVIDER" ] && [ "$CONFIG_EXISTS" = yes ]; then
        die "resolve/config.json exists, and deploy.sh never changes a configuration: to use $PROVIDER, edit it (cPanel File Manager: Edit; or over ssh) and set \"provider\": {\"preset\": \"$PROVIDER\", \"token\": \"YOUR-API-TOKEN\"}, then run resolve check; or move the file away and deploy again for a new one. Nothing was changed"
    fi
    if [ "$ADMIN_PASSWORD" = yes ] && [ "$CONFIG_EXISTS" = yes ]; then
        die "resolve/config.json exists, and deploy.sh never changes a configuration: to turn the dashboard on, run resolve hash-password (it reads the password on standard input) and add \"admin\": {\"password_hash\": \"THE HASH\"} to it (README: Dashboard). Nothing was changed"
    fi

    if [ -n "$BINARY" ]; then
        step "use the prebuilt binary"
        BINARY=$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")
    else
        build
    fi
    if [ -n "$BINARY" ]; then
        check_static "$BINARY"
        SRCS[${#SRCS[@]} - 1]=$BINARY
    fi
    if [ "$CONFIG_EXISTS" = no ]; then
        mkdir -p "$WORK/cfg"
        if [ "$ADMIN_PASSWORD" = yes ] && [ "$DRY_RUN" = no ]; then
            new_admin_password "$BINARY"
        fi
        write_new_config "$WORK/cfg/config.json"
        if [ "$DRY_RUN" = no ]; then
            check_new_config "$WORK/cfg/config.json" "$BINARY"
        fi
        # Shown before the upload: a deployment that stops after installing the configuration
        # must not leave a dashboard whose password nobody saw.
        if [ -n "$ADMIN_PW" ]; then
            show_admin_password "$(dashboard_url "$url")"
        fi
    fi
    if [ "$DRY_RUN" = no ]; then
        write_manifest "$WORK/installed.txt"
    fi

    if [ "$TRANSPORT" = ftps ]; then
        ftps_deploy "${BINARY:-(the built binary)}"
        if [ "$DRY_RUN" = no ]; then
            note "no shell over FTP: to check the configuration, open the site and send a link;"
            note "problems show in cPanel under Metrics -> Errors, in lines starting with resolve:"
        fi
    else
        shell_deploy "$BINARY"
    fi

    if [ "$DRY_RUN" = yes ]; then
        step "dry run finished: nothing was changed"
    else
        step "deployed"
    fi
    local page_url=""
    [ "$PAGE_DIR" = . ] || page_url="${PAGE_DIR#./}/"
    if [ -n "$url" ]; then
        note "open ${url%/}/$page_url (the page); the endpoint is $(endpoint_url "${url%/}")"
    else
        note "open your site's address${page_url:+ followed by /$page_url} (pass --domain example.com to have it printed here)"
    fi
    if [ -n "$ADMIN_HASH" ]; then
        note "dashboard: $(dashboard_url "$url") (its password was shown above, once)"
    elif [ "$ADMIN_PASSWORD" = yes ] && [ "$DRY_RUN" = yes ]; then
        note "dashboard: $(dashboard_url "$url") (a deployment shows its new password once)"
    fi
    note "settings: ~/resolve/config.json; limit data: ~/resolve/ratelimit/; installed files: ~/resolve/installed.txt"
    note "for cron (cPanel: Cron Jobs): */15 * * * * \$HOME/$WEB/cgi-bin/resolve sweep >/dev/null"
}

# The dashboard's address: the program's (always $WEB/cgi-bin/resolve) followed by /admin.
dashboard_url() {
    if [ -n "$1" ]; then
        printf '%s/cgi-bin/resolve/admin' "${1%/}"
    else
        printf "your site's /cgi-bin/resolve/admin"
    fi
}

endpoint_url() {
    case "$ENDPOINT" in
        /*) printf '%s%s' "$1" "$ENDPOINT" ;;
        *) printf '%s' "$ENDPOINT" ;;
    esac
}

# One line, so that bash has read everything before it runs: a checkout updated while deploying
# cannot change what this run does next.
main "$@"; exit

#!/usr/bin/env bash
# Deploys resolve to a cPanel-style account: builds the static binary, puts it in
# public_html/cgi-bin/resolve and the page in public_html/, prepares ~/resolve/ (the data
# directory and a starter configuration), then runs `resolve check` on the host.
# Transports: local (this machine), ssh (rsync or scp), ftps (lftp). See ./deploy.sh --help.
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
  public_html/                  the page: the files of public/ (index.html, style.css, app.js)
  ~/resolve/ratelimit/          the rate-limit data (mode 700), outside the web root
  ~/resolve/config.json         a starter configuration (mode 600, the echo provider), written
                                only when none exists

An existing configuration and existing limit data are never overwritten or deleted, so running
it again (to upgrade) is safe. Where a shell is available (local, ssh) it then runs
`resolve check` on the host and prints its report.

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

Afterwards:
  --url URL                   the address to open, printed at the end
  --domain NAME               the site's domain: the address printed is https://NAME/

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
password-file, ca-file, allow-plain-ftp, binary, no-install, create-cgi-bin, url, domain);
`#` starts a comment line; yes or no for switches. A password is never read from it: use
password-file. See deploy.conf.example.

Examples:
  ./deploy.sh --transport ssh --host example.com --user alice --domain example.com
  ./deploy.sh --transport ftps --host ftp.example.com --user alice \
      --password-file ~/.config/resolve-ftp-password --domain example.com
  ./deploy.sh --transport local --target "$HOME"      # on the host itself

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

SETTINGS_KEYS=" transport target host user port identity ssh-config remote-home web-root password-file ca-file allow-plain-ftp binary no-install create-cgi-bin url domain "
SWITCH_KEYS=" allow-plain-ftp no-install create-cgi-bin dry-run "

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
            --settings)
                [ $# -gt 0 ] || usage_error "--settings needs a value"
                SETTINGS_FILE=$1
                shift
                continue
                ;;
            --settings=*)
                SETTINGS_FILE=${arg#--settings=}
                continue
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
        esac
        if [[ $SETTINGS_KEYS != *" $key "* ]]; then
            usage_error "$file line $n: unknown setting \"$key\""
        fi
        printf -v "$(var_name file "$key")" '%s' "$value"
    done <"$file"
    printf 'settings: %s\n' "$file"
}

# ---------------------------------------------------------------------------------------------
# The starter configuration: comment-free JSON the owner edits (README: Configuration).

starter_config() {
    cat <<'JSON'
{
  "provider": {"kind": "echo"},
  "store": {"kind": "file", "dir": "ratelimit", "on_error": "allow"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": 30, "window_secs": 60},
    {"name": "ip-day", "key": "ip", "limit": 300, "window_secs": 86400}
  ],
  "client": {"ipv6_prefix": 64, "trusted_proxies": [], "forwarded_header": "X-Forwarded-For"},
  "request": {"max_body_bytes": 8192}
}
JSON
}

# ---------------------------------------------------------------------------------------------
# The host side (local and ssh): a POSIX sh script run in the account, as the account.
# Usage: sh -s -- ACTION HOME WEB_ROOT ID CREATE_CGI_BIN [PAGE FILES...]
#   preflight  look (never change anything) and report what a deployment would do
#   prepare    create cgi-bin when it is missing and that was asked for
#   install    move the uploaded files (named .resolve-deploy.ID.*) into place, create the
#              data directory and the starter configuration when missing, check modes
#   check      run the deployed binary's `check`, as the web server will run it
#   cleanup    remove this deployment's uploaded temporary files

host_script() {
    printf 'starter_config() {\ncat <<'\''JSON'\''\n'
    starter_config
    printf 'JSON\n}\n'
    cat <<'HOST'
set -eu
action=$1 home=$2 web=$3 id=$4 create_cgi=$5
shift 5
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
    cat >&2 <<EOF
host: $home/$cgi does not exist: CGI is not set up for this account.
  cPanel creates public_html/cgi-bin for accounts that may run CGI programs. To fix:
  - in cPanel, open File Manager, go to $web and create the folder cgi-bin with
    permissions 0755 (or run deploy.sh again with --create-cgi-bin);
  - if programs in cgi-bin still do not run (the browser gets 403, 404, a download or
    "500 Internal Server Error" and the Errors page in cPanel (Metrics -> Errors) says
    "Options ExecCGI is off" or "script not found"), CGI is switched off for the account:
    ask your host to enable CGI scripts for it.
EOF
    exit 3
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
        say "resolve/config.json will be created (mode 600) with the echo provider: edit it to add your provider"
    fi
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
    if [ ! -e resolve/config.json ]; then
        (
            umask 077
            starter_config >"resolve/$tmp.config.json"
        )
        # ln never replaces an existing file: a configuration that appeared meanwhile wins.
        if ln "resolve/$tmp.config.json" resolve/config.json 2>/dev/null; then
            say "created resolve/config.json (mode 600) with the echo provider"
        elif [ -e resolve/config.json ]; then
            say "kept resolve/config.json"
        else
            rm -f "resolve/$tmp.config.json"
            fail "cannot create $home/resolve/config.json"
        fi
        rm -f "resolve/$tmp.config.json"
    else
        say "kept resolve/config.json"
    fi
    for f in "$@"; do
        [ -f "$web/$tmp.$f" ] || fail "upload failed: $home/$web/$tmp.$f is missing"
        chmod 644 "$web/$tmp.$f"
        mv -f "$web/$tmp.$f" "$web/$f"
        say "installed $web/$f"
    done
    chmod 755 "$cgi"
    verify_mode "$cgi" 'drwxr-[xs]r-x'
    [ -f "$cgi/$tmp.resolve" ] || fail "upload failed: $home/$cgi/$tmp.resolve is missing"
    chmod 755 "$cgi/$tmp.resolve"
    verify_mode "$cgi/$tmp.resolve" -rwxr-xr-x
    mv -f "$cgi/$tmp.resolve" "$cgi/resolve"
    say "installed $cgi/resolve"
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
    rm -f "$cgi/$tmp.resolve" "resolve/$tmp.config.json"
    for f in "$@"; do
        rm -f "$web/$tmp.$f"
    done
}

case $action in
    preflight) preflight ;;
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
    run env CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --target "$MUSL_TARGET" --manifest-path "$REPO/Cargo.toml"
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
        for p in "$WEB" "$WEB/cgi-bin" "$WEB/cgi-bin/resolve" resolve resolve/ratelimit resolve/config.json; do
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
            cat >&2 <<EOF
$ME: $WEB/cgi-bin does not exist: CGI is not set up for this account.
  cPanel creates public_html/cgi-bin for accounts that may run CGI programs. To fix:
  - in cPanel, open File Manager, go to $WEB and create the folder cgi-bin with
    permissions 0755 (or run deploy.sh again with --create-cgi-bin);
  - if programs in cgi-bin still do not run (the browser gets 403, 404, a download or
    "500 Internal Server Error" and the Errors page in cPanel (Metrics -> Errors) says
    "Options ExecCGI is off" or "script not found"), CGI is switched off for the account:
    ask your host to enable CGI scripts for it.
EOF
            exit 3
        fi
    fi
    for p in resolve resolve/ratelimit resolve/config.json; do
        if ftp_exists "$p"; then
            note "$p exists: kept as it is"
        else
            note "$p will be created"
        fi
    done
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
        for f in "${PAGE_FILES[@]}"; do
            printf 'put %s -o %s\nchmod 644 %s\n' "$(lq "$REPO/public/$f")" \
                "$(lq "$WEB/$TMP_PREFIX.$f")" "$(lq "$WEB/$TMP_PREFIX.$f")"
        done
        if ! ftp_exists resolve/config.json; then
            printf 'put %s -o %s\nchmod 600 %s\n' "$(lq "$WORK/config.json")" \
                "$(lq "resolve/$TMP_PREFIX.config.json")" "$(lq "resolve/$TMP_PREFIX.config.json")"
        fi
        printf 'put %s -o %s\nchmod 755 %s\n' "$(lq "$bin")" \
            "$(lq "$cgi/$TMP_PREFIX.resolve")" "$(lq "$cgi/$TMP_PREFIX.resolve")"
    } >"$WORK/upload.lftp"
    starter_config >"$WORK/config.json"
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
        renames+=("$WEB/$TMP_PREFIX.$f" "$WEB/$f")
    done
    if ! ftp_exists resolve/config.json; then
        renames+=("resolve/$TMP_PREFIX.config.json" resolve/config.json)
    fi
    renames+=("$cgi/$TMP_PREFIX.resolve" "$cgi/resolve")
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
        printf 'rm -f %s\n' "$(lq "$WEB/cgi-bin/$TMP_PREFIX.resolve")" "$(lq "resolve/$TMP_PREFIX.config.json")"
        for f in "${PAGE_FILES[@]}"; do
            printf 'rm -f %s\n' "$(lq "$WEB/$TMP_PREFIX.$f")"
        done
    } >"$WORK/cleanup.lftp"
    lftp_run <"$WORK/cleanup.lftp" >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------------------------------------
# Deployment over a shell (local, ssh)

# Runs the host script's ACTION in the account.
on_host() {
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
        on_host prepare "$HOST_HOME" "$WEB" "$ID" yes || die "cannot create $WEB/cgi-bin (see above)"
    fi
    step "upload (temporary names in the destination directories)"
    local failed=""
    for f in "${PAGE_FILES[@]}"; do
        upload "$REPO/public/$f" "$WEB/$TMP_PREFIX.$f" || failed=1
    done
    if [ -z "$failed" ]; then
        # Only a dry run gets here without a binary: it names the one a build would make.
        upload "${bin:-(the built binary)}" "$WEB/cgi-bin/$TMP_PREFIX.resolve" || failed=1
    fi
    if [ "$DRY_RUN" = yes ]; then
        step "install on the host (not run: dry run)"
        note "chmod 755 and rename $WEB/cgi-bin/$TMP_PREFIX.resolve to $WEB/cgi-bin/resolve; cgi-bin 755"
        note "chmod 644 and rename each page file into $WEB/"
        note "create resolve/ and resolve/ratelimit/ (700) when missing; resolve/config.json (600) when missing:"
        starter_config | sed 's/^/        /'
        step "resolve check on the host (not run: dry run)"
        return 0
    fi
    if [ -n "$failed" ]; then
        on_host cleanup "$HOST_HOME" "$WEB" "$ID" no "${PAGE_FILES[@]}" || true
        die "upload failed; the site is as it was"
    fi

    step "install on the host"
    if ! on_host install "$HOST_HOME" "$WEB" "$ID" "$CREATE_CGI_BIN" "${PAGE_FILES[@]}"; then
        on_host cleanup "$HOST_HOME" "$WEB" "$ID" no "${PAGE_FILES[@]}" || true
        die "installing on the host failed (see above)"
    fi

    step "resolve check on the host"
    if ! on_host check "$HOST_HOME" "$WEB" "$ID" no; then
        die "deployed, but resolve check reports problems: fix the lines marked FAIL in ~/resolve/config.json (README: Configuration), then run deploy.sh again or resolve check"
    fi
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
    WEB=$(setting web-root public_html)
    WEB=${WEB%/}
    REMOTE_HOME=$(setting remote-home "")
    BINARY=$(path_setting binary)
    local url domain
    url=$(setting url "")
    domain=$(setting domain "")

    case "$TRANSPORT" in
        local | ssh | ftps) ;;
        "") usage_error "choose a transport: --transport local, ssh or ftps" ;;
        *) usage_error "unknown transport \"$TRANSPORT\": local, ssh or ftps" ;;
    esac
    case "$WEB" in
        /* | *..* | "") usage_error "--web-root must be a path inside the home, like public_html" ;;
    esac
    [ "$TRANSPORT" = ftps ] || [ "$ALLOW_PLAIN_FTP" = no ] || usage_error "--allow-plain-ftp applies to --transport ftps only"
    if [ -n "$url" ] && [ -n "$domain" ]; then
        usage_error "give --url or --domain, not both"
    fi
    if [ -n "$domain" ]; then
        url="https://$domain/"
    fi

    WORK=$(mktemp -d "${TMPDIR:-/tmp}/resolve-deploy.XXXXXX")
    trap cleanup_work EXIT

    if [ "$DRY_RUN" = yes ]; then
        printf 'dry run: nothing is built, uploaded or changed\n'
    fi
    collect_pages

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
    else
        step "look at the account (read only)"
        local status=0
        on_host preflight "$HOST_HOME" "$WEB" "$ID" "$CREATE_CGI_BIN" || status=$?
        case $status in
            0) ;;
            3) exit 3 ;;
            *) die "the account is not ready (see above)" ;;
        esac
    fi

    if [ -n "$BINARY" ]; then
        step "use the prebuilt binary"
        BINARY=$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")
    else
        build
    fi
    if [ -n "$BINARY" ]; then
        check_static "$BINARY"
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
    if [ -n "$url" ]; then
        note "open ${url%/}/ (the page); the endpoint is ${url%/}/cgi-bin/resolve"
    else
        note "open your site's address (pass --domain example.com to have it printed here)"
    fi
    note "settings: ~/resolve/config.json; limit data: ~/resolve/ratelimit/"
    note "for cron (cPanel: Cron Jobs): */15 * * * * \$HOME/$WEB/cgi-bin/resolve sweep >/dev/null"
}

# One line, so that bash has read everything before it runs: a checkout updated while deploying
# cannot change what this run does next.
main "$@"; exit

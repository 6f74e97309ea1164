#!/usr/bin/env bash
# The project's test command: installs missing test dependencies (as root, Debian), then runs
# formatting, lints, every test (real Apache with suEXEC, MariaDB, Redis, Chromium, sshd and an
# FTPS server where the tests need them), the static musl release build and its checks, and
# what the usage journal costs that binary's CGI 429 path (a figure printed, never judged).
#
# The tests under Apache run twice: with the binary under mod_cgid (CGI), then under mod_fcgid
# (FastCGI, RESOLVE_TEST_APACHE_MODE=fcgid).
#
# Usage: tests/run-all.sh        (works non-interactively, e.g. with CI=true and no stdin)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

MUSL_TARGET=x86_64-unknown-linux-musl
APT_PACKAGES=(
    apache2
    apache2-suexec-pristine
    libapache2-mod-fcgid
    mariadb-server
    redis-server
    chromium
    chromium-driver
    musl-tools
    g++
    shellcheck
    openssh-server
    openssh-client
    rsync
    vsftpd
    lftp
    openssl
    file
    binutils
    python3
    # valgrind: bench/request-path.sh --check, which runs a refused request under callgrind
    valgrind
    unzip
    procps
    ca-certificates
    # ip and curl: the client in a network namespace (tests/controls.rs)
    iproute2
    curl
    # setpriv and runuser (tests/storage_faults.rs, the suEXEC account), mount and umount
    util-linux
    mount
    # the journal's cost on the CGI 429 path (bench/run.sh --journal-cost)
    wrk
)

step() { printf '\n==> %s\n' "$*"; }
die() {
    printf 'run-all.sh: %s\n' "$*" >&2
    exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

missing_packages() {
    local p
    for p in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            printf '%s\n' "$p"
        fi
    done
}

install_packages() {
    command -v dpkg-query >/dev/null || die "this script installs with apt on Debian; install by hand: ${APT_PACKAGES[*]}"
    local missing=()
    mapfile -t missing < <(missing_packages)
    if [ "${#missing[@]}" -eq 0 ]; then
        return
    fi
    if ! is_root; then
        die "missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
    fi
    step "installing ${missing[*]}"
    # Do not let package scripts start system-wide services: the tests start their own.
    local policy=/usr/sbin/policy-rc.d made_policy=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made_policy=1
    fi
    local status=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    } </dev/null || status=$?
    if [ -n "$made_policy" ]; then
        rm -f "$policy"
    fi
    [ "$status" -eq 0 ] || die "apt-get failed (exit $status)"
}

# npm fetches axe-core for the browser tests. Machines that come with Node.js have it already
# (from a Node.js package that conflicts with Debian's npm): Debian's is installed only where
# there is none.
install_npm() {
    if command -v npm >/dev/null; then
        return
    fi
    is_root || die "npm is missing (run as root, or: sudo apt-get install npm)"
    step "installing npm"
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm
    } </dev/null || die "apt-get could not install npm"
}

install_rust_parts() {
    command -v cargo >/dev/null || die "cargo not found: install Rust (rustup) first"
    if ! command -v rustup >/dev/null; then
        # Without rustup, the toolchain must already have the pieces.
        return
    fi
    if ! rustup target list --installed | grep -qx "$MUSL_TARGET"; then
        step "rustup target add $MUSL_TARGET"
        rustup target add "$MUSL_TARGET" </dev/null
    fi
    local c
    for c in clippy rustfmt; do
        if ! rustup component list --installed | grep -q "^$c"; then
            step "rustup component add $c"
            rustup component add "$c" </dev/null
        fi
    done
}

check_static() {
    local bin=$1 desc
    desc=$(file -b "$bin")
    printf '%s\n' "$desc"
    case "$desc" in
        *"statically linked"* | *"static-pie linked"*) ;;
        *) die "$bin is not statically linked: $desc" ;;
    esac
    if readelf -lW "$bin" | grep -q 'INTERP'; then
        die "$bin has a PT_INTERP (program interpreter)"
    fi
    if readelf -dW "$bin" | grep -q '(NEEDED)'; then
        die "$bin needs shared libraries: $(readelf -dW "$bin" | grep '(NEEDED)')"
    fi
    printf 'static binary: %s, %s bytes\n' "$bin" "$(stat -c %s "$bin")"
}

# The release binary's code starts with what a CGI request runs (link/request-path.ld, through
# build.rs): the section is there, and the file's names still find most of that code.
check_layout() {
    local bin=$1 size kib
    size=$(readelf -SW "$bin" | sed 's/^ *\[ *[0-9]*\] *//' | awk '$1 == ".text.request" { print $5 }')
    [ -n "$size" ] || die "$bin has no .text.request section: build.rs did not pass link/request-path.ld to the linker"
    kib=$((16#$size / 1024))
    [ "$kib" -ge 128 ] || die "link/request-path.ld gathers only $kib KiB of the request path's code (about 300 when written): run bench/request-path.sh"
    printf 'request path gathered at the start of the code: %s KiB\n' "$kib"
    # The arena after every other static (link/arena.ld): its pattern names the arena's symbol.
    size=$(readelf -SW "$bin" | sed 's/^ *\[ *[0-9]*\] *//' | awk '$1 == ".bss.arena" { print $5 }')
    [ "$((16#${size:-0}))" -ge $((512 * 1024)) ] || die "$bin has no .bss.arena section holding the arena: link/arena.ld's pattern no longer names src/gateway/arena.rs's ARENA"
}

main() {
    local started=$SECONDS before
    # What git sees now; the run must leave it the same (no rewritten lock file, no stray file).
    before=$(git status --porcelain 2>/dev/null || true)
    install_packages
    install_npm
    install_rust_parts

    step "shellcheck"
    shellcheck -x tests/run-all.sh .ci/run deploy.sh fuzz/run.sh bench/run.sh bench/starts.sh \
        bench/request-path.sh bench/starter.sh bench/apache-profile.sh

    step "cargo fmt --check"
    cargo fmt --check
    cargo fmt --check --manifest-path fuzz/Cargo.toml

    # --all-features: the suites behind the `servers` feature are linted too.
    step "cargo clippy --locked --all-targets --all-features -- -D warnings"
    cargo clippy --locked --all-targets --all-features -- -D warnings

    # Every suite: the `servers` feature adds those that start Apache, MariaDB, Redis,
    # Chromium, sshd or vsftpd (installed above; a missing one fails its tests, never skips).
    step "cargo test --features servers --no-fail-fast"
    cargo test --locked --features servers --no-fail-fast </dev/null

    # The tests that run the binary under Apache through the harness (a site of the support kit,
    # Site::builder, or Apache's resolve_cgi), once more with mod_fcgid (FastCGI) instead of
    # mod_cgid. Files that choose the mode themselves are not repeated, nor those that set up their
    # own handlers; files that run the binary only directly use Setup::builder. A test's own
    # modules, in tests/NAME/ beside tests/NAME.rs, count as part of it.
    local apache_tests=() file sources
    for file in tests/*.rs; do
        sources=("$file")
        if [ -d "${file%.rs}" ]; then
            sources+=("${file%.rs}")
        fi
        if grep -rEq '\.resolve_(cgi|program)\(|\bSite::builder\(' "${sources[@]}" && ! grep -rEq '\.mode\(Mode::(Cgid|Fcgid)\)' "${sources[@]}"; then
            apache_tests+=(--test "$(basename "$file" .rs)")
        fi
    done
    step "RESOLVE_TEST_APACHE_MODE=fcgid cargo test --features servers --no-fail-fast ${apache_tests[*]}"
    RESOLVE_TEST_APACHE_MODE=fcgid cargo test --locked --features servers --no-fail-fast \
        "${apache_tests[@]}" </dev/null

    step "release build for $MUSL_TARGET"
    CC_x86_64_unknown_linux_musl=musl-gcc cargo build --locked --release --target "$MUSL_TARGET"
    check_static "${CARGO_TARGET_DIR:-target}/$MUSL_TARGET/release/resolve"
    check_layout "${CARGO_TARGET_DIR:-target}/$MUSL_TARGET/release/resolve"
    step "link/request-path.ld gathers every function a refused request runs"
    bash bench/request-path.sh --check </dev/null

    # The benchmark's figure for the journal: the release binary's 429 under mod_cgid with the
    # file store, with and without the journal, for a few seconds. A busy machine moves the
    # figure, so it is printed and not judged; the step fails only when the bench breaks (or
    # the journal did not count the 429s it answered).
    step "the usage journal's cost on the CGI 429 path (file store, mod_cgid; a figure, not a check)"
    bash bench/run.sh --journal-cost </dev/null

    step "fuzzing: every target for 8 s (installs cargo-fuzz; fails on any crash)"
    bash fuzz/run.sh 8 </dev/null

    step "the checkout is as it was"
    local after
    after=$(git status --porcelain 2>/dev/null || true)
    [ "$after" = "$before" ] || die "the test command changed the checkout (git status before and after):
$before
---
$after"

    step "all checks passed in $((SECONDS - started)) s"
}

main "$@"

#!/usr/bin/env bash
# Writes link/request-path.ld, the order in which the static binary's code is laid out: the
# functions a CGI request runs up to its answer first, together, then the rest. A CGI process
# maps its code page by page as it first runs it (the 64 KiB around each page it faults on),
# so code scattered over the binary's 1.8 MB costs a fault and a mapping per stretch touched,
# at every request; gathered, the same code takes a few (docs/performance.md). build.rs hands
# the file to the linker for the release build of the static binary.
#
# It builds that binary with the linker's map, runs requests under callgrind (valgrind) with a
# file store: a refused request (the path scrapers take) answered as text (by the store), as
# HTML and as JSON (from the memory of refusals), and an admitted one (the echo provider: no
# network), and looks up in the map the section (one per function) of every instruction they
# ran, and runs the refused request under valgrind's lackey to find the read-only data it
# reads, gathered likewise at the start of the read-only data. Rerun it when the request path's
# code has changed much or the toolchain has: a function missing from the list only stays
# where the linker puts it, and a name that no longer exists matches nothing.
#
# With --check it writes nothing: it builds the binary with the list as it is, and fails when a
# function a refused request runs is not gathered by it (a function renamed, moved to another
# module or new since the list was written), naming them; tests/run-all.sh runs it so.
#
# Usage: bench/request-path.sh [--check]        (needs valgrind and python3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
check=no
case ${1:-} in
    --check) check=yes ;;
    "") ;;
    *) echo "usage: bench/request-path.sh [--check]" >&2; exit 2 ;;
esac

TARGET=x86_64-unknown-linux-musl
for tool in valgrind musl-gcc python3 readelf; do
    command -v "$tool" >/dev/null || {
        echo "request-path: $tool not found (apt-get install valgrind musl-tools python3 binutils)" >&2
        exit 1
    }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
binary="${CARGO_TARGET_DIR:-target}/$TARGET/release/resolve"

# The release build as owners get it, with the linker's map (RESOLVE_LINK_MAP, read by build.rs).
build() {
    RESOLVE_LINK_MAP="$1" CC_x86_64_unknown_linux_musl=musl-gcc \
        cargo build --locked --quiet --release --target "$TARGET"
}
build "$work/map"

# bench/starter.sh's configuration, the client allowed 30 requests a day: the echo provider
# for the admitted requests, then the preset for the refused ones.
# shellcheck source=bench/starter.sh
. bench/starter.sh
mkdir "$work/data"
refusing_config "$work/data" 30 '{"kind": "echo"}' >"$work/echo.json"
refusing_config "$work/data" 30 >"$work/preset.json"

# A request under callgrind, which writes every instruction it ran with its address.
profile() {
    local name=$1 config=$2 accept=$3 status=$4
    cgi_request "$work/$config.json" "$accept" valgrind --tool=callgrind --dump-instr=yes \
        --compress-pos=no --compress-strings=no --callgrind-out-file="$work/$name.cg" \
        "$binary" >"$work/$name.out" 2>"$work/$name.log"
    head -n 1 "$work/$name.out" | grep -q "^Status: $status" || {
        echo "request-path: the $name request answered $(head -n 1 "$work/$name.out"), not $status" >&2
        exit 1
    }
}
profile admitted echo 'text/plain' 200
for _ in $(seq 29); do
    cgi_request "$work/echo.json" text/plain "$binary" >/dev/null
done
# The first refusal is the store's (and remembered); the next ones, a fraction of a second
# later each, are answered from the data directory's memory of refusals, as a scraper's are.
profile refused-text preset 'text/plain' 429
profile refused-html preset 'text/html,application/xhtml+xml,*/*;q=0.8' 429
profile refused-json preset 'application/json' 429
# The first request of a new second moves the journal's spool of the seconds before (once a
# second, whatever the traffic): its code is gathered too, so that whether a profiled request
# above happened to start a second changes nothing.
sleep 1.2
profile refused-moving preset 'text/plain' 429
# The read-only data a refused request reads, address by address (valgrind's lackey).
cgi_request "$work/preset.json" text/plain valgrind --tool=lackey --trace-mem=yes \
    --log-file="$work/refused.mem" "$binary" >/dev/null 2>&1

out=link/request-path.ld
[ "$check" = no ] || out="$work/request-path.ld"
python3 - "$work/map" "$out" "$work/ran" "$work/refused.mem" "$work/refused-text.cg" \
    "$work/refused-html.cg" "$work/refused-json.cg" "$work/refused-moving.cg" \
    "$work/admitted.cg" <<'PY'
import bisect, re, sys

map_path, out_path, ran_path, mem_path = sys.argv[1:5]
profiles = sys.argv[5:]

# Input sections of the program's code in the map: " NAME ADDR SIZE FILE", the name alone on
# its line when long.
def input_sections(kind):
    """The map's input sections whose names start with `kind` (".text", ".rodata"): " NAME
    ADDR SIZE FILE", the name alone on its line when long."""
    found, pending = [], None
    for line in open(map_path, errors="replace"):
        if line.startswith("Linker script and memory map"):
            found = []
        m = re.match(r"^ (" + re.escape(kind) + r"\S*)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*))?$", line)
        if m:
            if m.group(2) is None:
                pending = m.group(1)
            else:
                found.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1), m.group(4)))
            continue
        m = re.match(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", line)
        if m and pending:
            found.append((int(m.group(1), 16), int(m.group(2), 16), pending, m.group(3)))
        pending = None
    return sorted(s for s in found if s[0] and s[1])

sections = input_sections(".text")
starts = [s[0] for s in sections]

def pattern(section, kind=".text"):
    addr, size, name, origin = section
    lib = re.search(r"(?:^|/)libc\.a\((.+)\)$", origin)
    if lib:
        return f"*libc.a:{lib.group(1)}({kind} {kind}.*)"
    if origin.endswith("crt1.o"):
        return f"*crt1.o({kind} {kind}.*)"
    # v0 names (.cargo/config.toml): each crate's hash, the back-references whose offsets
    # follow from the hashes' lengths and the number LLVM gives a local copy are left open,
    # so that the pattern holds for the same function in another build.
    name = re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", name)
    name = re.sub(r"B[0-9A-Za-z]{0,3}_", "B*_", name)
    # A local copy's number is left open; an unnamed constant's number is its name.
    if ".Lanon." not in name:
        name = re.sub(r"\.[0-9]+$", ".*", name)
    return f"*({name})"

# Every section that ran: the refused requests' first (the last profile is the admitted
# request), each group in the order of its patterns, so that the file changes only where the
# code it names does.
ran, seen = [], set()
for n, path in enumerate(profiles):
    group = []
    for line in open(path):
        m = re.match(r"^(?:calls=\d+ )?0x([0-9a-f]+)", line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < sections[i][0] + sections[i][1] and i not in seen:
            seen.add(i)
            group.append(sections[i])
    if n < len(profiles) - 1:
        ran += group
    else:
        ran.sort(key=pattern)
        ran += sorted(group, key=pattern)

with open(ran_path, "w") as f:
    f.write("".join(s[2] + "\n" for s in ran))
with open(ran_path + ".refused", "w") as f:
    f.write("".join(s[2] + "\n" for s in ran[: len(ran) - len(group)]))

# What the program runs natively but not under valgrind: SHA-256 (the file store's key names)
# with the processor's SHA extensions, which valgrind's emulated processor lacks, the C
# library's lookup of the kernel's clock functions (vDSO), which valgrind does not offer, and
# the exit, which valgrind takes over. And data only the kernel reads, which lackey does not
# see: the empty path the C library's `fstat` passes to `fstatat`.
extra = [
    "*(.text._R*4sha26sha256*)",
    "*libc.a:vdso.lo(.text .text.*)",
    "*libc.a:strcmp.lo(.text .text.*)",
    "*libc.a:_Exit.lo(.text .text.*)",
]
data_extra = [
    "*(.rodata._R*4sha26consts3K32)",
    "*libc.a:clock_gettime.lo(.rodata .rodata.*)",
    "*libc.a:fstatat.lo(.rodata .rodata.*)",
    "*libc.a:fstat.lo(.rodata .rodata.*)",
]

lines, placed = [], set()
for section in ran:
    p = pattern(section)
    if p not in placed:
        placed.add(p)
        lines.append("    " + p)
lines += ["    " + p for p in extra if p not in placed]

# The read-only data the refused request read: its sections in the order first read. A
# constant of this program's own crate is named by a hash of the crate's build (it changes with
# the code), so those lines hold for this build only; the others (the standard library's, the
# dependencies', the C library's, and every named table) hold until the toolchain or a
# dependency changes.
rodata = input_sections(".rodata")
rodata_starts = [s[0] for s in rodata]
read, data_lines, data_placed = [], [], set()
for line in open(mem_path):
    m = re.match(r"^ [LM] ([0-9a-f]+),", line)
    if not m:
        continue
    addr = int(m.group(1), 16)
    i = bisect.bisect_right(rodata_starts, addr) - 1
    if i >= 0 and addr < rodata[i][0] + rodata[i][1]:
        p = pattern(rodata[i], ".rodata")
        if p not in data_placed:
            data_placed.add(p)
            read.append(rodata[i])
            data_lines.append("    " + p)
data_lines += ["    " + p for p in data_extra if p not in data_placed]

with open(out_path, "w") as f:
    f.write("/* The code a CGI request runs, gathered at the start of the program's code, and the\n")
    f.write("   read-only data a refused request reads, at the start of the read-only data: written\n")
    f.write("   by bench/request-path.sh (see there), read by build.rs. Do not edit by hand. */\n")
    f.write("SECTIONS\n{\n  .text.request :\n  {\n")
    f.write("\n".join(lines) + "\n")
    f.write("  }\n}\nINSERT BEFORE .text;\n")
    # On a boundary of the 64 KiB the kernel maps around a fault: one or two faults for all.
    f.write("SECTIONS\n{\n  .rodata.request ALIGN(0x10000) :\n  {\n")
    f.write("\n".join(data_lines) + "\n")
    f.write("  }\n}\nINSERT BEFORE .rodata;\n")
print(f"request-path: {len(ran)} sections ran ({sum(s[1] for s in ran) // 1024} KiB), "
      f"{len(lines)} patterns in {out_path}; {len(read)} sections of read-only data read "
      f"({sum(s[1] for s in read) // 1024} KiB)")
PY

# Built again with the file: the gathered code's size, and whether every section that ran is
# in it (the map is kept in the target directory, to look up what is not). Checking, the first
# build is the one with the list as it is, and only the refused requests' sections count.
map="${CARGO_TARGET_DIR:-target}/request-path.map"
ran="$work/ran"
if [ "$check" = yes ]; then
    cp "$work/map" "$map"
    ran="$work/ran.refused"
else
    build "$map"
fi
python3 - "$map" "$ran" "$check" <<'PY'
import re, sys
ran = set(open(sys.argv[2]).read().split())
inside = total = 0
on, placed, pending = False, set(), None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^(\.text\S*)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)", line)
    if m and m.group(1) in (".text", ".text.request"):
        on = m.group(1) == ".text.request"
        total += int(m.group(3), 16)
        inside += int(m.group(3), 16) if on else 0
        continue
    m = re.match(r"^ (\.text\S+)", line)
    if m and on:
        placed.add(m.group(1))
missing = sorted(n for n in ran - placed if n != ".text")
print(f"request-path: {inside // 1024} KiB gathered at the start of {total // 1024} KiB of code; "
      f"{len(missing)} of the {len(ran)} sections that ran are not in it")
for name in missing[:20]:
    print("  not gathered:", name)
if sys.argv[3] == "yes" and missing:
    print("request-path: link/request-path.ld misses functions a refused request runs: "
          "run bench/request-path.sh and commit the file")
    sys.exit(1)
PY

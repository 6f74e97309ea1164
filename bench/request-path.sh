#!/usr/bin/env bash
# Writes link/request-path.ld, the order in which the static binary's code is laid out: the
# functions a CGI request runs up to its answer first, together, then the rest. A CGI process
# maps its code page by page as it first runs it (the 64 KiB around each page it faults on),
# so code scattered over the binary's 1.8 MB costs a fault and a mapping per stretch touched,
# at every request; gathered, the same code takes a few (docs/performance.md). build.rs hands
# the file to the linker for the release build of the static binary.
#
# It builds that binary with the linker's map, runs requests under callgrind (valgrind) with a
# file store: refused requests (the path scrapers take) answered as text, HTML and JSON from
# the memory of refusals, one refused by the store, and an admitted one (the echo provider: no
# network), and looks up in the map the section (one per function) of every instruction they
# ran, and runs refused requests under valgrind's lackey to find the read-only data they read,
# gathered likewise at the start of the read-only data. What a refusal from the memory runs
# and reads comes first: most refusals are answered so, and the fewer 64 KiB stretches their
# code and data span, the fewer faults each costs. Rerun it when the request path's
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
# The data directory where deploy.sh makes it, beside the configurations: refused requests
# repeated are answered from the answers kept there.
mkdir "$work/ratelimit"
# Sweeps drawn for (every request draws) but next to never run (one request in 100 would run
# one): what is laid out is what every request runs.
no_sweep() {
    sed 's/"on_error": "allow"/"on_error": "allow", "sweep_one_in": 1000000000/'
}
refusing_config "$work/ratelimit" 30 '{"kind": "echo"}' | no_sweep >"$work/echo.json"
refusing_config "$work/ratelimit" 30 | no_sweep >"$work/preset.json"

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
# The journal counts by the hour: a request in a new hour adds new keys to a new file, which
# the refusals profiled below, each counted by the hour of the one before, must not do. Their
# four minutes stay within one hour.
to_hour=$((3600 - $(date -u +%s) % 3600))
if [ "$to_hour" -lt 240 ]; then
    echo "request-path: waiting ${to_hour}s for the next hour, so that every profile runs within one" >&2
    sleep "$((to_hour + 1))"
fi
started=$(($(date -u +%s) / 3600))
profile admitted echo 'text/plain' 200
for _ in $(seq 29); do
    cgi_request "$work/echo.json" text/plain "$binary" >/dev/null
done
# The path scrapers take first: refused from the data directory's memory of refusals, as text,
# HTML and JSON, each profiled straight after a refusal by the store (made natively, and
# remembered for a second from then, the memory of the one before having run out).
remembered() {
    sleep 1.1
    cgi_request "$work/preset.json" text/plain "$binary" >/dev/null 2>&1
    profile "$@"
}
remembered refused-text preset 'text/plain' 429
# The path scrapers take before all: the same request again, given the answer kept for it
# (`gateway::replay`). Valgrind adds variables of its own to the program's environment, so the
# refusal from the memory that keeps the answer runs under valgrind too; kept for the memory's
# second and its whole second of waits, all three requests run from the start of a second.
# Given the kept answer, the profiled request writes nothing to the answers file (from the
# memory it would keep its answer again, and one decided by the store fails the check below).
replayed() {
    local into kept
    for _ in 1 2 3 4 5; do
        sleep 1.1
        into=$((10#$(date +%N) / 1000000))
        sleep "$(printf '0.%03d' $((999 - into)))"
        sleep 0.01
        cgi_request "$work/preset.json" text/plain "$binary" >/dev/null 2>&1
        cgi_request "$work/preset.json" text/plain valgrind --tool=callgrind \
            --callgrind-out-file=/dev/null "$binary" >/dev/null 2>&1
        kept=$(stat -c %y "$work/ratelimit/answers")
        profile replayed preset 'text/plain' 429
        [ "$(stat -c %y "$work/ratelimit/answers")" != "$kept" ] || return 0
    done
    echo "request-path: no request was given a kept answer in 5 tries" >&2
    exit 1
}
replayed
remembered refused-html preset 'text/html,application/xhtml+xml,*/*;q=0.8' 429
remembered refused-json preset 'application/json' 429
# Once the memory has run out, the store refuses again, and the first request of a new second
# moves the journal's spool of the seconds before (once a second, whatever the traffic).
sleep 1.2
profile refused-store preset 'text/plain' 429
# The read-only data refused requests read, address by address (valgrind's lackey): from the
# memory, then from the store, on a site as bench/starts.sh measures it (the preset's first
# request admitted and its call failed on the discard port, every later one refused).
mkdir "$work/starter"
refusing_config "$work/starter" 1 | no_sweep >"$work/starter.json"
cgi_request "$work/starter.json" text/plain "$binary" >/dev/null 2>&1
read_data() {
    cgi_request "$work/starter.json" text/plain valgrind --tool=lackey --trace-mem=yes \
        --log-file="$work/$1.mem" "$binary" >/dev/null 2>&1
}
sleep 1.1
cgi_request "$work/starter.json" text/plain "$binary" >/dev/null 2>&1
read_data refused-remembered
sleep 1.2
read_data refused-store
[ "$(($(date -u +%s) / 3600))" = "$started" ] || {
    echo "request-path: the profiles ran over an hour's turn; run it again" >&2
    exit 1
}

out=link/request-path.ld
[ "$check" = no ] || out="$work/request-path.ld"
python3 - "$work/map" "$out" "$work/ran" "$work/refused-remembered.mem" "$work/refused-store.mem" \
    "$work/replayed.cg" "$work/refused-text.cg" "$work/refused-html.cg" "$work/refused-json.cg" \
    "$work/refused-store.cg" "$work/admitted.cg" <<'PY'
import bisect, re, sys

map_path, out_path, ran_path = sys.argv[1:4]
mem_paths = sys.argv[4:6]
profiles = sys.argv[6:]

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

# Every section that ran: the refused requests' first, the kept answer's before those from the
# memory, those before the store's, then the admitted request's (the last profile).
ran, seen = [], set()
for n, path in enumerate(profiles):
    group, here = [], set()
    for line in open(path):
        m = re.match(r"^(?:calls=\d+ )?0x([0-9a-f]+)", line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < sections[i][0] + sections[i][1]:
            here.add(i)
            if i not in seen:
                seen.add(i)
                group.append(sections[i])
    # The store's decision runs in the store's refusal, and not in those from the memory (a
    # profile started too late after its refusal by the store would have asked the store).
    decided = any("16decide_own_first" in sections[i][2] for i in here)
    if (n < 4 and decided) or (n == 4 and not decided):
        sys.exit(f"request-path: the {path} request was {'' if decided else 'not '}decided by the store")
    # The first profile, the kept answer's, never reads the configuration.
    if n == 0 and any("13raw_from_json" in sections[i][2] for i in here):
        sys.exit(f"request-path: the {path} request was not given a kept answer")
    # Each group in the order of its patterns, so that the file changes only where the code
    # it names does; the groups in the order of the profiles.
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

# What every request runs natively comes first, the little valgrind does not see with it.
lines, placed = ["    " + p for p in extra], set(extra)
for section in ran:
    p = pattern(section)
    if p not in placed:
        placed.add(p)
        lines.append("    " + p)

# The read-only data refused requests read: its sections in the order first read. A
# constant of this program's own crate is named by a hash of the crate's build (it changes with
# the code), so those lines hold for this build only; the others (the standard library's, the
# dependencies', the C library's, and every named table) hold until the toolchain or a
# dependency changes.
# The map gives a mergeable section (`.rodata.cst8`, `.rodata.str1.1`) merged into an earlier
# one the address of what it was merged into, where another constant may lie: an address is
# looked up among the other sections first, so that such a constant is not taken for the
# merged section (which it then never gathered, one build in two).
rodata = input_sections(".rodata")
mergeable = lambda s: re.match(r"\.rodata\.(cst|str)", s[2]) is not None
lookups = [[s for s in rodata if not mergeable(s)], [s for s in rodata if mergeable(s)]]
lookups = [(group, [s[0] for s in group]) for group in lookups]

def section_at(addr):
    for group, starts_at in lookups:
        i = bisect.bisect_right(starts_at, addr) - 1
        if i >= 0 and addr < group[i][0] + group[i][1]:
            return group[i]
    return None

# The statics refused requests read or write (the C library's, std's, this program's; the
# arena aside), gathered after .got, where .data's cold tables and .bss's cold buffers spread
# them over three pages: those of .bss become zeros in the file. A section named only `.data`
# or `.bss` (not the C library's) is left where it is: its pattern would take every object's.
rw = [s for s in input_sections(".data") if not s[2].startswith(".data.rel.ro")]
rw += [s for s in input_sections(".bss") if "5arena5ARENA" not in s[2]]
# The C library's common symbols (`__libc`, `__hwcap`, `__sysinfo`), listed apart.
started = False
for line in open(map_path, errors="replace"):
    started = started or line.startswith("Linker script and memory map")
    m = re.match(r"^ COMMON\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", line)
    if started and m and int(m.group(2), 16):
        rw.append((int(m.group(1), 16), int(m.group(2), 16), "COMMON", m.group(3)))
rw.sort()
rw_starts = [s[0] for s in rw]

# One pass over the accesses for both: the read-only data read (loads), the statics read or
# written (stores too).
read, data_lines, data_placed = [], [], set()
rw_lines, rw_placed = [], set()
for line in (line for path in mem_paths for line in open(path)):
    m = re.match(r"^ ([LSM]) ([0-9a-f]+),", line)
    if not m:
        continue
    addr = int(m.group(2), 16)
    section = section_at(addr) if m.group(1) != "S" else None
    if section:
        p = pattern(section, ".rodata")
        if p not in data_placed:
            data_placed.add(p)
            read.append(section)
            data_lines.append("    " + p)
        continue
    i = bisect.bisect_right(rw_starts, addr) - 1
    if i < 0 or addr >= rw[i][0] + rw[i][1]:
        continue
    kind = ".bss" if rw[i][2].startswith(".bss") else ".data"
    p = pattern(rw[i], kind)
    if rw[i][2] == "COMMON":
        lib = re.search(r"(?:^|/)libc\.a\((.+)\)$", rw[i][3])
        p = f"*libc.a:{lib.group(1)}(COMMON)" if lib else "*(COMMON)"
    if p in (f"*({kind})", f"*({kind}.*)", "*(COMMON)") or p in rw_placed:
        continue
    rw_placed.add(p)
    rw_lines.append("    " + p)
data_lines += ["    " + p for p in data_extra if p not in data_placed]
# The merged string constants come last: one section of some 64 KiB, which no order of its
# own can split, after the small sections, so that those share the first 64 KiB.
merged = [line for line in data_lines if ".rodata.str" in line]
data_lines = [line for line in data_lines if line not in merged] + merged

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
    # On the page of the thread-local storage's image and the tables after it (.got), which a
    # request reads anyway: the read-only data padded to a page's end, so that the writable
    # data starts on a page (its offset in the page otherwise follows the code's size); and
    # .data's end padded too, so that .bss starts on a page of its own and the kernel has no
    # part of a page to clear at exec (it would write, and so fault in, .data's last page).
    # With build.rs's `-z norelro`, nothing pads .got's end. One page of statics a request.
    f.write("SECTIONS\n{\n  .rodata.end :\n  {\n    BYTE(0)\n    . = ALIGN(0x1000);\n")
    f.write("  }\n}\nINSERT BEFORE .tdata;\n")
    f.write("SECTIONS\n{\n  .data.request :\n  {\n")
    f.write("\n".join(rw_lines) + "\n")
    f.write("  }\n}\nINSERT AFTER .got;\n")
    f.write("SECTIONS\n{\n  .data.end :\n  {\n    BYTE(0)\n    . = ALIGN(0x1000);\n")
    f.write("  }\n}\nINSERT AFTER .data;\n")
print(f"request-path: {len(ran)} sections ran ({sum(s[1] for s in ran) // 1024} KiB), "
      f"{len(lines)} patterns in {out_path}; {len(read)} sections of read-only data read "
      f"({sum(s[1] for s in read) // 1024} KiB); {len(rw_lines)} statics written or read")
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

# The thread-local storage: musl keeps a static program's in a block of its own (in .bss) when
# it fits, and otherwise maps a page for it at every start, a system call and a page fault on
# every request. It fits while its size, rounded to its alignment, and the alignment come to
# at most 120 bytes (musl 1.2's static_init_tls: 8 + a thread's 200 + 128 bytes of room,
# against 16 + 200 + size + alignment). std's channels alone took 17 bytes of it.
read -r tls_size tls_align < <(readelf -lW "$binary" | awk '$1 == "TLS" {print strtonum($6), strtonum($8)}')
tls_align=$((tls_align < 8 ? 8 : tls_align))
tls_rounded=$(((tls_size + tls_align - 1) / tls_align * tls_align))
echo "request-path: $tls_size bytes of thread-local storage, aligned to $tls_align ($((tls_rounded + tls_align)) of 120)"
if [ $((tls_rounded + tls_align)) -gt 120 ]; then
    echo "request-path: the thread-local storage no longer fits musl's static block: every" \
        "start now maps a page for it; look for a new thread_local! or a std type that keeps" \
        "one (channels), with readelf -sW on a build that keeps its symbols" >&2
    exit 1
fi

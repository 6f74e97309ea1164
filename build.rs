//! Build script: reads what a request needs of each provider preset ahead of time, and lays
//! out the static release binary's code with the request path first.
//!
//! Each preset's description (`src/provider/presets/*.json`) is the one place its facts are
//! written. A CGI request given only a preset's token builds the preset at its first paid
//! call, but needs its rates and timeouts at once; reading them from the JSON text at every
//! start cost about a tenth of a refused request's instructions, so they are read here into
//! `OUT_DIR/preset_needs.rs` (included by `src/provider/presets.rs`).
//!
//! For the release build of `x86_64-unknown-linux-musl` (the binary owners upload), the linker
//! gets `link/request-path.ld`, which gathers the functions a CGI request runs at the start of
//! the code (written by `bench/request-path.sh`; the reason and the figures are in
//! docs/performance.md). Every other build is linked as usual.

use std::env;
use std::fmt::Write as _;
use std::path::Path;

/// The presets, by name and file (as `src/provider/presets.rs` includes them).
const PRESETS: [(&str, &str); 5] = [
    ("realdebrid", "realdebrid.json"),
    ("alldebrid", "alldebrid.json"),
    ("premiumize", "premiumize.json"),
    ("debridlink", "debridlink.json"),
    ("torbox", "torbox.json"),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    preset_needs();
    link_script();
    build_id();
}

/// Names this build for what it keeps between requests (`RESOLVE_BUILD`, read by
/// `src/gateway/replay.rs`): a checksum of the sources, the manifest and the lock file, with
/// the profile and target. A kept answer is only given by the same code that kept it.
fn build_id() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&dir);
    let mut files = Vec::new();
    let mut dirs = vec![root.join("src")];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("the sources' directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files.extend(["Cargo.toml", "Cargo.lock", "build.rs"].map(|f| root.join(f)));
    let mut sum: u64 = 0xcbf2_9ce4_8422_2325;
    let mut add = |bytes: &[u8]| {
        for b in bytes.iter().chain(&[0xff]) {
            sum = (sum ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for f in &files {
        add(f
            .strip_prefix(root)
            .unwrap_or(f)
            .as_os_str()
            .as_encoded_bytes());
        add(&std::fs::read(f).unwrap_or_default());
    }
    for var in ["PROFILE", "TARGET"] {
        add(env::var(var).unwrap_or_default().as_bytes());
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!(
        "cargo:rustc-env=RESOLVE_BUILD={}-{sum:016x}",
        env!("CARGO_PKG_VERSION")
    );
}

/// Writes `preset_needs.rs`: for each preset, its `rate_limits` (name, limit, window, steps),
/// how many steps it has, and its timeouts, as Rust constants.
fn preset_needs() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let mut out = String::from(
        "// Written by build.rs from src/provider/presets/*.json. Do not edit.\n\
         /// What a request needs of each preset before its first paid call.\n\
         pub const NEEDS: [(&str, Needs); 5] = [\n",
    );
    for (name, file) in PRESETS {
        let path = Path::new(&dir).join("src/provider/presets").join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).expect("a preset's description");
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let steps = v["steps"].as_array().map_or(0, Vec::len);
        let mut rates = String::new();
        for r in v["rate_limits"].as_array().into_iter().flatten() {
            let fields = r.as_object().expect("a rate is an object");
            for key in fields.keys() {
                assert!(
                    ["name", "limit", "window_secs", "steps"].contains(&key.as_str()),
                    "{}: a preset's rate field {key:?} is not carried by build.rs",
                    path.display()
                );
            }
            let counted = match r["steps"].as_array() {
                None => "None".to_owned(),
                Some(list) => {
                    let numbers: Vec<String> = list
                        .iter()
                        .map(|n| n.as_u64().expect("a step number").to_string())
                        .collect();
                    format!("Some(&[{}])", numbers.join(", "))
                }
            };
            let _ = write!(
                rates,
                "Rate {{ name: {:?}, limit: {}, window_secs: {}, steps: {counted} }}, ",
                r["name"].as_str().expect("a rate's name"),
                r["limit"].as_u64().expect("a rate's limit"),
                r["window_secs"].as_u64().expect("a rate's window"),
            );
        }
        let ms = |key: &str| match v[key].as_u64() {
            Some(n) => format!("Some({n})"),
            None => "None".to_owned(),
        };
        let _ = writeln!(
            out,
            "    ({name:?}, Needs {{ rate_limits: &[{rates}], steps: {steps}, \
             connect_timeout_ms: {}, timeout_ms: {}, deadline_ms: {} }}),",
            ms("connect_timeout_ms"),
            ms("timeout_ms"),
            ms("deadline_ms"),
        );
    }
    out.push_str("];\n");
    let target =
        Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("preset_needs.rs");
    std::fs::write(&target, out).expect("OUT_DIR is writable");
}

/// For the static release build, hands the linker `link/request-path.ld` and `link/arena.ld`.
fn link_script() {
    println!("cargo:rerun-if-changed=link/request-path.ld");
    let target = env::var("TARGET").unwrap_or_default();
    let profile = env::var("PROFILE").unwrap_or_default();
    if target != "x86_64-unknown-linux-musl" || profile != "release" {
        return;
    }
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = Path::new(&dir).join("link").join("request-path.ld");
    // An absolute path, whatever directory the linker runs in; two arguments, so that no
    // character of the path needs escaping.
    println!("cargo:rustc-link-arg-bin=resolve=-T");
    println!("cargo:rustc-link-arg-bin=resolve={}", script.display());
    println!("cargo:rerun-if-changed=link/arena.ld");
    let arena = Path::new(&dir).join("link").join("arena.ld");
    println!("cargo:rustc-link-arg-bin=resolve=-T");
    println!("cargo:rustc-link-arg-bin=resolve={}", arena.display());
    // No region made read-only after relocation: a static binary has no loader to make it so
    // (musl's start-up does not), and the padding that would end it on a page boundary put
    // the thread-local storage's image on a page of its own, one more page every request
    // touches (docs/performance.md).
    println!("cargo:rustc-link-arg-bin=resolve=-Wl,-z,norelro");
    // bench/request-path.sh asks for the linker's map, to count what the file gathered.
    println!("cargo:rerun-if-env-changed=RESOLVE_LINK_MAP");
    if let Some(map) = env::var_os("RESOLVE_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bin=resolve=-Wl,-Map={}",
            map.to_string_lossy()
        );
    }
}

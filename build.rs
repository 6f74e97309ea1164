//! Build script: lays out the static release binary's code with the request path first.
//!
//! For the release build of `x86_64-unknown-linux-musl` (the binary owners upload), the linker
//! gets `link/request-path.ld`, which gathers the functions a CGI request runs at the start of
//! the code (written by `bench/request-path.sh`; the reason and the figures are in
//! docs/performance.md). Every other build is linked as usual.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
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
    // bench/request-path.sh asks for the linker's map, to count what the file gathered.
    println!("cargo:rerun-if-env-changed=RESOLVE_LINK_MAP");
    if let Some(map) = env::var_os("RESOLVE_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bin=resolve=-Wl,-Map={}",
            map.to_string_lossy()
        );
    }
}

//! The shape of `src/`, checked: every file says its role on a `//!` line, no file runs past
//! about 600 lines without saying why at its top, the pure core imports nothing from the rest
//! of the program, no two files import each other (directly or round a loop), and no file
//! imports from a layer above its own (the order written in `src/lib.rs`, kept in [`LAYERS`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Longest a file may be without a reason written at its top.
const MAX_LINES: usize = 640;
/// How a file says why it is longer: a `//!` line starting with these words.
const LONG_BECAUSE: &str = "//! Long because";

/// The layers, lowest first, each with the modules it holds (a module holds its submodules;
/// the longest name that fits decides). A file may import from its own layer and those below,
/// never from one above: a request goes down the layers and back out without climbing back.
/// The same order is written in `src/lib.rs`.
const LAYERS: &[(&str, &[&str])] = &[
    ("support", &["support"]),
    ("net", &["net"]),
    ("core", &["core"]),
    ("edges", &["http", "provider", "store"]),
    ("config", &["config"]),
    ("service", &["app"]),
    ("usage", &["usage"]),
    ("admin", &["admin"]),
    ("commands and gateways", &["command", "gateway", "site"]),
    ("main", &["main", "lib"]),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Module path of a file: `src/store/file/lock.rs` is `store::file::lock`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let rel = rel.with_extension("");
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("::")
}

/// The code of a file without its unit tests (a `#[cfg(test)] mod tests` block or file).
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// Every `crate::a::b::c` path in `code`, as its segments.
fn crate_paths(code: &str) -> Vec<Vec<&str>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at + "crate::".len()..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        let path: Vec<&str> = tail[..end].split("::").filter(|s| !s.is_empty()).collect();
        if !path.is_empty() {
            out.push(path);
        }
        rest = &tail[end..];
    }
    out
}

/// Every `super::a::b` path in the code of the file of module `module`, as a path from the
/// crate's root: in `store::file::lock`, `super::record` is `store::file::record`.
fn super_paths(module: &str, code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        // Not the tail of a longer word or of a `crate::`/`self::` path.
        let before = rest[..at].chars().next_back();
        let mut tail = &rest[at..];
        let mut base: Vec<&str> = module.split("::").collect();
        while let Some(t) = tail.strip_prefix("super::") {
            base.pop();
            tail = t;
        }
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            base.extend(tail[..end].split("::").filter(|s| !s.is_empty()));
            if !base.is_empty() {
                out.push(base.join("::"));
            }
        }
        rest = &tail[end..];
    }
    out
}

/// The layer of a module: its index in [`LAYERS`], by the longest module name that fits.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, (_, modules))| modules.iter().map(move |m| (i, *m)))
        .filter(|(_, m)| module == *m || module.starts_with(&format!("{m}::")))
        .max_by_key(|(_, m)| m.len())
        .map(|(i, _)| i)
}

/// Every import of a module in a layer above the importer's, as `from -> to (layer)`.
fn upward_imports(imports: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<String> {
    let mut out = Vec::new();
    for (module, deps) in imports {
        let Some(own) = layer_of(module) else {
            continue;
        };
        for dep in deps {
            if let Some(theirs) = layer_of(dep).filter(|l| *l > own) {
                out.push(format!(
                    "{module} ({}) -> {dep} ({})",
                    LAYERS[own].0, LAYERS[theirs].0
                ));
            }
        }
    }
    out
}

/// Submodules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_children(code: &str) -> Vec<&str> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
        .filter(|name| *name != "tests")
        .collect()
}

struct Tree {
    /// Module path to its source text.
    files: BTreeMap<String, String>,
}

impl Tree {
    fn read() -> Tree {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        let files = paths
            .iter()
            .map(|p| {
                let text = fs::read_to_string(p).expect("readable source");
                (module_of(&src, p), text)
            })
            .collect();
        Tree { files }
    }

    /// The modules each file's code (tests left out) imports from the crate: the longest
    /// prefix of each `crate::` or `super::` path that is a file, and the submodules it names
    /// by their own name (`use lock::...`).
    fn imports(&self) -> BTreeMap<&str, BTreeSet<&str>> {
        let mut out = BTreeMap::new();
        for (module, text) in &self.files {
            if module == "lib" || module == "main" || module.ends_with("::tests") {
                continue;
            }
            let code = without_tests(text);
            let mut deps = BTreeSet::new();
            let mut named: Vec<String> = crate_paths(code)
                .into_iter()
                .map(|segments| segments.join("::"))
                .collect();
            named.extend(super_paths(module, code));
            for child in declared_children(code) {
                if code.contains(&format!("{child}::")) {
                    named.push(format!("{module}::{child}"));
                }
            }
            for path in named {
                let segments: Vec<&str> = path.split("::").collect();
                if let Some(hit) = (1..=segments.len())
                    .rev()
                    .map(|k| segments[..k].join("::"))
                    .find(|candidate| self.files.contains_key(candidate))
                    && hit != *module
                {
                    let (key, _) = self.files.get_key_value(&hit).expect("present");
                    deps.insert(key.as_str());
                }
            }
            out.insert(module.as_str(), deps);
        }
        out
    }
}

/// Fails with `what` and the list when `found` holds anything.
fn none<T: std::fmt::Debug>(found: &[T], what: &str) {
    assert!(found.is_empty(), "{} {what}: {found:#?}", found.len());
}

#[test]
fn every_file_says_its_role() {
    let tree = Tree::read();
    let silent: Vec<&String> = tree
        .files
        .iter()
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(m, _)| m)
        .collect();
    none(&silent, "files without a //! line first");
}

#[test]
fn long_files_say_why() {
    let tree = Tree::read();
    let long: Vec<String> = tree
        .files
        .iter()
        .filter(|(_, text)| {
            text.lines().count() > MAX_LINES
                && !text
                    .lines()
                    .take_while(|l| l.starts_with("//!"))
                    .any(|l| l.starts_with(LONG_BECAUSE))
        })
        .map(|(m, text)| format!("{m} ({} lines)", text.lines().count()))
        .collect();
    none(
        &long,
        &format!("files over {MAX_LINES} lines without `{LONG_BECAUSE}` at the top"),
    );
}

#[test]
fn the_core_imports_nothing_from_the_edges() {
    let tree = Tree::read();
    let imports = tree.imports();
    assert!(
        imports.contains_key("core::limiter"),
        "the core is where it should be"
    );
    let outside: Vec<String> = imports
        .iter()
        .filter(|(m, _)| **m == "core" || m.starts_with("core::"))
        .flat_map(|(m, deps)| {
            deps.iter()
                .filter(|d| !(**d == "core" || d.starts_with("core::")))
                .map(move |d| format!("{m} -> {d}"))
        })
        .collect();
    none(&outside, "imports from outside the core");
    // Nor does it do I/O itself.
    for (module, text) in &tree.files {
        if module.starts_with("core::") && module != "core::clock" {
            for io in ["std::fs", "std::net", "std::io", "std::process", "std::env"] {
                assert!(
                    !without_tests(text).contains(io),
                    "{module} uses {io}: the core does no I/O"
                );
            }
        }
    }
}

#[test]
fn no_two_files_import_each_other() {
    let tree = Tree::read();
    let imports = tree.imports();
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(m) = todo.pop() {
            for d in imports.get(m).into_iter().flatten() {
                if seen.insert(*d) {
                    todo.push(d);
                }
            }
        }
        seen
    };
    let mut cycles = Vec::new();
    for (m, deps) in &imports {
        for d in deps {
            if reach(d).contains(m) {
                cycles.push(format!("{m} -> {d} -> ... -> {m}"));
            }
        }
    }
    none(&cycles, "import cycles");
}

#[test]
fn every_module_has_a_layer() {
    let modules: Vec<String> = Tree::read().files.into_keys().collect();
    let lost: Vec<&String> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    none(
        &lost,
        "modules in no layer (add them to LAYERS and to the order in src/lib.rs)",
    );
}

#[test]
fn no_file_imports_from_a_layer_above_its_own() {
    let tree = Tree::read();
    let upward = upward_imports(&tree.imports());
    none(&upward, "imports from a layer above");
}

#[test]
fn the_order_is_the_one_lib_rs_writes() {
    let tree = Tree::read();
    let lib = &tree.files["lib"];
    let mut at = 0;
    for (name, _) in LAYERS {
        let found = lib[at..].find(&format!("{name}:")).unwrap_or_else(|| {
            panic!("src/lib.rs names the layer `{name}:` after the ones before it")
        });
        at += found;
    }
    // No path attribute takes a file from another folder into a module.
    for (module, text) in &tree.files {
        for line in text
            .lines()
            .filter(|l| l.trim_start().starts_with("#[path"))
        {
            assert!(
                !line.contains("..") && !line.contains("= \"/"),
                "{module} takes a file from another folder: {line}"
            );
        }
    }
}

#[test]
fn the_memory_store_is_only_for_tests() {
    // The program never carries it: it is compiled for the unit tests, and for the
    // integration tests, benchmarks and fuzz targets through a feature no default turns on.
    let tree = Tree::read();
    assert!(
        tree.files["store"]
            .contains("#[cfg(any(test, feature = \"memory-store\"))]\npub mod memory;"),
        "src/store.rs declares the memory store for tests only"
    );
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("default = ["),
        "no feature is on by default"
    );
    // Code of the program that used it would not build: `cargo build` compiles without it.
}

#[test]
fn the_checks_see_what_they_check() {
    // The import reader finds both kinds of import, so the tests above can fail.
    let code = "use crate::store::Store;\nmod lock;\nuse lock::Lock;\nfn f() { crate::core::clock::now(); }\n#[cfg(test)]\nmod tests { use crate::app::App; }";
    let code = without_tests(code);
    let paths: Vec<String> = crate_paths(code).iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["store::Store", "core::clock::now"]);
    assert_eq!(declared_children(code), ["lock"]);
    assert_eq!(
        super_paths(
            "store::file::lock",
            "use super::record::Slot;\nuse super::super::Check;"
        ),
        ["store::file::record::Slot", "store::Check"]
    );
    // An import upwards is seen, one downwards or within a layer is not.
    let imports = BTreeMap::from([
        ("config::rules", BTreeSet::from(["core::rule", "app"])),
        ("http::render", BTreeSet::from(["store", "net::url"])),
    ]);
    assert_eq!(
        upward_imports(&imports),
        ["config::rules (config) -> app (service)"]
    );
}

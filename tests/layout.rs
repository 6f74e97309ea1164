//! The shape of `src/`, checked: every file says its role on a `//!` line, no file runs past
//! about 600 lines without saying why at its top, the pure core imports nothing from the rest
//! of the program, no two files import each other (directly or round a loop), and no file
//! imports from a layer above its own (the order written in `src/lib.rs`, kept in [`LAYERS`]),
//! unit tests included; and the file tree in docs/development.md names every file of `src/`.

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
    ("edges", &["http", "provider", "store", "challenge"]),
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

/// The code of a file without its unit tests: a `#[cfg(test)] mod tests;` line (the tests in
/// their own file) or a `#[cfg(test)] mod tests { ... }` block, and nothing else: code after
/// either is still read.
fn without_tests(text: &str) -> String {
    const MARK: &str = "#[cfg(test)]\nmod tests";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + MARK.len()..];
        if let Some(after) = tail.strip_prefix(';') {
            rest = after;
        } else if let Some(open) = tail.find('{').filter(|o| tail[..*o].trim().is_empty()) {
            // The block, to its matching brace.
            let mut depth = 0usize;
            let mut end = tail.len();
            for (i, c) in tail[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &tail[end..];
        } else {
            out.push_str(MARK);
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// The paths `text` names after a `prefix::`: one path, or each of a group, `a::{b, c::{d,
/// e}}` giving `a::b`, `a::c::d`, `a::c::e` (`self` in a group is the group's own path).
/// Returns them and how many bytes of `text` they took.
fn paths_after(text: &str) -> (Vec<String>, usize) {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let end = text.find(|c: char| !word(c)).unwrap_or(text.len());
    let head = &text[..end];
    if (head.is_empty() || head.ends_with("::")) && text[end..].starts_with('{') {
        let base = head.trim_end_matches("::");
        let mut out = Vec::new();
        let mut at = end + 1;
        loop {
            let rest = &text[at..];
            let skip = rest.len() - rest.trim_start_matches([' ', '\n', ',', '\t']).len();
            at += skip;
            let rest = &text[at..];
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix('}') {
                at = text.len() - after.len();
                break;
            }
            let (inner, used) = paths_after(rest);
            if used == 0 {
                at += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            }
            for p in inner {
                let p = if p == "self" { String::new() } else { p };
                out.push(
                    [base, p.as_str()]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join("::"),
                );
            }
            at += used;
        }
        (out, at)
    } else {
        let path = head.trim_end_matches("::");
        let paths = if path.is_empty() {
            vec![]
        } else {
            vec![path.to_string()]
        };
        (paths, end)
    }
}

/// Every `crate::a::b::c` path in `code`; a group (`crate::{a, b::c}`) gives each of its
/// paths.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at + "crate::".len()..];
        let (paths, used) = paths_after(tail);
        out.extend(paths.into_iter().filter(|p| !p.is_empty()));
        rest = &tail[used..];
    }
    out
}

/// Every `super::a::b` path in the code of the file of module `module`, as a path from the
/// crate's root: in `store::file::lock`, `super::record` is `store::file::record`; a group
/// (`super::{a, b}`) gives each of its paths.
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
        let (paths, used) = paths_after(tail);
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            for path in paths {
                let full: Vec<&str> = base
                    .iter()
                    .copied()
                    .chain(path.split("::").filter(|s| !s.is_empty()))
                    .collect();
                if !full.is_empty() {
                    out.push(full.join("::"));
                }
            }
        }
        rest = &tail[used..];
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
        self.imports_of(false)
    }

    /// The same with the unit tests read too (their files and blocks): what the layers
    /// promise holds for tests as well, as a test imports the layers its module may.
    fn imports_with_tests(&self) -> BTreeMap<&str, BTreeSet<&str>> {
        self.imports_of(true)
    }

    fn imports_of(&self, tests: bool) -> BTreeMap<&str, BTreeSet<&str>> {
        let mut out = BTreeMap::new();
        for (module, text) in &self.files {
            if module == "lib" || module == "main" || (!tests && module.ends_with("::tests")) {
                continue;
            }
            let code = if tests {
                text.clone()
            } else {
                without_tests(text)
            };
            let code = code.as_str();
            let mut deps = BTreeSet::new();
            let mut named: Vec<String> = crate_paths(code);
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
fn no_unit_test_imports_from_a_layer_above_its_module() {
    let tree = Tree::read();
    let upward = upward_imports(&tree.imports_with_tests());
    none(
        &upward,
        "imports from a layer above, in unit tests (move the test to that layer or to tests/)",
    );
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
    let code = "use crate::store::Store;\nmod lock;\nuse lock::Lock;\nfn f() { crate::core::clock::now(); }\n#[cfg(test)]\nmod tests { use crate::app::App; fn g() {} }\nfn h() { crate::net::url::parse(); }";
    let code = without_tests(code);
    let paths = crate_paths(&code);
    // Code after the tests' block is read; the block is not.
    assert_eq!(
        paths,
        ["store::Store", "core::clock::now", "net::url::parse"]
    );
    assert_eq!(declared_children(&code), ["lock"]);
    // Nor does a `mod tests;` line hide what follows it.
    let code =
        without_tests("use crate::a::B;\n#[cfg(test)]\nmod tests;\nuse crate::usage::Stats;");
    assert_eq!(crate_paths(&code), ["a::B", "usage::Stats"]);
    // Grouped imports give each path, nested groups and `self` included.
    assert_eq!(
        crate_paths("use crate::{command::cli, store::{self, file::FileStore}, usage};"),
        ["command::cli", "store", "store::file::FileStore", "usage"]
    );
    assert_eq!(
        crate_paths("use crate::app::{\n    controls::Controls,\n    usage::Events,\n};"),
        ["app::controls::Controls", "app::usage::Events"]
    );
    assert_eq!(
        super_paths(
            "store::file::lock",
            "use super::record::Slot;\nuse super::super::Check;\nuse super::{lock, made::Mark};"
        ),
        [
            "store::file::record::Slot",
            "store::Check",
            "store::file::lock",
            "store::file::made::Mark"
        ]
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

/// The files docs/development.md's tree names under `src/`, and the names it gives that are
/// not there. An entry is a line indented two spaces a level with its file name first
/// (`cli.rs`, or several: `text.rs, json.rs`), under the entry a level above (`support.rs`
/// holds `support/`); the rest of the line and the lines indented further describe it, where
/// `journal/line.rs` names a file beside the entry's own folder (`core/journal/line.rs`) and
/// `file/ record, lock (...), made` names `file/record.rs`, `file/lock.rs` and `file/made.rs`
/// (in such a list a piece of more than one word, or a file of another kind, is prose).
fn tree_names(doc: &str) -> (BTreeSet<String>, Vec<String>) {
    let after = doc
        .split("<!-- tree: keep in step with src/ -->")
        .nth(1)
        .expect("docs/development.md marks its tree");
    // The fenced block that starts with `src/`.
    let block = after
        .split("```")
        .skip(1)
        .step_by(2)
        .find(|b| b.trim_start().starts_with("src/"))
        .expect("a block after the mark starts with src/");
    let mut found = Found::default();
    // The folder of each level's entries; the entry described now (its folder) and its text.
    let mut dirs: Vec<String> = vec!["src".into()];
    let mut described: Option<String> = None;
    let mut text = String::new();
    for line in block.trim_start().lines().skip(1) {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if body.is_empty() {
            continue;
        }
        if indent == 0 {
            break; // past src/: tests/, benches/, public/...
        }
        let field = body.split("  ").next().unwrap_or_default();
        let files: Vec<&str> = field.split(", ").map(str::trim).collect();
        let is_entry = indent % 2 == 0
            && indent <= 8
            && files
                .iter()
                .all(|f| f.strip_suffix(".rs").is_some_and(ident));
        if !is_entry {
            text.push(' ');
            text.push_str(body);
            continue;
        }
        if let Some(dir) = described.take() {
            found.described(&dir, &text);
        }
        let level = indent / 2;
        dirs.truncate(level);
        let dir = dirs.last().cloned().expect("a level under src/");
        for file in &files {
            found.name(format!("{dir}/{file}"));
        }
        dirs.push(format!("{dir}/{}", files[0].trim_end_matches(".rs")));
        described = Some(dir);
        text = body[field.len()..].to_string();
    }
    if let Some(dir) = described {
        found.described(&dir, &text);
    }
    (found.named, found.missing)
}

/// A name of the module kind: lowercase letters, digits and `_`.
fn ident(w: &str) -> bool {
    !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// What the tree names, and the names that are not files.
#[derive(Default)]
struct Found {
    named: BTreeSet<String>,
    missing: Vec<String>,
}

impl Found {
    fn name(&mut self, path: String) {
        if !Path::new(env!("CARGO_MANIFEST_DIR")).join(&path).is_file() {
            self.missing.push(path.clone());
        }
        self.named.insert(path);
    }

    /// The files an entry's text names, from `dir`, the entry's own folder.
    fn described(&mut self, dir: &str, text: &str) {
        for word in text.split([' ', ';', ',', '(', ')', ':']) {
            if word.ends_with(".rs") && word.contains('/') {
                self.name(format!("{dir}/{word}"));
            }
        }
        // `x/ a, b (...), c`: the files of x/, to the end of the sentence.
        let mut rest = text;
        while let Some(at) = rest.find("/ ") {
            let folder = rest[..at]
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default();
            let tail = &rest[at + 2..];
            // A `;`, or a `.` that ends a sentence (not `decide.lua`).
            let end = tail
                .char_indices()
                .find(|&(i, c)| {
                    c == ';' || (c == '.' && tail[i + 1..].chars().next().is_none_or(|n| n == ' '))
                })
                .map_or(tail.len(), |(i, _)| i);
            let mut list = String::new();
            let mut depth = 0;
            for c in tail[..end].chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ if depth == 0 => list.push(c),
                    _ => {}
                }
            }
            for piece in list.split(',') {
                let piece = piece.rsplit(':').next().unwrap_or_default().trim();
                if ident(folder) && ident(piece) {
                    self.name(format!("{dir}/{folder}/{piece}.rs"));
                }
            }
            rest = &tail[end..];
        }
    }
}

#[test]
fn the_tree_in_development_md_names_every_file_of_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(root.join("docs/development.md")).expect("readable");
    let (named, missing) = tree_names(&doc);
    none(
        &missing,
        "names in docs/development.md's tree that are not files",
    );
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let unnamed: Vec<String> = files
        .iter()
        .map(|p| {
            p.strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned()
        })
        // Unit tests go with their module: `x/tests.rs` and what `x/tests/` holds.
        .filter(|p| !(p.ends_with("/tests.rs") || p.contains("/tests/")))
        .filter(|p| !named.contains(p))
        .collect();
    none(
        &unnamed,
        "files of src/ that docs/development.md's tree does not name",
    );
}

#[test]
fn the_tree_reader_sees_what_it_checks() {
    let doc = "<!-- tree: keep in step with src/ -->\n```\nnot this\n```\n```\nsrc/\n  lib.rs               the layers\n  store.rs             Check:\n    file.rs              one file per key; file/ record, lock (the lock,\n                         its wait), made, decide.lua; and prose. x/y.rs\n    counters.rs, nowhere.rs     them\ntests/                 here no more\n  nothing.rs\n```\n";
    let (named, missing) = tree_names(doc);
    let mut expected: Vec<&str> = vec![
        "src/lib.rs",
        "src/store.rs",
        "src/store/file.rs",
        "src/store/file/record.rs",
        "src/store/file/lock.rs",
        "src/store/file/made.rs",
        "src/store/x/y.rs",
        "src/store/counters.rs",
        "src/store/nowhere.rs",
    ];
    expected.sort();
    assert_eq!(
        named.iter().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
    assert_eq!(missing, ["src/store/x/y.rs", "src/store/nowhere.rs"]);
}

//! Temporary directories, removed on drop (kept, with their path printed, when the test panicked), and listings of what a directory holds.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::system::give_to_server_user;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub struct TempDir {
    path: PathBuf,
    keep: bool,
}

impl TempDir {
    /// A fresh directory under the system temp dir, mode 0755 so an unprivileged server can
    /// traverse it.
    pub fn new(label: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "resolve-test-{label}-{}-{n}-{nanos}",
            std::process::id()
        ));
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        set_mode(&path, 0o755);
        TempDir { path, keep: false }
    }

    /// Do not remove the directory on drop (print its path instead).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Create `rel` (and parents) with mode 0755.
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.path.join(rel);
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        set_mode(&p, 0o755);
        p
    }

    /// Create `rel` as a directory the server account may write (owned by it when running as
    /// root), mode 0700.
    pub fn server_dir(&self, rel: &str) -> PathBuf {
        let p = self.mkdir(rel);
        give_to_server_user(&p);
        set_mode(&p, 0o700);
        p
    }

    /// Write a file (mode 0644) and return its path.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
        }
        fs::write(&p, contents).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        set_mode(&p, 0o644);
        p
    }
}

pub fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {:o} {}: {e}", mode, path.display()));
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.keep || std::thread::panicking() {
            eprintln!("keeping {} for inspection", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Every entry below `dir`, directories included, links not followed, sorted. Panics when `dir`
/// cannot be read; a directory below it that vanishes meanwhile (a sweep) is skipped.
pub fn entries_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = match fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if d == dir => panic!("read {}: {e}", d.display()),
            Err(_) => continue,
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
            out.push(e.path());
        }
    }
    out.sort();
    out
}

/// The same without the directories: files, links, sockets, FIFOs.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    entries_under(dir)
        .into_iter()
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| !m.is_dir()))
        .collect()
}

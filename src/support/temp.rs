//! A fresh directory under the system's temporary one, for the unit tests.

use std::path::{Path, PathBuf};

/// A new directory `resolve-KIND-NAME-PID-RANDOM`, made.
pub fn dir(kind: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "resolve-{kind}-{name}-{}-{}",
        std::process::id(),
        crate::support::random::u64()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// A directory made by [`dir`], removed with all it holds when dropped; kept for inspection
/// when the test is failing.
pub struct Dir(PathBuf);

impl Dir {
    pub fn new(kind: &str, name: &str) -> Dir {
        Dir(dir(kind, name))
    }
}

impl std::ops::Deref for Dir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Dir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("keeping {} for inspection", self.0.display());
        } else {
            std::fs::remove_dir_all(&self.0)
                .unwrap_or_else(|e| panic!("remove {}: {e}", self.0.display()));
        }
    }
}

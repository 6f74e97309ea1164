//! A fresh directory under the system's temporary one, for the unit tests.

use std::path::PathBuf;

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

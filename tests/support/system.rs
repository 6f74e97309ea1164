//! Facts about the machine the tests run on: the binary under test, root or not, the unprivileged account servers run as.

use std::fs;
use std::path::{Path, PathBuf};

/// The `resolve` binary built by cargo for this test run.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_resolve"))
}

/// Effective user id of this process, read from /proc (no libc needed).
pub fn effective_uid() -> u32 {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .expect("Uid: line in /proc/self/status");
    // Uid: real effective saved filesystem
    line.split_whitespace()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .expect("effective uid in /proc/self/status")
}

pub fn is_root() -> bool {
    effective_uid() == 0
}

/// An unprivileged account for servers started by root (Apache's `User`/`Group`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerUser {
    pub name: String,
    pub group: String,
    pub uid: u32,
    pub gid: u32,
}

/// `Some` when the tests run as root: the account servers must drop to (`www-data`, else `nobody`).
/// `None` when not root: servers keep running as the current user.
pub fn server_user() -> Option<ServerUser> {
    if !is_root() {
        return None;
    }
    let passwd = fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    let group = fs::read_to_string("/etc/group").unwrap_or_default();
    for name in ["www-data", "nobody"] {
        let Some(fields) = passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() >= 4 && f[0] == name)
        else {
            continue;
        };
        let uid: u32 = fields[2].parse().expect("uid in /etc/passwd");
        let gid: u32 = fields[3].parse().expect("gid in /etc/passwd");
        let group_name = group
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() >= 3 && f[2] == gid.to_string())
            .map(|f| f[0].to_string())
            .unwrap_or_else(|| format!("#{gid}"));
        return Some(ServerUser {
            name: name.to_string(),
            group: group_name,
            uid,
            gid,
        });
    }
    panic!("running as root but neither www-data nor nobody exists in /etc/passwd");
}

/// Make `path` owned by the server account (when there is one), so a server that dropped
/// privileges can write there.
pub fn give_to_server_user(path: &Path) {
    if let Some(user) = server_user() {
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
            .unwrap_or_else(|e| panic!("chown {} to {}: {e}", path.display(), user.name));
    }
}

/// Panic with a clear message when a program or module the tests need is not installed.
pub fn require(path: &Path, what: &str) {
    if !path.exists() {
        panic!(
            "{what} not found ({}): run tests/run-all.sh as root to install test dependencies",
            path.display()
        );
    }
}

//! Facts about the machine the tests run on: the binary under test, root or not, the unprivileged account servers run as, the processes running a program.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, UNIX_EPOCH};

/// The `resolve` binary built by cargo for this test run.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_resolve"))
}

/// The binary under test as a command-line tool, with `args` and none of the CGI or
/// configuration variables of the test's environment.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .env_remove("GATEWAY_INTERFACE")
        .env_remove("RESOLVE_CONFIG");
    cmd
}

/// Runs `cmd` to its end and returns its standard output; fails the test, with `what` and the
/// command's standard error, when it does not succeed.
pub fn succeeded(cmd: &mut Command, what: &str) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// What a command printed: its standard output, then its standard error.
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Milliseconds since 1970 on this machine's clock, the one the stores decide with (the file
/// store's processes, MariaDB's `NOW(3)` and Redis' `TIME` all read it).
pub fn now_ms() -> u64 {
    UNIX_EPOCH.elapsed().expect("clock after 1970").as_millis() as u64
}

/// Sleeps until `now_ms()` reaches `t` (not at all when it has).
pub fn sleep_until_ms(t: u64) {
    std::thread::sleep(Duration::from_millis(t.saturating_sub(now_ms())));
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

/// Ids of the processes whose program (/proc/PID/exe) is `path` or lies under it, whoever owns
/// them.
pub fn processes_of(path: &Path) -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if fs::read_link(entry.path().join("exe")).is_ok_and(|exe| exe.starts_with(path)) {
            pids.insert(pid);
        }
    }
    pids
}

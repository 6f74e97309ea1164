//! Storage faults, one table-driven campaign per store, each fault under both failure policies: the answer (status, Retry-After, provider calls), its time against the configured timeouts, the log line, and the exact limit once the fault is gone. File store: data directory read-only (permissions, read-only mount), missing, uncreatable, another user's, full (small tmpfs, RLIMIT_FSIZE); counter files of another user, damaged, replaced by a directory, a symlink or a FIFO, or locked by another process. MySQL and Redis (faults the outage tests in mysql_store.rs and redis_store.rs do not cover): closing at once, a connection that never completes, garbage, another protocol, a huge length, a trickle, out of connections or memory, read-only, a lock held elsewhere.

mod support;

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, lchown, symlink};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use resolve::core::clock::SystemClock;
use resolve::core::limiter::Counter;
use resolve::store::file::FileStore;
use serde_json::{Value, json};
use support::config::{self, TOKEN};
use support::temp::set_mode;
use support::urlenc::link_param;
use support::{
    Cgi, CgiOutput, MariaDb, Provider, Redis, ServerUser, Setup, TempDir, binary, free_port,
    is_root, server_user,
};

/// The one rule every campaign configures: `LIMIT` per `WINDOW` seconds per address.
const LIMIT: u64 = 3;
const WINDOW: u64 = 600;
fn rules() -> Vec<Value> {
    vec![config::rule("ip", "ip", LIMIT, WINDOW)]
}

/// `Retry-After` of the 503 a failing store gets with `on_error: deny`.
const DENY_RETRY_AFTER: u64 = 7;
/// Store timeouts of the database campaigns, in milliseconds.
const CONNECT_MS: u64 = 1000;
const READ_MS: u64 = 1000;
/// What an answer may take beyond the store's own bound: starting the program, a machine busy
/// with the other campaigns.
const SLACK: Duration = Duration::from_millis(2000);

/// The file store has no timeout setting: an answer takes milliseconds. A second plus the
/// slack is what any file operation may cost before the request counts as hung.
fn file_bound() -> Duration {
    Duration::from_millis(1000) + SLACK
}

/// The MySQL store bounds a request by connect + 2 x read timeout.
fn mysql_bound() -> Duration {
    Duration::from_millis(CONNECT_MS + 2 * READ_MS) + SLACK
}

/// The Redis store bounds a request by connect + read timeout.
fn redis_bound() -> Duration {
    Duration::from_millis(CONNECT_MS + READ_MS) + SLACK
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

// ---------------------------------------------------------------------------------------------
// Policies, answers and what they must look like

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Allow,
    Deny,
}

impl Policy {
    const BOTH: [Policy; 2] = [Policy::Allow, Policy::Deny];

    fn name(self) -> &'static str {
        match self {
            Policy::Allow => "allow",
            Policy::Deny => "deny",
        }
    }

    /// The words of the error line the program writes when the store fails.
    fn log_phrase(self) -> &'static str {
        match self {
            Policy::Allow => "store failed, answering anyway (store.on_error is allow)",
            Policy::Deny => "store failed, refusing (store.on_error is deny)",
        }
    }
}

/// What a faulted request must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// The failure policy: 200 without the limiter (allow) or 503 (deny), one error line.
    Policy,
    /// No failure: admitted through the limiter, nothing logged.
    Works,
    /// Either of the above (a symlink may be refused or replaced, as long as nothing outside
    /// the data directory is touched).
    PolicyOrWorks,
}

/// One run of the program, as seen from outside.
struct Answer {
    status: Option<u16>,
    /// It went through the limiter (`RateLimit-Policy` and `RateLimit` present).
    limited: bool,
    remaining: Option<u64>,
    retry_after: Option<u64>,
    body: String,
    took: Duration,
    /// How the process ended.
    exit: String,
    /// Ended by itself, exit 0.
    clean: bool,
    /// Its lines on stderr (the log).
    lines: Vec<String>,
    everything: String,
}

impl Answer {
    fn of(out: &CgiOutput) -> Answer {
        let exit = if out.timed_out {
            format!("still running after {} ms, killed", ms(out.elapsed))
        } else if let Some(sig) = out.status.signal() {
            let name = match sig {
                25 => " (SIGXFSZ)",
                9 => " (SIGKILL)",
                6 => " (SIGABRT)",
                _ => "",
            };
            format!("killed by signal {sig}{name}")
        } else {
            format!("exit {}", out.status.code().unwrap_or(-1))
        };
        let a = out.answer.as_ref().ok();
        let header = |name: &str| a.and_then(|a| a.header(name)).map(str::to_owned);
        let remaining = header("RateLimit").and_then(|h| {
            h.split(';')
                .find_map(|p| p.trim().strip_prefix("r="))
                .and_then(|v| v.parse().ok())
        });
        Answer {
            status: a.map(|a| a.status),
            limited: header("RateLimit-Policy").is_some() && header("RateLimit").is_some(),
            remaining,
            retry_after: header("Retry-After").and_then(|v| v.parse().ok()),
            body: a.map(|a| a.text()).unwrap_or_default(),
            took: out.elapsed,
            clean: !out.timed_out && out.status.success(),
            exit,
            lines: out
                .stderr
                .lines()
                .filter(|l| l.starts_with("resolve: "))
                .map(str::to_owned)
                .collect(),
            everything: out.describe(),
        }
    }

    fn errors(&self) -> Vec<&String> {
        self.lines
            .iter()
            .filter(|l| l.starts_with("resolve: error: "))
            .collect()
    }

    fn status_text(&self) -> String {
        match self.status {
            Some(s) => {
                let mut t = s.to_string();
                if self.limited {
                    t.push_str(" (limiter)");
                }
                if !self.clean {
                    t.push_str(&format!("; {}", self.exit));
                }
                t
            }
            None => format!("none: {}", self.exit),
        }
    }

    /// The line to show in the table: the first error line, else the first line.
    fn log_line(&self) -> String {
        self.errors()
            .first()
            .map(|l| l.to_string())
            .or_else(|| self.lines.first().cloned())
            .unwrap_or_else(|| "(nothing)".to_owned())
    }
}

/// Answered at all, by a process that ended by itself, in time, without showing a secret.
fn check_answered(a: &Answer, bound: Duration, secrets: &[&str]) -> Vec<String> {
    let mut p = Vec::new();
    if a.status.is_none() {
        p.push(format!("no valid CGI answer ({})", a.exit));
    }
    if !a.clean {
        p.push(format!(
            "the process did not end by itself with exit 0 ({})",
            a.exit
        ));
    }
    if a.took > bound {
        p.push(format!(
            "took {} ms, over the bound of {} ms",
            ms(a.took),
            ms(bound)
        ));
    }
    for s in secrets {
        if a.everything.contains(s) {
            p.push("a secret appears in the answer or the log".to_owned());
        }
    }
    p
}

/// The failure policy's answer and one error line that says so, names `place` and, when
/// `any` is not empty, one of its words (the cause).
fn check_policy(
    a: &Answer,
    policy: Policy,
    calls: usize,
    place: &str,
    any: &[&str],
) -> Vec<String> {
    let mut p = Vec::new();
    match policy {
        Policy::Allow => {
            if a.status != Some(200) || a.limited {
                p.push(format!(
                    "wanted 200 without limiter headers, got {}",
                    a.status_text()
                ));
            }
            if a.status == Some(200) && !a.body.starts_with("https://cdn.test/file/") {
                p.push(format!("a 200 without the download URL: {:?}", a.body));
            }
            if calls != 1 {
                p.push(format!("{calls} provider calls, wanted 1"));
            }
        }
        Policy::Deny => {
            if a.status != Some(503) {
                p.push(format!("wanted 503, got {}", a.status_text()));
            }
            if a.status == Some(503) && a.retry_after != Some(DENY_RETRY_AFTER) {
                p.push(format!(
                    "Retry-After {:?}, wanted {DENY_RETRY_AFTER}",
                    a.retry_after
                ));
            }
            if calls != 0 {
                p.push(format!("{calls} provider calls, wanted none"));
            }
        }
    }
    let errors = a.errors();
    if errors.len() != 1 {
        p.push(format!(
            "{} error lines, wanted one: {errors:?}",
            errors.len()
        ));
    }
    match errors.iter().find(|l| l.contains(policy.log_phrase())) {
        None => p.push(format!("no error line saying {:?}", policy.log_phrase())),
        Some(l) => {
            if !l.contains(place) {
                p.push(format!("the error line does not name {place}: {l}"));
            }
            if !any.is_empty() && !any.iter().any(|w| l.contains(w)) {
                p.push(format!("the error line names none of {any:?}: {l}"));
            }
        }
    }
    p
}

/// Admitted through the limiter, the provider asked once, nothing logged as an error.
fn check_works(a: &Answer, calls: usize) -> Vec<String> {
    let mut p = Vec::new();
    if a.status != Some(200) || !a.limited {
        p.push(format!(
            "wanted 200 through the limiter, got {}",
            a.status_text()
        ));
    }
    if calls != 1 {
        p.push(format!("{calls} provider calls, wanted 1"));
    }
    if !a.errors().is_empty() {
        p.push(format!("error lines: {:?}", a.errors()));
    }
    p
}

fn check_expected(
    a: &Answer,
    expect: Expect,
    policy: Policy,
    calls: usize,
    place: &str,
    any: &[&str],
) -> Vec<String> {
    if a.status.is_none() {
        // No answer at all: `check_answered` says so; nothing more to compare.
        return Vec::new();
    }
    match expect {
        Expect::Policy => check_policy(a, policy, calls, place, any),
        Expect::Works => check_works(a, calls),
        Expect::PolicyOrWorks if a.limited => check_works(a, calls),
        Expect::PolicyOrWorks => check_policy(a, policy, calls, place, any),
    }
}

/// Once the fault is gone: exactly `LIMIT - counted` more admitted through the limiter (each
/// with the right `r=`), then 429 with a Retry-After inside the window, the provider asked for
/// each admitted one, nothing logged as an error.
fn check_exact(
    mut ask: impl FnMut() -> Answer,
    provider: &Provider,
    counted: u64,
    bound: Duration,
    secrets: &[&str],
) -> Vec<String> {
    let mut p = Vec::new();
    let before = provider.calls();
    let admit = LIMIT.saturating_sub(counted);
    for i in 0..admit {
        let a = ask();
        p.extend(
            check_answered(&a, bound, secrets)
                .into_iter()
                .map(|e| format!("after the fault: {e}")),
        );
        let want = LIMIT - counted - i - 1;
        if a.status != Some(200) || !a.limited || a.remaining != Some(want) {
            p.push(format!(
                "after the fault, request {}: wanted 200 through the limiter with r={want}, got {} r={:?}; log {:?}",
                i + 1,
                a.status_text(),
                a.remaining,
                a.lines
            ));
            return p;
        }
        if !a.errors().is_empty() {
            p.push(format!("after the fault: error lines {:?}", a.errors()));
        }
    }
    let a = ask();
    let window = WINDOW - 60..=WINDOW;
    if a.status != Some(429) || !a.retry_after.is_some_and(|r| window.contains(&r)) {
        p.push(format!(
            "after the fault, request {}: wanted 429 with Retry-After in {window:?}, got {} (Retry-After {:?}); log {:?}",
            admit + 1,
            a.status_text(),
            a.retry_after,
            a.lines
        ));
    }
    let calls = provider.calls() - before;
    if calls != admit as usize {
        p.push(format!(
            "after the fault: {calls} provider calls for {admit} admitted"
        ));
    }
    p
}

// ---------------------------------------------------------------------------------------------
// The table

struct Row {
    fault: String,
    policy: &'static str,
    status: String,
    took: Duration,
    bound: Duration,
    calls: String,
    log: String,
    problems: Vec<String>,
}

struct Table {
    store: &'static str,
    rows: Vec<Row>,
}

impl Table {
    fn new(store: &'static str) -> Table {
        Table {
            store,
            rows: Vec::new(),
        }
    }

    fn add(&mut self, row: Row) {
        eprintln!(
            "{} | {} | {} | {} | {} ms | {} | {}",
            self.store,
            row.fault,
            row.policy,
            row.status,
            ms(row.took),
            if row.problems.is_empty() {
                "ok".to_owned()
            } else {
                format!("FAIL: {}", row.problems.join("; "))
            },
            row.log
        );
        self.rows.push(row);
    }

    /// Prints the table (Markdown, for the documentation) and fails with every problem found.
    fn finish(self) {
        let cell = |s: &str| {
            let s = s.replace('|', "\\|");
            if s.chars().count() > 170 {
                format!("{}…", s.chars().take(170).collect::<String>())
            } else {
                s
            }
        };
        let mut out = format!(
            "\n{} store faults\n\n| fault | on_error | status | ms | bound ms | provider calls | log line | result |\n|---|---|---|---|---|---|---|---|\n",
            self.store
        );
        for r in &self.rows {
            // The policy column says which; the cell keeps what follows the common words.
            let log = ["(store.on_error is allow): ", "(store.on_error is deny): "]
                .iter()
                .find_map(|p| r.log.split_once(p).map(|(_, d)| format!("…: {d}")))
                .unwrap_or_else(|| r.log.clone());
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.fault,
                r.policy,
                cell(&r.status),
                ms(r.took),
                ms(r.bound),
                r.calls,
                cell(&log),
                if r.problems.is_empty() {
                    "ok".to_owned()
                } else {
                    cell(&format!("FAIL: {}", r.problems.join("; ")))
                }
            ));
        }
        eprintln!("{out}");
        let failed: Vec<String> = self
            .rows
            .iter()
            .flat_map(|r| {
                r.problems
                    .iter()
                    .map(move |p| format!("{} ({}): {p}", r.fault, r.policy))
            })
            .collect();
        assert!(
            failed.is_empty(),
            "{} store: {} problems:\n{}",
            self.store,
            failed.len(),
            failed.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Running the program

static LINKS: AtomicUsize = AtomicUsize::new(0);

/// A link never asked before.
fn fresh_link() -> String {
    format!(
        "https://example.com/file/{}",
        LINKS.fetch_add(1, Ordering::SeqCst)
    )
}

/// How the program is started: as the unprivileged server account when the tests run as root
/// (so permissions apply as on a real host), optionally with a file size limit.
#[derive(Clone, Debug, Default)]
struct Runner {
    user: Option<ServerUser>,
    fsize: Option<u64>,
}

impl Runner {
    fn argv(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = Vec::new();
        if let Some(u) = &self.user {
            support::system::require(Path::new("/usr/bin/setpriv"), "setpriv (util-linux)");
            v.push("/usr/bin/setpriv".into());
            v.push(format!("--reuid={}", u.uid).into());
            v.push(format!("--regid={}", u.gid).into());
            v.push("--clear-groups".into());
            v.push("--".into());
        }
        if let Some(n) = self.fsize {
            support::system::require(Path::new("/usr/bin/prlimit"), "prlimit (util-linux)");
            v.push("/usr/bin/prlimit".into());
            v.push(format!("--fsize={n}").into());
            v.push("--".into());
        }
        v.push(binary().into_os_string());
        v
    }

    /// One GET from `addr` for a fresh link, run to its end (or killed at `bound` + 1 s).
    fn ask(&self, cfg: &Path, addr: &str, bound: Duration) -> Answer {
        self.ask_for(cfg, addr, bound, &fresh_link())
    }

    /// The same for `link`.
    fn ask_for(&self, cfg: &Path, addr: &str, bound: Duration, link: &str) -> Answer {
        let argv = self.argv();
        let mut cgi = Cgi::program(Path::new(&argv[0]), "GET", link_param(link));
        for a in &argv[1..] {
            cgi = cgi.arg(a);
        }
        let out = cgi
            .config(cfg)
            .var("REMOTE_ADDR", addr)
            .header("Accept", "text/plain")
            .timeout(bound + Duration::from_secs(1))
            .run();
        Answer::of(&out)
    }

    fn command(&self) -> Command {
        let argv = self.argv();
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    }
}

/// Runs `command`, killing it at `limit`: how it ended, its output, how long it took.
fn run_bounded(mut command: Command, limit: Duration) -> (String, String, Duration) {
    let began = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let ended = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if began.elapsed() > limit {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = began.elapsed();
    let out = child.wait_with_output().expect("collect the output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let how = match ended {
        Some(s) => match s.code() {
            Some(c) => format!("exit {c}"),
            None => format!("killed by signal {}", s.signal().unwrap_or(0)),
        },
        None => format!("still running after {} ms, killed", ms(took)),
    };
    (how, text, took)
}

fn run_ok(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// The file store

/// A mount made for one fault, undone when dropped (also when the test fails).
struct Mount(PathBuf);

impl Mount {
    /// A tmpfs of `size` on `at`, owned by `user`, mode 700.
    fn tmpfs(at: &Path, size: &str, user: &Option<ServerUser>) -> Mount {
        let (uid, gid) = user.as_ref().map_or((0, 0), |u| (u.uid, u.gid));
        run_ok(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700,uid={uid},gid={gid}"),
                "tmpfs",
                path_str(at),
            ],
        );
        Mount(at.to_owned())
    }

    /// `at` made read-only by a bind mount over itself.
    fn read_only(at: &Path) -> Mount {
        run_ok("mount", &["--bind", path_str(at), path_str(at)]);
        let m = Mount(at.to_owned());
        run_ok("mount", &["-o", "remount,bind,ro", path_str(at)]);
        m
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Whether this process may mount (root, and not in a container that forbids it).
fn mount_works() -> bool {
    if !is_root() {
        return false;
    }
    let dir = TempDir::new("faults-mount-probe");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(dir.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if mounted {
        drop(Mount(dir.path().to_owned()));
    }
    mounted
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Gives `path` (not what a symlink points to) to the server account, when there is one.
fn own(path: &Path, user: &Option<ServerUser>) {
    if let Some(u) = user {
        lchown(path, Some(u.uid), Some(u.gid))
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }
}

/// Every directory and file under `dir` (itself included) set to these modes.
fn chmod_tree(dir: &Path, dir_mode: u32, file_mode: u32) {
    set_mode(dir, dir_mode);
    for entry in fs::read_dir(dir).expect("list") {
        let entry = entry.expect("entry");
        let t = entry.file_type().expect("type");
        if t.is_dir() {
            chmod_tree(&entry.path(), dir_mode, file_mode);
        } else if t.is_file() {
            set_mode(&entry.path(), file_mode);
        }
    }
}

fn mkfifo(path: &Path) {
    run_ok("mkfifo", &["-m", "600", path_str(path)]);
}

/// Bytes that look random (xorshift), the same at every run.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// One valid counter slot, as the store writes it.
fn valid_slot() -> Vec<u8> {
    resolve::store::file::record::encode(
        1,
        &Counter {
            start_ms: 1_700_000_000_000,
            window_ms: WINDOW * 1000,
            count: 1,
        },
    )
    .to_vec()
}

/// Declares `FileFault` and `FILE_FAULTS`, every fault in the order the campaign runs them.
macro_rules! file_faults {
    ($($fault:ident),* $(,)?) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum FileFault {
            $($fault),*
        }

        const FILE_FAULTS: &[FileFault] = &[$(FileFault::$fault),*];
    };
}

file_faults![
    ReadOnlySeen,
    ReadOnlyNew,
    RoMountSeen,
    RoMountNew,
    DirMissing,
    ParentMissing,
    ParentLocked,
    DirIsFile,
    DirOtherOwner,
    FullNew,
    FullSeen,
    FileSizeLimit,
    FileOtherOwner,
    RandomBytes,
    Truncated,
    Oversized,
    Zeros,
    DirInPlace,
    SymlinkPasswd,
    SymlinkOutside,
    SymlinkDangling,
    ShardSymlink,
    Fifo,
    FifoSwept,
    FifoCache,
    LockHeld,
];

use FileFault::*;

impl FileFault {
    fn name(self) -> &'static str {
        match self {
            ReadOnlySeen => "data dir read-only (dirs 0555, files 0444), key seen before",
            ReadOnlyNew => "data dir read-only (dirs 0555, files 0444), new key",
            RoMountSeen => "data dir on a read-only mount, key seen before",
            RoMountNew => "data dir on a read-only mount, new key",
            DirMissing => "data dir missing",
            ParentMissing => "data dir and its parent missing",
            ParentLocked => "data dir missing, parent not writable",
            DirIsFile => "data dir path is a regular file",
            DirOtherOwner => "data dir owned by another user (0700)",
            FullNew => "disk full (64 KiB tmpfs, filled), new key",
            FullSeen => "disk full (64 KiB tmpfs, filled), key seen before",
            FileSizeLimit => "file size limit 0 (RLIMIT_FSIZE), new key",
            FileOtherOwner => "counter file owned by another user (0600)",
            RandomBytes => "counter file of 200 random bytes",
            Truncated => "counter file truncated (60 bytes of a slot)",
            Oversized => "counter file oversized (1 MiB)",
            Zeros => "counter file of 256 NUL bytes",
            DirInPlace => "a directory where the counter file should be",
            SymlinkPasswd => "counter file is a symlink to /etc/passwd",
            SymlinkOutside => "counter file is a symlink to a writable file outside",
            SymlinkDangling => "counter file is a symlink to a missing file outside",
            ShardSymlink => "shard directory is a symlink to a directory outside",
            Fifo => "a FIFO where the counter file should be",
            FifoSwept => "a FIFO in the data dir, request that sweeps",
            FifoCache => "a FIFO where the link's cache entry should be (cache on)",
            LockHeld => "counter file locked by another process that never lets go",
        }
    }

    /// Faults that only root can set up (mounts).
    fn needs_root(self) -> bool {
        matches!(self, RoMountSeen | RoMountNew | FullNew | FullSeen)
    }

    /// The key is counted once before the fault.
    fn seen(self) -> bool {
        matches!(
            self,
            ReadOnlySeen | RoMountSeen | FullSeen | FileOtherOwner | LockHeld
        )
    }

    fn expect(self) -> Expect {
        match self {
            DirMissing | ParentMissing | FullSeen | FifoSwept => Expect::Works,
            SymlinkPasswd | SymlinkOutside | SymlinkDangling | ShardSymlink | FifoCache => {
                Expect::PolicyOrWorks
            }
            _ => Expect::Policy,
        }
    }

    /// Words of the cause, one of which the error line must hold.
    fn cause(self) -> &'static [&'static str] {
        match self {
            ReadOnlySeen | ReadOnlyNew | ParentLocked | DirOtherOwner | FileOtherOwner => {
                &["Permission denied"]
            }
            RoMountSeen | RoMountNew => &["Read-only file system"],
            DirIsFile => &["File exists", "Not a directory", "not a directory"],
            FullNew => &["No space left on device"],
            FileSizeLimit => &["File too large", "file size limit"],
            RandomBytes | Truncated | Oversized | Zeros => &["damaged"],
            DirInPlace => &["Is a directory", "not a regular file"],
            Fifo => &["Illegal seek", "not a regular file"],
            LockHeld => &["lock", "busy", "in use"],
            _ => &[],
        }
    }
}

/// One fault's site: a directory with the configuration, a home owned by the server account
/// and the data directory in it.
struct FileSite {
    root: TempDir,
    home: PathBuf,
    data: PathBuf,
    cfg: PathBuf,
    addr: String,
    /// The counter file of `addr`'s key.
    key: PathBuf,
    /// The link the faulted request asks for.
    link: String,
    user: Option<ServerUser>,
}

impl FileSite {
    fn new(
        fault: FileFault,
        policy: Policy,
        n: usize,
        provider: &Provider,
        user: &Option<ServerUser>,
    ) -> FileSite {
        let root = TempDir::new(&format!("faults-file-{n}"));
        let home = root.mkdir("home");
        own(&home, user);
        let data = match fault {
            ParentMissing => home.join("gone/data"),
            ParentLocked => home.join("locked/data"),
            _ => home.join("data"),
        };
        let addr = format!("198.51.100.{}", n + 1);
        let key = FileStore::new(&data, SystemClock, Duration::ZERO)
            .path_for(&format!("resolve:ip:{addr}"));
        let sweep_one_in = if fault == FifoSwept { 1 } else { 0 };
        let cache_ttl = if fault == FifoCache { 600 } else { 0 };
        let cfg = config::write(
            &root,
            &json!({
                "provider": config::http_provider(&provider.url("/unrestrict")),
                "store": {"kind": "file", "dir": data, "on_error": policy.name(),
                          "deny_retry_after_secs": DENY_RETRY_AFTER,
                          "sweep_one_in": sweep_one_in, "sweep_budget_ms": 1000},
                "rules": rules(),
                "cache": {"ttl_secs": cache_ttl},
            }),
        );
        let site = FileSite {
            root,
            home,
            data,
            cfg,
            addr,
            key,
            link: fresh_link(),
            user: user.clone(),
        };
        if !matches!(fault, DirMissing | ParentMissing | ParentLocked | DirIsFile) {
            site.mkdir(&site.data);
        }
        site
    }

    /// A directory the server account owns, mode 700.
    fn mkdir(&self, p: &Path) {
        fs::create_dir_all(p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        own(p, &self.user);
        set_mode(p, 0o700);
    }

    fn ask(&self, runner: &Runner) -> Answer {
        runner.ask(&self.cfg, &self.addr, file_bound())
    }

    fn ask_faulted(&self, runner: &Runner) -> Answer {
        runner.ask_for(&self.cfg, &self.addr, file_bound(), &self.link)
    }

    /// The site's paths and the counter files' hashed names shortened for the table.
    fn short(&self, line: &str) -> String {
        let line = line
            .replace(path_str(&self.data), "DATA")
            .replace(path_str(&self.home), "HOME")
            .replace(path_str(self.root.path()), "SITE");
        let mut out = String::new();
        let mut run = String::new();
        for c in line.chars().chain(std::iter::once(' ')) {
            if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
                run.push(c);
                continue;
            }
            if run.len() == 64 {
                out.push_str(&run[..8]);
                out.push('…');
            } else {
                out.push_str(&run);
            }
            run.clear();
            out.push(c);
        }
        out.pop();
        out
    }
}

/// What a planted fault leaves to check and to undo.
#[derive(Default)]
struct Planted {
    mounts: Vec<Mount>,
    held: Option<File>,
    /// Must hold after the faulted request and after the recovery.
    checks: Vec<Box<dyn Fn() -> Result<(), String>>>,
    undo: Vec<Box<dyn FnOnce()>>,
}

/// A file's bytes and modification time, to prove it was not touched.
fn fingerprint(p: &Path) -> (Vec<u8>, i64, i64) {
    let m = fs::metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
    (
        fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())),
        m.mtime(),
        m.mtime_nsec(),
    )
}

fn untouched(p: PathBuf) -> Box<dyn Fn() -> Result<(), String>> {
    let before = fingerprint(&p);
    Box::new(move || {
        if fingerprint(&p) == before {
            Ok(())
        } else {
            Err(format!("{} outside the data dir was written", p.display()))
        }
    })
}

/// Before the first request: what must exist for the fault (a small filesystem).
fn prepare(fault: FileFault, site: &FileSite, planted: &mut Planted) {
    if matches!(fault, FullNew | FullSeen) {
        planted
            .mounts
            .push(Mount::tmpfs(&site.data, "64k", &site.user));
    }
}

/// Sets the fault up.
fn plant(fault: FileFault, site: &FileSite, planted: &mut Planted) {
    let user = site.user.clone();
    let root = is_root();
    let shard = site.key.parent().expect("shard").to_owned();
    let key = site.key.clone();
    let data = site.data.clone();
    match fault {
        ReadOnlySeen | ReadOnlyNew => {
            chmod_tree(&data, 0o555, 0o444);
            planted
                .undo
                .push(Box::new(move || chmod_tree(&data, 0o700, 0o600)));
        }
        RoMountSeen | RoMountNew => planted.mounts.push(Mount::read_only(&data)),
        DirMissing | ParentMissing => {
            let (data, user) = (data.clone(), user.clone());
            planted.checks.push(Box::new(move || {
                let m = fs::metadata(&data).map_err(|e| format!("data dir not created: {e}"))?;
                let want_uid = user.as_ref().map_or(m.uid(), |u| u.uid);
                if !m.is_dir() || m.mode() & 0o777 != 0o700 || m.uid() != want_uid {
                    return Err(format!(
                        "data dir created with mode {:o}, owner {}",
                        m.mode() & 0o777,
                        m.uid()
                    ));
                }
                Ok(())
            }));
        }
        ParentLocked => {
            let parent = data.parent().expect("parent").to_owned();
            fs::create_dir(&parent).expect("create the parent");
            // Root's and 0755 when the program runs as the server account; 0555 otherwise.
            set_mode(&parent, if root { 0o755 } else { 0o555 });
            let user = user.clone();
            planted.undo.push(Box::new(move || {
                own(&parent, &user);
                set_mode(&parent, 0o755);
            }));
        }
        DirIsFile => {
            fs::write(&data, b"not a directory\n").expect("write the file");
            own(&data, &user);
            planted.undo.push(Box::new(move || {
                fs::remove_file(&data).expect("remove the file");
            }));
        }
        DirOtherOwner => {
            if root {
                lchown(&data, Some(0), Some(0)).expect("chown to root");
            } else {
                set_mode(&data, 0o000);
            }
            planted.undo.push(Box::new(move || {
                own(&data, &user);
                set_mode(&data, 0o700);
            }));
        }
        FullNew | FullSeen => {
            let filler = data.join("filler");
            let mut f = File::create(&filler).expect("create the filler");
            let chunk = [0x5au8; 4096];
            loop {
                match f.write_all(&chunk) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(28) => break,
                    Err(e) => panic!("fill the tmpfs: {e}"),
                }
            }
            drop(f);
            // Full indeed: one more byte in a new file does not fit.
            let probe = data.join("probe");
            assert!(
                fs::write(&probe, b"x").is_err(),
                "the tmpfs still takes data"
            );
            let _ = fs::remove_file(&probe);
            planted.undo.push(Box::new(move || {
                fs::remove_file(&filler).expect("remove the filler");
            }));
        }
        FileSizeLimit => {}
        FileOtherOwner => {
            if root {
                lchown(&key, Some(0), Some(0)).expect("chown to root");
                set_mode(&key, 0o600);
            } else {
                set_mode(&key, 0o000);
            }
            planted.undo.push(Box::new(move || {
                own(&key, &user);
                set_mode(&key, 0o600);
            }));
        }
        RandomBytes | Truncated | Oversized | Zeros => {
            let bytes = match fault {
                RandomBytes => noise(200, 0x9e37_79b9_7f4a_7c15),
                Truncated => valid_slot()[..60].to_vec(),
                Oversized => {
                    let mut b = valid_slot();
                    b.resize(1 << 20, b'x');
                    b
                }
                _ => vec![0u8; 256],
            };
            site.mkdir(&shard);
            fs::write(&key, &bytes).expect("write the damaged file");
            own(&key, &user);
            set_mode(&key, 0o600);
            let aside = PathBuf::from(format!("{}.damaged", key.display()));
            planted
                .checks
                .push(Box::new(move || match fs::read(&aside) {
                    Ok(b) if b == bytes => Ok(()),
                    Ok(_) => Err(format!("{} holds other bytes", aside.display())),
                    Err(e) => Err(format!("not moved aside to {}: {e}", aside.display())),
                }));
        }
        DirInPlace => {
            site.mkdir(&shard);
            site.mkdir(&key);
            planted.undo.push(Box::new(move || {
                let _ = fs::remove_dir(&key);
            }));
        }
        SymlinkPasswd | SymlinkOutside => {
            let target = if fault == SymlinkPasswd {
                PathBuf::from("/etc/passwd")
            } else {
                let outside = site.root.mkdir("outside");
                let decoy = outside.join("decoy");
                fs::write(&decoy, b"").expect("write the decoy");
                own(&decoy, &user);
                set_mode(&decoy, 0o600);
                decoy
            };
            site.mkdir(&shard);
            symlink(&target, &key).expect("plant the symlink");
            own(&key, &user);
            planted.checks.push(untouched(target));
            planted.undo.push(Box::new(move || {
                let _ = fs::remove_file(&key);
                let _ = fs::remove_file(format!("{}.damaged", key.display()));
            }));
        }
        SymlinkDangling => {
            let outside = site.root.join("outside");
            site.mkdir(&outside);
            let target = outside.join("missing");
            site.mkdir(&shard);
            symlink(&target, &key).expect("plant the symlink");
            own(&key, &user);
            planted.checks.push(Box::new(move || {
                if target.exists() {
                    Err(format!(
                        "{} was created outside the data dir",
                        target.display()
                    ))
                } else {
                    Ok(())
                }
            }));
            planted.undo.push(Box::new(move || {
                let _ = fs::remove_file(&key);
                let _ = fs::remove_file(format!("{}.damaged", key.display()));
            }));
        }
        ShardSymlink => {
            let outside = site.root.join("outside-shard");
            site.mkdir(&outside);
            symlink(&outside, &shard).expect("plant the symlink");
            own(&shard, &user);
            let o = outside;
            planted.checks.push(Box::new(move || {
                let entries: Vec<_> = fs::read_dir(&o)
                    .expect("list")
                    .filter_map(Result::ok)
                    .map(|e| e.file_name())
                    .collect();
                if entries.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "files created outside the data dir, in {}: {entries:?}",
                        o.display()
                    ))
                }
            }));
            planted.undo.push(Box::new(move || {
                // Whatever stands there now: the symlink, or a directory that replaced it.
                if fs::symlink_metadata(&shard).is_ok_and(|m| m.is_dir()) {
                    let _ = fs::remove_dir_all(&shard);
                } else {
                    let _ = fs::remove_file(&shard);
                }
            }));
        }
        Fifo => {
            site.mkdir(&shard);
            mkfifo(&key);
            own(&key, &user);
            planted.undo.push(Box::new(move || {
                let _ = fs::remove_file(&key);
                let _ = fs::remove_file(format!("{}.damaged", key.display()));
            }));
        }
        FifoSwept => {
            // Another key's file, in the data dir a request's sweep walks through.
            let other = FileStore::new(&data, SystemClock, Duration::ZERO)
                .path_for("resolve:ip:192.0.2.200");
            site.mkdir(other.parent().expect("shard"));
            mkfifo(&other);
            own(&other, &user);
            planted.undo.push(Box::new(move || {
                let _ = fs::remove_file(&other);
            }));
        }
        FifoCache => {
            let mut cache = FileStore::new(&data, SystemClock, Duration::ZERO)
                .path_for(&resolve::provider::cache::key(&site.link))
                .into_os_string();
            cache.push(".cache");
            let cache = PathBuf::from(cache);
            site.mkdir(cache.parent().expect("shard"));
            mkfifo(&cache);
            own(&cache, &user);
            planted.undo.push(Box::new(move || {
                let _ = fs::remove_file(&cache);
            }));
        }
        LockHeld => {
            let f = File::open(&key).expect("open the counter file");
            f.lock().expect("lock the counter file");
            planted.held = Some(f);
        }
    }
}

fn file_case(
    fault: FileFault,
    policy: Policy,
    n: usize,
    provider: &Provider,
    runner: &Runner,
) -> Row {
    let bound = file_bound();
    let secrets = [TOKEN];
    let site = FileSite::new(fault, policy, n, provider, &runner.user);
    let mut planted = Planted::default();
    prepare(fault, &site, &mut planted);
    let mut problems = Vec::new();
    let mut counted = 0;
    if fault.seen() {
        let a = site.ask(runner);
        if a.status != Some(200) || !a.limited {
            problems.push(format!(
                "before the fault: wanted 200 through the limiter, got {}",
                a.status_text()
            ));
        }
        counted += 1;
    }
    plant(fault, &site, &mut planted);

    let faulted = if fault == FileSizeLimit {
        Runner {
            fsize: Some(0),
            ..runner.clone()
        }
    } else {
        runner.clone()
    };
    let calls = provider.calls();
    let a = site.ask_faulted(&faulted);
    let calls = provider.calls() - calls;
    problems.extend(check_answered(&a, bound, &secrets));
    problems.extend(check_expected(
        &a,
        fault.expect(),
        policy,
        calls,
        path_str(&site.data),
        fault.cause(),
    ));
    if a.limited && a.status == Some(200) {
        counted += 1;
    }
    let mut held_before = Vec::new();
    for check in &planted.checks {
        let result = check();
        if let Err(e) = &result {
            problems.push(e.clone());
        }
        held_before.push(result.is_ok());
    }

    // The fault removed: the exact limit again. Removing a planted symlink removes whatever
    // stood in its place, so that key starts afresh.
    if matches!(
        fault,
        SymlinkPasswd | SymlinkOutside | SymlinkDangling | ShardSymlink
    ) {
        counted = 0;
    }
    planted.held = None;
    for undo in planted.undo.drain(..).rev() {
        undo();
    }
    // A read-only mount is undone by unmounting it; a full tmpfs stays (removing the filler
    // above undid that fault) until the case ends.
    if matches!(fault, RoMountSeen | RoMountNew) {
        drop(std::mem::take(&mut planted.mounts));
    }
    problems.extend(check_exact(
        || site.ask(runner),
        provider,
        counted,
        bound,
        &secrets,
    ));
    for (check, held) in planted.checks.iter().zip(held_before) {
        if let (true, Err(e)) = (held, check()) {
            problems.push(format!("after the fault: {e}"));
        }
    }
    Row {
        fault: fault.name().to_owned(),
        policy: policy.name(),
        status: a.status_text(),
        took: a.took,
        bound,
        calls: calls.to_string(),
        log: site.short(&a.log_line()),
        problems,
    }
}

/// `resolve sweep` (as cron runs it) over a data dir holding a FIFO: it must end.
fn sweep_command_row(provider: &Provider, runner: &Runner, n: usize) -> Row {
    let bound = file_bound();
    let site = FileSite::new(FifoSwept, Policy::Deny, n, provider, &runner.user);
    // A counter of its own, so the sweep has a regular file to look at too.
    let a = site.ask(runner);
    let mut problems = Vec::new();
    if a.status != Some(200) {
        problems.push(format!("before: {}", a.status_text()));
    }
    let mut planted = Planted::default();
    plant(FifoSwept, &site, &mut planted);
    let mut command = runner.command();
    command
        .arg("sweep")
        .arg("--config")
        .arg(&site.cfg)
        .env_remove("GATEWAY_INTERFACE")
        .env_remove("RESOLVE_CONFIG");
    let (how, output, took) = run_bounded(command, bound + Duration::from_secs(1));
    if took > bound || how.starts_with("still running") {
        problems.push(format!(
            "`resolve sweep` did not end within {} ms ({how})",
            ms(bound)
        ));
    }
    for undo in planted.undo.drain(..).rev() {
        undo();
    }
    Row {
        fault: "a FIFO in the data dir, `resolve sweep`".to_owned(),
        policy: "-",
        status: how,
        took,
        bound,
        calls: "-".to_owned(),
        log: site.short(output.lines().next().unwrap_or("(nothing)")),
        problems,
    }
}

#[test]
fn file_store_faults_follow_the_policy_within_the_bound_and_limiting_resumes() {
    let began = Instant::now();
    let provider = Provider::start();
    let runner = Runner {
        user: server_user(),
        fsize: None,
    };
    eprintln!(
        "running the program as {}",
        runner
            .user
            .as_ref()
            .map_or("the current user".to_owned(), |u| format!(
                "{} (uid {})",
                u.name, u.uid
            ))
    );
    let can_mount = mount_works();
    let mut table = Table::new("file");
    let mut n = 0;
    for &fault in FILE_FAULTS {
        for policy in Policy::BOTH {
            n += 1;
            if fault.needs_root() && !can_mount {
                let mut problems = Vec::new();
                if on_ci() {
                    problems.push(
                        "needs root allowed to mount, and CI=true: run the tests as root".into(),
                    );
                }
                table.add(Row {
                    fault: fault.name().to_owned(),
                    policy: policy.name(),
                    status: "not run: mounting needs root".to_owned(),
                    took: Duration::ZERO,
                    bound: file_bound(),
                    calls: "-".to_owned(),
                    log: String::new(),
                    problems,
                });
                continue;
            }
            table.add(file_case(fault, policy, n, &provider, &runner));
        }
    }
    table.add(sweep_command_row(&provider, &runner, n + 1));
    eprintln!("file store campaign: {} ms", ms(began.elapsed()));
    table.finish();
}

// ---------------------------------------------------------------------------------------------
// A server that misbehaves on purpose, in front of a real one

#[derive(Clone, Debug)]
enum Behaviour {
    /// Pass everything to the real server.
    Forward(SocketAddr),
    /// Accept, then close at once.
    Close,
    /// Send these bytes (after the client's first bytes with `after_request`), then keep the
    /// connection open without a word more.
    Send { bytes: Vec<u8>, after_request: bool },
    /// Send these bytes one every `every`, then `x` forever at the same pace.
    Trickle {
        bytes: Vec<u8>,
        every: Duration,
        after_request: bool,
    },
    /// An HTTP server: waits for a request line, answers 400, closes.
    Http,
    /// One RESP error line per command received (a Redis that is loading, say).
    ErrorPerCommand(String),
}

struct FaultServer {
    addr: SocketAddr,
    behaviour: Arc<Mutex<Behaviour>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl FaultServer {
    fn start(behaviour: Behaviour) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault server");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("address");
        let behaviour = Arc::new(Mutex::new(behaviour));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (behaviour.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let current = b.lock().unwrap().clone();
                        let s = s.clone();
                        std::thread::spawn(move || serve(conn, current, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FaultServer {
            addr,
            behaviour,
            stop,
            accept: Some(accept),
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    /// What new connections get.
    fn set(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Reads what the client sends until it pauses (or `wait` passes).
fn read_request(conn: &mut TcpStream, stop: &AtomicBool, wait: Duration) -> Option<Vec<u8>> {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(30)));
    let until = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while Instant::now() < until && !stop.load(Ordering::SeqCst) {
        match conn.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if !got.is_empty() {
                    return Some(got);
                }
            }
            Err(_) => return None,
        }
    }
    Some(got)
}

/// Keeps the connection open, reading and dropping whatever comes, until the client leaves.
fn hold(conn: &mut TcpStream, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 16 * 1024];
    while !stop.load(Ordering::SeqCst) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

fn serve(mut conn: TcpStream, behaviour: Behaviour, stop: &AtomicBool) {
    let patience = Duration::from_secs(30);
    match behaviour {
        Behaviour::Forward(target) => {
            let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(5)) else {
                return;
            };
            let (Ok(c2), Ok(s2)) = (conn.try_clone(), server.try_clone()) else {
                return;
            };
            let up = std::thread::spawn(move || pump(c2, s2));
            pump(server, conn);
            let _ = up.join();
        }
        Behaviour::Close => {
            let _ = conn.shutdown(Shutdown::Both);
        }
        Behaviour::Send {
            bytes,
            after_request,
        } => {
            if after_request && read_request(&mut conn, stop, patience).is_none() {
                return;
            }
            let _ = conn.write_all(&bytes);
            hold(&mut conn, stop);
        }
        Behaviour::Trickle {
            bytes,
            every,
            after_request,
        } => {
            if after_request && read_request(&mut conn, stop, patience).is_none() {
                return;
            }
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let b = bytes.get(i).copied().unwrap_or(b'x');
                if conn.write_all(&[b]).is_err() {
                    return;
                }
                i += 1;
                std::thread::sleep(every);
            }
        }
        Behaviour::Http => {
            let until = Instant::now() + patience;
            let mut got = Vec::new();
            while !got.windows(2).any(|w| w == b"\r\n") {
                if Instant::now() > until || stop.load(Ordering::SeqCst) {
                    return;
                }
                match read_request(&mut conn, stop, Duration::from_millis(200)) {
                    Some(b) => got.extend(b),
                    None => return,
                }
            }
            let body = "<h1>Bad Request</h1>";
            let _ = conn.write_all(
                format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = conn.shutdown(Shutdown::Both);
        }
        Behaviour::ErrorPerCommand(line) => {
            while !stop.load(Ordering::SeqCst) {
                let Some(got) = read_request(&mut conn, stop, patience) else {
                    return;
                };
                // Every command is a RESP array: `*` at the start or after a CRLF.
                let commands = usize::from(got.first() == Some(&b'*'))
                    + got.windows(3).filter(|w| w == b"\r\n*").count();
                for _ in 0..commands {
                    if conn.write_all(format!("-{line}\r\n").as_bytes()).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

/// A listening socket whose queue is full and which never accepts: connecting to it never
/// completes (the kernel drops the SYN), as with a server too busy to accept.
struct FullQueue {
    _listener: socket2::Socket,
    _held: Vec<TcpStream>,
    port: u16,
}

impl FullQueue {
    fn new() -> FullQueue {
        use socket2::{Domain, SockAddr, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        s.bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0))))
            .expect("bind");
        s.listen(0).expect("listen");
        let addr = s
            .local_addr()
            .expect("address")
            .as_socket()
            .expect("inet address");
        let mut held = Vec::new();
        for _ in 0..16 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
                Ok(c) => held.push(c),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return FullQueue {
                        _listener: s,
                        _held: held,
                        port: addr.port(),
                    };
                }
                Err(e) => panic!("filling the listen queue: {e}"),
            }
        }
        panic!("the listen queue of a backlog-0 socket never filled: connects kept completing");
    }
}

/// A store fault for the database campaigns.
struct NetFault {
    name: &'static str,
    /// Words of the cause, one of which the error line must hold (empty: any).
    cause: &'static [&'static str],
    /// Where the store is pointed (the fault server's port unless the fault has its own).
    port: Option<u16>,
}

/// A fault of this name whose error line holds one of `cause` (empty: any), on the fault
/// server.
fn fault(name: &'static str, cause: &'static [&'static str]) -> NetFault {
    NetFault {
        name,
        cause,
        port: None,
    }
}

/// A database campaign: the store behind the fault server, a configuration whose store section
/// `store` makes for a port and a policy.
struct NetCampaign<'a> {
    name: &'static str,
    began: Instant,
    target: SocketAddr,
    server: FaultServer,
    setup: Setup,
    store: &'a dyn Fn(u16, Policy) -> Value,
    bound: Duration,
    secrets: &'a [&'a str],
}

impl<'a> NetCampaign<'a> {
    /// Starts the fault server in front of `target` and checks that the store works through it
    /// (creating its tables), from `addr`.
    fn start(
        (name, began): (&'static str, Instant),
        target: SocketAddr,
        store: &'a dyn Fn(u16, Policy) -> Value,
        (bound, secrets): (Duration, &'a [&'a str]),
        addr: &str,
    ) -> NetCampaign<'a> {
        let c = NetCampaign {
            name,
            began,
            target,
            server: FaultServer::start(Behaviour::Forward(target)),
            setup: Setup::builder(&format!("faults-{name}"))
                .rules(rules())
                .write(),
            store,
            bound,
            secrets,
        };
        c.write_cfg(c.server.port(), Policy::Deny);
        let a = Runner::default().ask(&c.setup.config_path, addr, bound);
        assert!(
            a.status == Some(200) && a.limited,
            "before any fault: {}",
            a.everything
        );
        c
    }

    fn write_cfg(&self, port: u16, policy: Policy) {
        self.setup
            .edit_config(|c| c["store"] = (self.store)(port, policy));
    }

    /// Each fault under each policy, from addresses 203.0.113.(`first` + 1)...: `plant(i, addr)`
    /// sets fault `i` up (what it returns is held until the fault is undone), `undo(i)` takes
    /// it away again once the server forwards.
    fn run<H>(
        &self,
        faults: &[NetFault],
        first: usize,
        mut plant: impl FnMut(usize, &str, &FaultServer) -> H,
        mut undo: impl FnMut(usize),
    ) {
        let mut table = Table::new(self.name);
        let mut n = first;
        for (i, fault) in faults.iter().enumerate() {
            for policy in Policy::BOTH {
                n += 1;
                let addr = format!("203.0.113.{n}");
                let mut held = Some(plant(i, &addr, &self.server));
                let mut undo = || {
                    self.server.set(Behaviour::Forward(self.target));
                    undo(i);
                    held.take();
                };
                let row = self.case(fault, policy, &addr, &mut undo);
                table.add(row);
            }
        }
        eprintln!("{} campaign: {} ms", self.name, ms(self.began.elapsed()));
        table.finish();
    }

    /// One fault under one policy: the faulted request, then (after `undo`) the exact limit
    /// through the real server.
    fn case(&self, fault: &NetFault, policy: Policy, addr: &str, undo: &mut dyn FnMut()) -> Row {
        let (runner, bound, secrets) = (Runner::default(), self.bound, self.secrets);
        let (provider, cfg) = (&self.setup.provider, &self.setup.config_path);
        let fault_port = self.server.port();
        self.write_cfg(fault.port.unwrap_or(fault_port), policy);
        let calls = provider.calls();
        let a = runner.ask(cfg, addr, bound);
        let calls = provider.calls() - calls;
        let mut problems = check_answered(&a, bound, secrets);
        let place = format!("{} store", self.name);
        problems.extend(check_expected(
            &a,
            Expect::Policy,
            policy,
            calls,
            &place,
            fault.cause,
        ));
        undo();
        self.write_cfg(fault_port, policy);
        problems.extend(check_exact(
            || runner.ask(cfg, addr, bound),
            provider,
            0,
            bound,
            secrets,
        ));
        Row {
            fault: fault.name.to_owned(),
            policy: policy.name(),
            status: a.status_text(),
            took: a.took,
            bound,
            calls: calls.to_string(),
            log: a.log_line(),
            problems,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MySQL

fn mysql_opts(db: &MariaDb) -> mysql::Opts {
    mysql::OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(db.port())
        .prefer_socket(false)
        .user(Some(db.user()))
        .pass(Some(db.password()))
        .db_name(Some(db.database()))
        .into()
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs MariaDB: cargo test --features servers"
)]
fn mysql_faults_follow_the_policy_within_the_timeout_and_limiting_resumes() {
    use mysql::prelude::Queryable;
    let began = Instant::now();
    let db = MariaDb::builder("faults").max_connections(8).start();
    let password = db.password().to_owned();
    let store = |port: u16, policy: Policy| {
        json!({"kind": "mysql", "host": "127.0.0.1", "port": port,
               "user": db.user(), "password": db.password(), "database": db.database(),
               "connect_timeout_ms": CONNECT_MS, "read_timeout_ms": READ_MS,
               "on_error": policy.name(), "deny_retry_after_secs": DENY_RETRY_AFTER,
               "sweep_one_in": 0})
    };
    let secrets = [TOKEN, password.as_str()];
    // Through the fault server, forwarding: the store works (and creates its tables).
    let campaign = NetCampaign::start(
        ("mysql", began),
        db.addr(),
        &store,
        (mysql_bound(), &secrets),
        "203.0.113.1",
    );

    let full = FullQueue::new();
    let faults = [
        fault("accepts and closes at once", &[]),
        NetFault {
            port: Some(full.port),
            ..fault(
                "connection never completes (listen queue full)",
                &["timed out", "store.connect_timeout_ms"],
            )
        },
        fault("answers 4 KiB of random bytes", &[]),
        fault(
            "another service on the port: an HTTP server",
            &["no answer in time", "too slowly"],
        ),
        fault(
            "greeting claims a 16 MiB packet, then silence",
            &["max_allowed_packet"],
        ),
        fault(
            "greeting trickles, one byte every 200 ms",
            &["no answer in time", "too slowly"],
        ),
        fault(
            "server out of connections (max_connections held)",
            &["1040", "Too many connections"],
        ),
        fault(
            "server read-only (SET GLOBAL read_only = 1)",
            &["1290", "read-only", "read_only"],
        ),
        fault(
            "the key's row locked by another transaction",
            &["1205", "no answer in time", "too slowly"],
        ),
    ];
    let mut greeting = vec![0x4a, 0, 0, 0, 0x0a];
    greeting.extend_from_slice(b"5.5.5-10.11.19-MariaDB\0");
    campaign.run(
        &faults,
        10,
        |i, addr, server| {
            let mut held: Vec<mysql::Conn> = Vec::new();
            match i {
                0 => server.set(Behaviour::Close),
                1 => {}
                2 => server.set(Behaviour::Send {
                    bytes: noise(4096, 0x2545_f491_4f6c_dd1d),
                    after_request: false,
                }),
                3 => server.set(Behaviour::Http),
                4 => {
                    let mut b = vec![0xff, 0xff, 0xff, 0x00, 0x0a];
                    b.extend_from_slice(&[b'x'; 100]);
                    server.set(Behaviour::Send {
                        bytes: b,
                        after_request: false,
                    });
                }
                5 => server.set(Behaviour::Trickle {
                    bytes: greeting.clone(),
                    every: Duration::from_millis(200),
                    after_request: false,
                }),
                6 => {
                    for _ in 0..64 {
                        match mysql::Conn::new(mysql_opts(&db)) {
                            Ok(c) => held.push(c),
                            Err(mysql::Error::MySqlError(e)) if e.code == 1040 => break,
                            Err(e) => panic!("holding connections: {e}"),
                        }
                    }
                    assert!(held.len() < 64, "max_connections never reached");
                }
                7 => {
                    db.root_sql("SET GLOBAL read_only = 1");
                }
                8 => {
                    let mut c = mysql::Conn::new(mysql_opts(&db)).expect("connect");
                    c.query_drop("START TRANSACTION").expect("begin");
                    c.exec_drop(
                        "INSERT INTO rate_counters (rkey, start_ms, window_ms, count, expires_ms) \
                         VALUES (?, 0, 0, 0, 0) ON DUPLICATE KEY UPDATE count = count",
                        (format!("resolve:ip:{addr}"),),
                    )
                    .expect("lock the row");
                    held.push(c);
                }
                _ => unreachable!(),
            }
            // Dropped when the fault is undone: rolls back the held transaction, frees the
            // connections.
            held
        },
        |i| {
            if i == 7 {
                db.root_sql("SET GLOBAL read_only = 0");
            }
        },
    );
    drop(full);
}

// ---------------------------------------------------------------------------------------------
// Redis

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn redis_faults_follow_the_policy_within_the_timeout_and_limiting_resumes() {
    let began = Instant::now();
    let password = "faults-REDISPW-7f3a";
    let redis = Redis::builder("faults").password(password).start();
    let store = |port: u16, policy: Policy| {
        json!({"kind": "redis", "host": "127.0.0.1", "port": port, "password": password,
               "connect_timeout_ms": CONNECT_MS, "read_timeout_ms": READ_MS,
               "on_error": policy.name(), "deny_retry_after_secs": DENY_RETRY_AFTER})
    };
    let secrets = [TOKEN, password];
    let campaign = NetCampaign::start(
        ("redis", began),
        redis.addr(),
        &store,
        (redis_bound(), &secrets),
        "203.0.113.201",
    );

    let full = FullQueue::new();
    let faults = [
        fault("accepts and closes at once", &["closed"]),
        NetFault {
            port: Some(full.port),
            ..fault(
                "connection never completes (listen queue full)",
                &["timed out"],
            )
        },
        fault("answers 4 KiB of random bytes", &[]),
        fault(
            "another service on the port: an HTTP server",
            &["unknown reply type"],
        ),
        fault("answers a 1 GiB bulk string length", &["bad bulk length"]),
        fault(
            "answer trickles, one byte every 200 ms",
            &["timed out", "in time"],
        ),
        fault("-LOADING to every command", &["LOADING"]),
        fault("out of memory (maxmemory 1 MB, noeviction)", &["OOM"]),
        fault(
            "read-only replica (REPLICAOF an absent master)",
            &["READONLY", "read only"],
        ),
    ];
    campaign.run(
        &faults,
        210,
        |i, _, server| match i {
            0 => server.set(Behaviour::Close),
            1 => {}
            2 => server.set(Behaviour::Send {
                bytes: noise(4096, 0x2545_f491_4f6c_dd1d),
                after_request: true,
            }),
            3 => server.set(Behaviour::Http),
            4 => server.set(Behaviour::Send {
                bytes: b"$1073741824\r\n".to_vec(),
                after_request: true,
            }),
            5 => server.set(Behaviour::Trickle {
                bytes: b"+PONG".to_vec(),
                every: Duration::from_millis(200),
                after_request: true,
            }),
            6 => server.set(Behaviour::ErrorPerCommand(
                "LOADING Redis is loading the dataset in memory".to_owned(),
            )),
            7 => {
                expect_ok(&redis, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
                expect_ok(&redis, &["SET", "filler", &"x".repeat(4 << 20)]);
                expect_ok(&redis, &["CONFIG", "SET", "maxmemory", "1mb"]);
            }
            8 => {
                let port = free_port().to_string();
                expect_ok(&redis, &["REPLICAOF", "127.0.0.1", &port]);
            }
            _ => unreachable!(),
        },
        |i| {
            if i == 7 {
                expect_ok(&redis, &["CONFIG", "SET", "maxmemory", "0"]);
                redis.cmd(&["DEL", "filler"]);
            }
            if i == 8 {
                expect_ok(&redis, &["REPLICAOF", "NO", "ONE"]);
            }
        },
    );
    drop(full);
}

fn expect_ok(redis: &Redis, args: &[&str]) {
    let r = redis.cmd(args);
    assert!(!r.is_error(), "redis {:?}: {r}", &args[..args.len().min(3)]);
}

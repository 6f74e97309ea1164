//! What the servers the harness starts share: for MariaDB and Redis, the process started with its output appended to a log, waited for until it answers, stopped gently or killed, restarted, and its log shown when a test fails; for Apache too, starting again on another port when the free one was taken meanwhile, and reading logs.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::temp::TempDir;

/// A server process, or none while it is stopped.
#[derive(Debug, Default)]
pub struct ServerProcess {
    child: Option<Child>,
}

impl ServerProcess {
    /// Starts `cmd` with standard input closed and its output appended to `log`.
    pub fn spawn(&mut self, cmd: &mut Command, log: &Path) {
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().expect("clone the log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        self.child = Some(child);
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// How it ended, when it has (it is then forgotten).
    fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// SIGTERM, then SIGKILL when it still runs after `grace`; false when it had to be killed.
    pub fn stop(&mut self, grace: Duration) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        signal("TERM", child.id());
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// SIGKILL, no shutdown.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A server the harness runs.
pub trait Server {
    /// Its name in messages: "mariadb", "redis".
    const NAME: &'static str;

    /// Its process, its directory and its port.
    fn parts(&mut self) -> (&mut ServerProcess, &mut TempDir, u16);

    /// Whether it answers now.
    fn answers(&self) -> bool;

    /// What it printed so far, for messages.
    fn output(&self) -> String;
}

/// Waits until `server` answers, polling every `poll`; Err (with what it printed) when it exits
/// first or `timeout` passes.
pub fn wait_ready<S: Server>(
    server: &mut S,
    timeout: Duration,
    poll: Duration,
) -> Result<(), String> {
    let until = Instant::now() + timeout;
    loop {
        if let Some(status) = server.parts().0.exited() {
            return Err(format!(
                "{} exited at start-up ({status})\n{}",
                S::NAME,
                server.output()
            ));
        }
        if server.answers() {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "{} did not answer within {timeout:?}\n{}",
                S::NAME,
                server.output()
            ));
        }
        std::thread::sleep(poll);
    }
}

/// After a restart that began at `began`: panics (keeping the server's directory) when it did
/// not come back, else says how long it took.
pub fn restarted<S: Server>(server: &mut S, began: Instant, result: Result<(), String>) {
    let (process, dir, port) = server.parts();
    if let Err(e) = result {
        process.kill();
        dir.keep();
        panic!("{} did not restart: {e}", S::NAME);
    }
    eprintln!(
        "{}: restarted in {} ms (port {port})",
        S::NAME,
        began.elapsed().as_millis(),
    );
}

/// When the test is failing, shows `log` (the file at `path`) under `title`: for a server's
/// `Drop`.
pub fn show_if_failing(title: &str, path: &Path, log: impl FnOnce() -> String) {
    if std::thread::panicking() {
        eprintln!("{title} ({}):\n{}", path.display(), log());
    }
}

/// Runs `attempt` until it starts a server, again (up to 5 times) when the port it picked was
/// taken by someone else before the server bound it; panics with the last reason.
pub fn start_retrying<T>(what: &str, mut attempt: impl FnMut() -> Result<T, (String, bool)>) -> T {
    let mut last_error = String::new();
    for _ in 0..5 {
        match attempt() {
            Ok(server) => return server,
            Err((e, port_taken)) => {
                last_error = e;
                if !port_taken {
                    break;
                }
            }
        }
    }
    panic!("{what} did not start: {last_error}");
}

/// Whether start-up `output` says the port was taken.
pub fn port_taken(output: &str) -> bool {
    output.contains("Address already in use")
}

/// Starts `cmd` as the leader of a process group of its own (so that what it starts can be
/// ended with it: `kill -SIG -- -PID`), standard input closed, its output to `stdout` and
/// `stderr`; `what` names it when it cannot be started.
pub fn spawn_group(
    cmd: &mut Command,
    stdout: impl Into<Stdio>,
    stderr: impl Into<Stdio>,
    what: &str,
) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"))
}

/// `kill -SIG pid`, quietly.
pub fn signal(sig: &str, pid: u32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A file's text, lossily; empty when it cannot be read.
pub fn read_lossy(path: &Path) -> String {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

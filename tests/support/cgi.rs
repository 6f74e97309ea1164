//! Runs a program directly as a CGI program, with the environment Apache would give it, and parses and checks its answer.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::client::Response;
use super::http::find;
use super::system::binary;

/// What the program gets on stdin.
#[derive(Clone, Debug)]
pub enum StdinMode {
    /// These bytes from a file, then EOF. Lets the run report how many bytes the program read.
    File(Vec<u8>),
    /// These bytes through a pipe that stays open (no EOF) until the program exits, as a
    /// server that does not close the request body may do.
    HeldOpen(Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct Cgi {
    program: PathBuf,
    vars: BTreeMap<OsString, OsString>,
    args: Vec<OsString>,
    stdin: StdinMode,
    timeout: Duration,
}

impl Cgi {
    /// A request to the binary under test with the variables Apache sets for
    /// `METHOD /cgi-bin/resolve?query` from 127.0.0.1 (no body).
    pub fn new(method: &str, query: impl AsRef<OsStr>) -> Cgi {
        Cgi::program(&binary(), method, query)
    }

    pub fn program(program: &Path, method: &str, query: impl AsRef<OsStr>) -> Cgi {
        let vars = apache_vars(program, method, query.as_ref().as_bytes())
            .into_iter()
            .map(|(k, v)| (k.into(), OsString::from_vec(v)))
            .collect();
        Cgi {
            program: program.to_path_buf(),
            vars,
            args: Vec::new(),
            stdin: StdinMode::File(Vec::new()),
            timeout: Duration::from_secs(20),
        }
    }

    /// `RESOLVE_CONFIG=<path>`.
    pub fn config(self, path: &Path) -> Cgi {
        self.var("RESOLVE_CONFIG", path.as_os_str())
    }

    pub fn var(mut self, name: &str, value: impl AsRef<OsStr>) -> Cgi {
        self.vars.insert(name.into(), value.as_ref().to_os_string());
        self
    }

    /// The variables the program is given, in the order its environment holds them (by name).
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(n, v)| (n.as_os_str(), v.as_os_str()))
    }

    pub fn has(&self, name: &str) -> bool {
        self.vars.contains_key(OsStr::new(name))
    }

    pub fn remove(mut self, name: &str) -> Cgi {
        self.vars.remove(OsStr::new(name));
        self
    }

    /// A request header, as `HTTP_<NAME>` the way Apache maps it.
    pub fn header(self, name: &str, value: impl AsRef<OsStr>) -> Cgi {
        let var = format!("HTTP_{}", name.to_ascii_uppercase().replace('-', "_"));
        self.var(&var, value)
    }

    /// A body with `CONTENT_LENGTH` = its length and this `CONTENT_TYPE`.
    pub fn body(self, content_type: &str, body: impl Into<Vec<u8>>) -> Cgi {
        let body = body.into();
        self.var("CONTENT_TYPE", content_type)
            .var("CONTENT_LENGTH", body.len().to_string())
            .stdin(StdinMode::File(body))
    }

    /// An `application/x-www-form-urlencoded` body.
    pub fn form(self, body: impl Into<Vec<u8>>) -> Cgi {
        self.body("application/x-www-form-urlencoded", body)
    }

    pub fn stdin(mut self, stdin: StdinMode) -> Cgi {
        self.stdin = stdin;
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cgi {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Cgi {
        self.timeout = timeout;
        self
    }

    /// Run with exactly these variables (nothing inherited) and wait, at most the timeout.
    pub fn run(&self) -> CgiOutput {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .env_clear()
            .envs(&self.vars)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut stdin_file = None;
        let mut held_writer = None;
        match &self.stdin {
            StdinMode::File(bytes) => {
                let mut f = anonymous_file();
                f.write_all(bytes).expect("write stdin file");
                f.seek(SeekFrom::Start(0)).expect("rewind stdin file");
                // The child's fd 0 shares this file offset: afterwards it tells how much it read.
                cmd.stdin(f.try_clone().expect("dup stdin file"));
                stdin_file = Some(f);
            }
            StdinMode::HeldOpen(bytes) => {
                let (reader, mut writer) = std::io::pipe().expect("pipe");
                writer.write_all(bytes).expect("write stdin pipe");
                cmd.stdin(reader);
                held_writer = Some(writer);
            }
        }
        let start = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.program.display()));
        drop(cmd);
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let out_t = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let err_t = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        let mut timed_out = false;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for CGI program") {
                break status;
            }
            if start.elapsed() > self.timeout {
                timed_out = true;
                let _ = child.kill();
                break child.wait().expect("wait for killed CGI program");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = start.elapsed();
        drop(held_writer);
        let stdout = out_t.join().expect("stdout reader");
        let stderr = String::from_utf8_lossy(&err_t.join().expect("stderr reader")).into_owned();
        let stdin_read = stdin_file.map(|mut f| f.stream_position().expect("stdin offset"));
        let answer = Response::parse_cgi(&stdout);
        CgiOutput {
            stdout,
            stderr,
            status,
            timed_out,
            elapsed,
            stdin_read,
            answer,
        }
    }
}

/// The binary under test as a CGI program answering one GET of `query` from `addr`, with
/// the configuration at `config` and no more than the variables a CGI request cannot do
/// without (nothing inherited), on an empty stdin: for a test that runs it as a [`Command`]
/// of its own (more variables, its own waiting) rather than as a [`Cgi`].
pub fn bare_get(config: &Path, query: &str, addr: &str) -> Command {
    let mut cmd = Command::new(binary());
    cmd.env_clear()
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("REQUEST_METHOD", "GET")
        .env("QUERY_STRING", query)
        .env("REMOTE_ADDR", addr)
        .env("RESOLVE_CONFIG", config)
        .stdin(Stdio::null());
    cmd
}

/// The variables Apache sets when `program` answers `METHOD /cgi-bin/resolve?query` from
/// 127.0.0.1 (no body).
pub fn apache_vars(program: &Path, method: &str, query: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut uri = b"/cgi-bin/resolve".to_vec();
    if !query.is_empty() {
        uri.push(b'?');
        uri.extend_from_slice(query);
    }
    let standard: &[(&str, &str)] = &[
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("SERVER_SOFTWARE", "Apache/2.4"),
        ("SERVER_NAME", "127.0.0.1"),
        ("SERVER_ADDR", "127.0.0.1"),
        ("SERVER_PORT", "80"),
        ("SERVER_ADMIN", "[no address given]"),
        ("SERVER_SIGNATURE", ""),
        ("REQUEST_SCHEME", "http"),
        ("SCRIPT_NAME", "/cgi-bin/resolve"),
        ("CONTEXT_PREFIX", "/cgi-bin/"),
        ("DOCUMENT_ROOT", "/var/www/html"),
        ("CONTEXT_DOCUMENT_ROOT", "/var/www/cgi-bin/"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", "40000"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HTTP_HOST", "127.0.0.1"),
        ("HTTP_USER_AGENT", "resolve-tests"),
        ("REQUEST_METHOD", method),
    ];
    let mut vars: Vec<(String, Vec<u8>)> = standard
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    vars.push(("QUERY_STRING".into(), query.to_vec()));
    vars.push(("REQUEST_URI".into(), uri));
    vars.push((
        "SCRIPT_FILENAME".into(),
        program.as_os_str().as_bytes().to_vec(),
    ));
    vars
}

/// An unlinked temp file.
fn anonymous_file() -> fs::File {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "resolve-test-stdin-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let _ = fs::remove_file(&path);
    f
}

#[derive(Debug)]
pub struct CgiOutput {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub status: ExitStatus,
    pub timed_out: bool,
    pub elapsed: Duration,
    /// Bytes of stdin the program consumed (`StdinMode::File` only).
    pub stdin_read: Option<u64>,
    /// The parsed answer, or why stdout is not a valid CGI answer.
    pub answer: Result<Response, String>,
}

impl CgiOutput {
    /// The answer; panics with the whole output when stdout is not a valid CGI answer.
    pub fn answer(&self) -> &Response {
        match &self.answer {
            Ok(a) => a,
            Err(e) => panic!("{e}\n{}", self.describe()),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "exit: {}{}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            if self.timed_out { " (timed out)" } else { "" },
            String::from_utf8_lossy(&self.stdout),
            self.stderr
        )
    }
}

impl Response {
    /// Parse stdout per RFC 3875 section 6 and check it is a document response Apache would
    /// accept: header lines `Name: value` with a token name, each CGI field at most once, a
    /// well-formed `Status`, a `Content-Type`, then a blank line.
    pub fn parse_cgi(stdout: &[u8]) -> Result<Response, String> {
        let (head_end, body_start) = match (
            find(stdout, b"\r\n\r\n").map(|i| (i, i + 4)),
            find(stdout, b"\n\n").map(|i| (i, i + 2)),
        ) {
            (Some(a), Some(b)) => {
                if a.0 < b.0 {
                    a
                } else {
                    b
                }
            }
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return Err("no blank line after the headers".to_string()),
        };
        if head_end == 0 {
            return Err("no headers".to_string());
        }
        let head = std::str::from_utf8(&stdout[..head_end])
            .map_err(|_| "headers are not UTF-8".to_string())?;
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in head.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.contains('\r') {
                return Err(format!("bare CR in header line {line:?}"));
            }
            if line.starts_with([' ', '\t']) {
                return Err(format!("continuation line {line:?}"));
            }
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| format!("header line without ':' {line:?}"))?;
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
            {
                return Err(format!("bad header name {name:?}"));
            }
            if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(format!("control character in header {line:?}"));
            }
            if headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name)) {
                return Err(format!("header {name} sent twice"));
            }
            headers.push((name.to_string(), value.trim().to_string()));
        }
        let get = |n: &str| super::http::header(&headers, n).map(str::to_owned);
        let (status, reason) = match get("Status") {
            Some(s) => {
                let (code, reason) = s
                    .split_once(' ')
                    .ok_or_else(|| format!("Status without reason phrase {s:?}"))?;
                if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("bad Status {s:?}"));
                }
                (code.parse().unwrap(), reason.to_string())
            }
            None if get("Location").is_some() => (302, "Found".to_string()),
            None => (200, "OK".to_string()),
        };
        if get("Location").is_none() && get("Content-Type").is_none() {
            return Err("document response without Content-Type".to_string());
        }
        Ok(Response {
            status,
            reason,
            headers,
            body: stdout[body_start..].to_vec(),
        })
    }
}

//! The binary as a FastCGI process without a web server: started with a listening Unix socket as standard input, as mod_fcgid starts it, and spoken to in FastCGI records by a small client written from the specification (independent of the crate's own encoder).

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::cgi::{Cgi, apache_vars};
use super::client::Response;
use super::system::binary;
use super::temp::TempDir;

/// Record types and flag and status values, named as in the specification's fcgi.h.
pub const FCGI_BEGIN_REQUEST: u8 = 1;
pub const FCGI_ABORT_REQUEST: u8 = 2;
pub const FCGI_END_REQUEST: u8 = 3;
pub const FCGI_PARAMS: u8 = 4;
pub const FCGI_STDIN: u8 = 5;
pub const FCGI_STDOUT: u8 = 6;
pub const FCGI_STDERR: u8 = 7;
pub const FCGI_GET_VALUES: u8 = 9;
pub const FCGI_GET_VALUES_RESULT: u8 = 10;
pub const FCGI_UNKNOWN_TYPE: u8 = 11;
pub const FCGI_KEEP_CONN: u8 = 1;
pub const FCGI_REQUEST_COMPLETE: u8 = 0;
pub const FCGI_CANT_MPX_CONN: u8 = 1;
pub const FCGI_UNKNOWN_ROLE: u8 = 3;

/// One record: header (version 1), content, no padding.
pub fn record(kind: u8, id: u16, content: &[u8]) -> Vec<u8> {
    assert!(content.len() <= 0xffff);
    let mut out = vec![
        1,
        kind,
        (id >> 8) as u8,
        id as u8,
        (content.len() >> 8) as u8,
        content.len() as u8,
        0,
        0,
    ];
    out.extend_from_slice(content);
    out
}

/// A whole stream: records of at most 65535 bytes, then the empty one.
pub fn stream(kind: u8, id: u16, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(0xffff) {
        out.extend(record(kind, id, chunk));
    }
    out.extend(record(kind, id, &[]));
    out
}

/// Name-value pairs: lengths below 128 in one byte, others in four with the top bit set.
pub fn pairs(list: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in list {
        for len in [name.len(), value.len()] {
            if len < 128 {
                out.push(len as u8);
            } else {
                out.extend_from_slice(&(len as u32 | 0x8000_0000).to_be_bytes());
            }
        }
        out.extend_from_slice(name);
        out.extend_from_slice(value);
    }
    out
}

/// Parses name-value pairs; panics on malformed ones.
pub fn parse_pairs(mut data: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    fn len(data: &mut &[u8]) -> usize {
        if data[0] < 128 {
            let n = data[0] as usize;
            *data = &data[1..];
            n
        } else {
            let n = u32::from_be_bytes([data[0] & 0x7f, data[1], data[2], data[3]]) as usize;
            *data = &data[4..];
            n
        }
    }
    let mut out = Vec::new();
    while !data.is_empty() {
        let n = len(&mut data);
        let v = len(&mut data);
        out.push((data[..n].to_vec(), data[n..n + v].to_vec()));
        data = &data[n + v..];
    }
    out
}

/// FCGI_BEGIN_REQUEST with this role and flags.
pub fn begin(id: u16, role: u16, flags: u8) -> Vec<u8> {
    record(
        FCGI_BEGIN_REQUEST,
        id,
        &[(role >> 8) as u8, role as u8, flags, 0, 0, 0, 0, 0],
    )
}

/// A record as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub kind: u8,
    pub id: u16,
    pub content: Vec<u8>,
}

/// Reads one record; None at a clean end of the connection.
pub fn read_record(s: &mut impl Read) -> io::Result<Option<Rec>> {
    let mut header = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match s.read(&mut header[got..])? {
            0 if got == 0 => return Ok(None),
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut header")),
            n => got += n,
        }
    }
    assert_eq!(header[0], 1, "record version");
    let len = u16::from_be_bytes([header[4], header[5]]) as usize;
    let mut content = vec![0u8; len + header[6] as usize];
    s.read_exact(&mut content)?;
    content.truncate(len);
    Ok(Some(Rec {
        kind: header[1],
        id: u16::from_be_bytes([header[2], header[3]]),
        content,
    }))
}

/// The answer to one request: its FCGI_STDOUT and FCGI_STDERR streams and FCGI_END_REQUEST.
#[derive(Clone, Debug)]
pub struct FcgiAnswer {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub app_status: u32,
    pub protocol_status: u8,
}

impl FcgiAnswer {
    /// FCGI_STDOUT parsed as a CGI answer (the checks Apache makes).
    pub fn cgi(&self) -> Response {
        Response::parse_cgi(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: not a CGI answer:\n{}",
                String::from_utf8_lossy(&self.stdout)
            )
        })
    }
}

/// Reads records of request `id` until its FCGI_END_REQUEST.
pub fn read_answer(s: &mut impl Read, id: u16) -> io::Result<FcgiAnswer> {
    let mut a = FcgiAnswer {
        stdout: Vec::new(),
        stderr: Vec::new(),
        app_status: 0,
        protocol_status: 255,
    };
    let mut stdout_ended = false;
    loop {
        let r = read_record(s)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before FCGI_END_REQUEST",
            )
        })?;
        assert_eq!(r.id, id, "a record for another request: {r:?}");
        match r.kind {
            FCGI_STDOUT if r.content.is_empty() => stdout_ended = true,
            FCGI_STDOUT => {
                assert!(!stdout_ended, "FCGI_STDOUT after the end of its stream");
                a.stdout.extend_from_slice(&r.content);
            }
            FCGI_STDERR => a.stderr.extend_from_slice(&r.content),
            FCGI_END_REQUEST => {
                assert_eq!(r.content.len(), 8, "FCGI_END_REQUEST body");
                assert!(
                    stdout_ended || a.stdout.is_empty(),
                    "FCGI_END_REQUEST before the end of FCGI_STDOUT"
                );
                a.app_status =
                    u32::from_be_bytes([r.content[0], r.content[1], r.content[2], r.content[3]]);
                a.protocol_status = r.content[4];
                return Ok(a);
            }
            other => panic!("unexpected record type {other} for request {id}"),
        }
    }
}

/// One request's variables and body, as a web server would send them.
#[derive(Clone, Debug)]
pub struct FcgiRequest {
    pub vars: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl FcgiRequest {
    /// `METHOD /cgi-bin/resolve?query` from 127.0.0.1, with the variables Apache sets.
    pub fn new(method: &str, query: &str) -> FcgiRequest {
        FcgiRequest {
            vars: apache_vars(&binary(), method, query.as_bytes()),
            body: Vec::new(),
        }
    }

    pub fn var(mut self, name: &str, value: impl AsRef<[u8]>) -> FcgiRequest {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), value.as_ref().to_vec()));
        self
    }

    pub fn header(self, name: &str, value: &str) -> FcgiRequest {
        let var = format!("HTTP_{}", name.to_ascii_uppercase().replace('-', "_"));
        self.var(&var, value)
    }

    /// A form body with its CONTENT_TYPE and CONTENT_LENGTH.
    pub fn form(mut self, body: &str) -> FcgiRequest {
        self.body = body.as_bytes().to_vec();
        self.var("CONTENT_TYPE", "application/x-www-form-urlencoded")
            .var("CONTENT_LENGTH", body.len().to_string())
    }

    /// The records of this request: FCGI_BEGIN_REQUEST, FCGI_PARAMS, FCGI_STDIN.
    pub fn records(&self, id: u16, flags: u8) -> Vec<u8> {
        let list: Vec<(&[u8], &[u8])> = self
            .vars
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_slice()))
            .collect();
        let mut out = begin(id, 1, flags);
        out.extend(stream(FCGI_PARAMS, id, &pairs(&list)));
        out.extend(stream(FCGI_STDIN, id, &self.body));
        out
    }

    /// The same request for the binary run as a CGI program.
    pub fn to_cgi(&self) -> Cgi {
        let method = self.get("REQUEST_METHOD").unwrap_or_default();
        let query = self.get("QUERY_STRING").unwrap_or_default();
        let mut cgi = Cgi::new(&method, &query);
        for (k, v) in &self.vars {
            cgi = cgi.var(
                k,
                std::ffi::OsStr::new(&String::from_utf8_lossy(v).into_owned()),
            );
        }
        if !self.body.is_empty() {
            cgi = cgi.stdin(super::cgi::StdinMode::File(self.body.clone()));
        }
        cgi
    }

    fn get(&self, name: &str) -> Option<String> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

/// The binary started as a FastCGI process on a Unix socket in its own temp dir; killed on drop.
pub struct FcgiProcess {
    child: Option<Child>,
    socket: PathBuf,
    stderr_path: PathBuf,
    _dir: TempDir,
}

impl FcgiProcess {
    /// With RESOLVE_CONFIG set to `config` in its environment (as FcgidInitialEnv sets it).
    pub fn start(config: &Path) -> FcgiProcess {
        FcgiProcess::start_with(&[("RESOLVE_CONFIG", config.to_str().expect("utf-8 path"))])
    }

    /// With exactly these environment variables.
    pub fn start_with(env: &[(&str, &str)]) -> FcgiProcess {
        let dir = TempDir::new("fcgi");
        let socket = dir.join("fcgi.sock");
        let listener = UnixListener::bind(&socket)
            .unwrap_or_else(|e| panic!("bind {}: {e}", socket.display()));
        let stderr_path = dir.join("stderr");
        let stderr = fs::File::create(&stderr_path).expect("create stderr file");
        let mut cmd = Command::new(binary());
        cmd.env_clear()
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary().display()));
        FcgiProcess {
            child: Some(child),
            socket,
            stderr_path,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn connect(&self) -> UnixStream {
        let s = UnixStream::connect(&self.socket)
            .unwrap_or_else(|e| panic!("connect {}: {e}", self.socket.display()));
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    }

    /// Sends `request` on a connection of its own (no FCGI_KEEP_CONN, as mod_fcgid does) and
    /// reads the answer.
    pub fn send(&self, request: &FcgiRequest) -> FcgiAnswer {
        let mut s = self.connect();
        s.write_all(&request.records(1, 0)).expect("send request");
        let answer = read_answer(&mut s, 1).expect("answer");
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "bytes after FCGI_END_REQUEST: {rest:?}");
        answer
    }

    /// What the process wrote to standard error so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.stderr_path).unwrap_or_default()).into_owned()
    }

    /// `kill -SIG pid`.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} failed");
    }

    /// The exit status, waiting at most `timeout`; None while it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let until = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for FcgiProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("FastCGI process stderr:\n{}", self.stderr());
        }
    }
}

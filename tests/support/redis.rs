//! A real Redis server (Debian's redis-server) on 127.0.0.1 and a Unix socket in its own temp dir, a tiny RESP client for assertions, stopped on drop.

use std::fmt;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::net::free_port;
use super::process::{
    Server, ServerProcess, port_taken, read_lossy, restarted, show_if_failing, start_retrying,
    wait_ready,
};
use super::system::{require, server_user};
use super::temp::TempDir;
use super::urlenc::encode;

pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Read/write timeout of the test client.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// How a client reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Tcp,
    Socket,
}

pub struct RedisBuilder {
    label: String,
    password: Option<String>,
    acl_user: Option<(String, String)>,
    args: Vec<String>,
    /// The CA's certificate, the server's certificate and key: TLS only on the port.
    tls: Option<(PathBuf, PathBuf, PathBuf)>,
}

impl RedisBuilder {
    /// TLS only on TCP (`--port 0`, `--tls-port PORT`) with the test CA's server certificate;
    /// no client certificate asked for. The Unix socket stays plain, for the test's client.
    pub fn tls(mut self, ca: &super::tls::TestCa) -> RedisBuilder {
        self.tls = Some((ca.ca(), ca.cert(), ca.key()));
        self
    }

    /// `--requirepass`: the `default` user needs this password.
    pub fn password(mut self, password: &str) -> RedisBuilder {
        self.password = Some(password.to_string());
        self
    }

    /// An ACL user with every permission (`user NAME on >PASS ~* &* +@all`). `url()` then
    /// names this user; the `default` user keeps its own setting (no password unless
    /// `password` was given).
    pub fn acl_user(mut self, name: &str, password: &str) -> RedisBuilder {
        self.acl_user = Some((name.to_string(), password.to_string()));
        self
    }

    /// One more command-line argument (`--maxclients`, `10`, ...), after the defaults.
    pub fn arg(mut self, arg: &str) -> RedisBuilder {
        self.args.push(arg.to_string());
        self
    }

    pub fn start(self) -> Redis {
        require(
            Path::new(REDIS_SERVER),
            "redis-server (package redis-server)",
        );
        start_retrying("redis", || self.try_start())
    }

    fn try_start(&self) -> Result<Redis, (String, bool)> {
        let began = Instant::now();
        let dir = TempDir::new(&format!("redis-{}", self.label));
        // When root, the server runs as the same unprivileged account as Apache's CGI
        // programs, so that they can use its mode-0700 socket.
        if let Some(u) = server_user() {
            std::os::unix::fs::chown(dir.path(), Some(u.uid), Some(u.gid))
                .unwrap_or_else(|e| panic!("chown {} to {}: {e}", dir.path().display(), u.name));
        }
        let socket = dir.join("redis.sock");
        assert!(
            socket.as_os_str().len() < 100,
            "socket path too long for a Unix socket: {} (set TMPDIR to a shorter directory)",
            socket.display()
        );
        let port = free_port();
        let d = dir.path().display().to_string();
        let (plain_port, tls_port) = match self.tls {
            Some(_) => (0, port),
            None => (port, 0),
        };
        let mut args: Vec<String> = [
            "--port",
            &plain_port.to_string(),
            "--tls-port",
            &tls_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--unixsocket",
            &socket.display().to_string(),
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &d,
            "--logfile",
            &format!("{d}/redis.log"),
            "--daemonize",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(p) = &self.password {
            args.extend(["--requirepass".to_string(), p.clone()]);
        }
        if let Some((name, pass)) = &self.acl_user {
            args.extend(
                [
                    "--user",
                    name,
                    "on",
                    &format!(">{pass}"),
                    "~*",
                    "&*",
                    "+@all",
                ]
                .iter()
                .map(|s| s.to_string()),
            );
        }
        if let Some((ca, cert, key)) = &self.tls {
            for (name, path) in [
                ("--tls-ca-cert-file", ca),
                ("--tls-cert-file", cert),
                ("--tls-key-file", key),
            ] {
                args.extend([name.to_string(), path.display().to_string()]);
            }
            args.extend(["--tls-auth-clients".to_string(), "no".to_string()]);
        }
        args.extend(self.args.iter().cloned());
        let mut redis = Redis {
            tls: self.tls.is_some(),
            port,
            socket,
            password: self.password.clone(),
            acl_user: self.acl_user.clone(),
            args,
            process: ServerProcess::default(),
            dir,
        };
        redis.spawn();
        if let Err(e) = wait_ready(&mut redis, READY_TIMEOUT, Duration::from_millis(20)) {
            redis.kill();
            if !port_taken(&e) {
                redis.dir.keep();
            }
            return Err((e.clone(), port_taken(&e)));
        }
        eprintln!(
            "redis {}: ready after {} ms (port {}, {})",
            self.label,
            began.elapsed().as_millis(),
            redis.port,
            redis.dir.path().display()
        );
        Ok(redis)
    }
}

pub struct Redis {
    /// The port speaks TLS only.
    tls: bool,
    port: u16,
    socket: PathBuf,
    password: Option<String>,
    acl_user: Option<(String, String)>,
    /// Server arguments, reused by `restart`.
    args: Vec<String>,
    process: ServerProcess,
    dir: TempDir,
}

impl Redis {
    /// No password.
    pub fn start() -> Redis {
        Redis::builder("kv").start()
    }

    /// `label` names the temp dir (`resolve-test-redis-<label>-...`).
    pub fn builder(label: &str) -> RedisBuilder {
        RedisBuilder {
            label: label.to_string(),
            password: None,
            acl_user: None,
            args: Vec::new(),
            tls: None,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The `default` user's password (`--requirepass`), if any.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The ACL user (name, password), if any.
    pub fn acl_user(&self) -> Option<(&str, &str)> {
        self.acl_user
            .as_ref()
            .map(|(n, p)| (n.as_str(), p.as_str()))
    }

    /// The credentials `url()` carries: the ACL user if there is one, else the default
    /// user's password.
    fn credentials(&self) -> (Option<&str>, Option<&str>) {
        match (&self.acl_user, &self.password) {
            (Some((n, p)), _) => (Some(n), Some(p)),
            (None, Some(p)) => (None, Some(p)),
            (None, None) => (None, None),
        }
    }

    /// `user:pass@`, `:pass@` or nothing, percent-encoded.
    fn userinfo(&self) -> String {
        match self.credentials() {
            (Some(u), Some(p)) => format!("{}:{}@", encode(u), encode(p)),
            (None, Some(p)) => format!(":{}@", encode(p)),
            _ => String::new(),
        }
    }

    /// `redis://[:PASS@]127.0.0.1:PORT/0` (`redis://USER:PASS@...` with an ACL user);
    /// `rediss://…@localhost:PORT/0` when the port speaks TLS (the certificate's name).
    pub fn url(&self) -> String {
        if self.tls {
            return format!("rediss://{}localhost:{}/0", self.userinfo(), self.port);
        }
        format!("redis://{}127.0.0.1:{}/0", self.userinfo(), self.port)
    }

    /// `unix://[:PASS@]/path/redis.sock?db=0` (`unix://USER:PASS@/...` with an ACL user), the
    /// form redis-py and node-redis read.
    pub fn unix_url(&self) -> String {
        format!("unix://{}{}?db=0", self.userinfo(), self.socket.display())
    }

    /// The instance's directory (redis.log, redis.sock).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        read_lossy(&self.dir.join("redis.log"))
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// A connection without authentication.
    pub fn connect_anonymous(&self, via: Via) -> io::Result<RespConn> {
        match via {
            Via::Tcp => RespConn::tcp(self.addr()),
            Via::Socket => RespConn::unix(&self.socket),
        }
    }

    /// A connection authenticated like `url()`.
    pub fn connect(&self, via: Via) -> io::Result<RespConn> {
        let mut c = self.connect_anonymous(via)?;
        let reply = match self.credentials() {
            (Some(u), Some(p)) => Some(c.cmd(&["AUTH", u, p])?),
            (None, Some(p)) => Some(c.cmd(&["AUTH", p])?),
            _ => None,
        };
        if let Some(Resp::Error(e)) = reply {
            return Err(io::Error::other(format!("AUTH: {e}")));
        }
        Ok(c)
    }

    /// How this test's own plain client reaches the server: its TCP port, or its Unix socket
    /// when the port speaks TLS only.
    pub fn via(&self) -> Via {
        if self.tls { Via::Socket } else { Via::Tcp }
    }

    /// One command on a fresh authenticated connection (TCP, or the Unix socket when the port
    /// speaks TLS only); panics when the server cannot be reached (error replies come back as
    /// `Resp::Error`).
    pub fn cmd(&self, args: &[&str]) -> Resp {
        self.cmd_via(self.via(), args)
    }

    /// `total_connections_received` from INFO (each call adds its own connection).
    pub fn connections_received(&self) -> u64 {
        let info = self.cmd(&["INFO", "stats"]).as_text().expect("INFO text");
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("total_connections_received")
    }

    pub fn cmd_via(&self, via: Via, args: &[&str]) -> Resp {
        self.connect(via)
            .and_then(|mut c| c.cmd(args))
            .unwrap_or_else(|e| panic!("redis {args:?} via {via:?} on port {}: {e}", self.port))
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(REDIS_SERVER);
        cmd.args(&self.args);
        if let Some(u) = server_user() {
            cmd.uid(u.uid).gid(u.gid);
        }
        let log = self.dir.join("redis-server.out");
        self.process.spawn(&mut cmd, &log);
    }

    fn ping(&self, via: Via) -> bool {
        self.connect(via)
            .and_then(|mut c| c.cmd(&["PING"]))
            .is_ok_and(|r| r == Resp::Simple("PONG".to_string()))
    }

    /// Clean stop (SIGTERM: no save, `--save ""`), SIGKILL after 10 s.
    pub fn stop(&mut self) {
        self.process.stop(Duration::from_secs(10));
    }

    /// SIGKILL (every key is lost: no persistence).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Start again on the same port and socket (stopping first if it runs); waits until ready.
    pub fn restart(&mut self) {
        self.stop();
        let began = Instant::now();
        self.spawn();
        // The port can stay busy for a moment after a kill: give it a few tries.
        let mut result = wait_ready(self, READY_TIMEOUT, Duration::from_millis(20));
        for _ in 0..20 {
            match &result {
                Err(e) if port_taken(e) => {
                    std::thread::sleep(Duration::from_millis(250));
                    self.spawn();
                    result = wait_ready(self, READY_TIMEOUT, Duration::from_millis(20));
                }
                _ => break,
            }
        }
        restarted(self, began, result);
    }
}

impl Server for Redis {
    const NAME: &'static str = "redis";

    fn parts(&mut self) -> (&mut ServerProcess, &mut TempDir, u16) {
        (&mut self.process, &mut self.dir, self.port)
    }

    fn answers(&self) -> bool {
        // A TLS port is checked by the program under test; the harness speaks plain.
        (self.tls || self.ping(Via::Tcp)) && self.ping(Via::Socket)
    }

    fn output(&self) -> String {
        format!(
            "command: {REDIS_SERVER} {:?}\nstdout/stderr: {}\nredis.log: {}",
            self.args,
            read_lossy(&self.dir.join("redis-server.out")),
            self.log()
        )
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        show_if_failing("redis log", &self.dir.join("redis.log"), || self.log());
        self.stop();
    }
}

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    /// `None` is the nil bulk string.
    Bulk(Option<Vec<u8>>),
    /// `None` is the nil array.
    Array(Option<Vec<Resp>>),
}

impl Resp {
    /// The text of a simple or bulk string (lossy UTF-8), or the number; `None` for nil,
    /// errors and arrays.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Resp::Simple(s) => Some(s.clone()),
            Resp::Int(n) => Some(n.to_string()),
            Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Resp::Error(_))
    }
}

/// redis-cli-like text: `OK`, `(integer) 3`, `"value"`, `(nil)`, `(error) ERR ...`, arrays
/// one element a line.
impl fmt::Display for Resp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resp::Simple(s) => write!(f, "{s}"),
            Resp::Error(e) => write!(f, "(error) {e}"),
            Resp::Int(n) => write!(f, "(integer) {n}"),
            Resp::Bulk(None) | Resp::Array(None) => write!(f, "(nil)"),
            Resp::Bulk(Some(b)) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Resp::Array(Some(items)) => {
                if items.is_empty() {
                    return write!(f, "(empty array)");
                }
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{}) {item}", i + 1)?;
                }
                Ok(())
            }
        }
    }
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A minimal RESP2 client over TCP or a Unix socket, with timeouts.
pub struct RespConn {
    reader: BufReader<Box<dyn Stream>>,
}

impl RespConn {
    pub fn tcp(addr: SocketAddr) -> io::Result<RespConn> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        s.set_nodelay(true)?;
        Ok(RespConn {
            reader: BufReader::new(Box::new(s)),
        })
    }

    pub fn unix(path: &Path) -> io::Result<RespConn> {
        let s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(RespConn {
            reader: BufReader::new(Box::new(s)),
        })
    }

    /// Send one command, read its reply. Err only for I/O or protocol trouble.
    pub fn cmd(&mut self, args: &[&str]) -> io::Result<Resp> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        let w = self.reader.get_mut();
        w.write_all(&out)?;
        w.flush()?;
        self.read_reply()
    }

    fn line(&mut self) -> io::Result<String> {
        let mut buf = Vec::new();
        self.reader.read_until(b'\n', &mut buf)?;
        if !buf.ends_with(b"\r\n") {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "connection closed mid-reply ({:?})",
                    String::from_utf8_lossy(&buf)
                ),
            ));
        }
        buf.truncate(buf.len() - 2);
        String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn read_reply(&mut self) -> io::Result<Resp> {
        let line = self.line()?;
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad RESP line {line:?}"),
            )
        };
        let (kind, rest) = line.split_at_checked(1).ok_or_else(bad)?;
        let number = || rest.parse::<i64>().map_err(|_| bad());
        Ok(match kind {
            "+" => Resp::Simple(rest.to_string()),
            "-" => Resp::Error(rest.to_string()),
            ":" => Resp::Int(number()?),
            "$" => {
                let n = number()?;
                if n < 0 {
                    Resp::Bulk(None)
                } else {
                    let mut b = vec![0u8; n as usize + 2];
                    self.reader.read_exact(&mut b)?;
                    b.truncate(n as usize);
                    Resp::Bulk(Some(b))
                }
            }
            "*" => {
                let n = number()?;
                if n < 0 {
                    Resp::Array(None)
                } else {
                    let mut items = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        items.push(self.read_reply()?);
                    }
                    Resp::Array(Some(items))
                }
            }
            _ => return Err(bad()),
        })
    }
}

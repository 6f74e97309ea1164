//! A real MariaDB server (Debian's mariadbd) on 127.0.0.1 and a Unix socket, with its own freshly installed datadir in a temp dir, stopped on drop.

use std::collections::hash_map::RandomState;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::net::free_port;
use super::process::{
    Server, ServerProcess, port_taken, read_lossy, restarted, show_if_failing, signal,
    start_retrying, tail, wait_ready,
};
use super::system::{is_root, require};
use super::temp::TempDir;
use super::urlenc::encode;

/// Server binaries, newest name first.
const SERVERS: &[&str] = &["/usr/sbin/mariadbd", "/usr/sbin/mysqld"];
const INSTALLERS: &[&str] = &["/usr/bin/mariadb-install-db", "/usr/bin/mysql_install_db"];
const CLIENTS: &[&str] = &["/usr/bin/mariadb", "/usr/bin/mysql"];

/// The database and account every instance creates.
pub const DATABASE: &str = "resolve_test";
pub const USER: &str = "resolve";

/// How long start-up (and restart) may take before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one `mariadb` client run may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Small memory settings so that an instance starts in well under a second. Redo log writes
/// reach the OS at every commit but are synced once a second
/// (`innodb_flush_log_at_trx_commit=2`): committed rows survive a SIGKILL of the server, not a
/// power cut. Pass `.arg("--innodb-flush-log-at-trx-commit=1")` for full durability.
const SIZING: &[&str] = &[
    "--innodb-buffer-pool-size=16M",
    "--innodb-log-file-size=8M",
    "--innodb-log-buffer-size=2M",
    "--innodb-use-native-aio=0",
    "--key-buffer-size=1M",
    "--aria-pagecache-buffer-size=8M",
];

/// How a client reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// TCP to 127.0.0.1:port.
    Tcp,
    /// TCP to another port on 127.0.0.1 (a proxy in front of the server).
    TcpPort(u16),
    /// The Unix socket.
    Socket,
}

pub struct MariaDbBuilder {
    label: String,
    max_connections: u32,
    password: Option<String>,
    args: Vec<String>,
}

impl MariaDbBuilder {
    /// `max_connections` (default 200).
    pub fn max_connections(mut self, n: u32) -> MariaDbBuilder {
        self.max_connections = n;
        self
    }

    /// Password of the `resolve` account (default: random, letters and digits).
    pub fn password(mut self, password: &str) -> MariaDbBuilder {
        self.password = Some(password.to_string());
        self
    }

    /// TLS with the test CA's server certificate, and only TLS over TCP
    /// (`require_secure_transport=ON`; the Unix socket counts as secure).
    pub fn tls(self, ca: &super::tls::TestCa) -> MariaDbBuilder {
        self.arg(&format!("--ssl-ca={}", ca.ca().display()))
            .arg(&format!("--ssl-cert={}", ca.cert().display()))
            .arg(&format!("--ssl-key={}", ca.key().display()))
            .arg("--require-secure-transport=ON")
    }

    /// One more server option, e.g. `--wait-timeout=5`. Comes after the defaults, so it
    /// overrides them.
    pub fn arg(mut self, arg: &str) -> MariaDbBuilder {
        self.args.push(arg.to_string());
        self
    }

    pub fn start(self) -> MariaDb {
        let server = first_existing(SERVERS, "mariadbd (package mariadb-server)");
        let installer = first_existing(INSTALLERS, "mariadb-install-db (package mariadb-server)");
        let client = first_existing(CLIENTS, "mariadb client (package mariadb-client)");
        let password = self.password.clone().unwrap_or_else(|| random_token("rp"));
        start_retrying("mariadb", || {
            self.try_start(&server, &installer, &client, &password)
        })
    }

    /// Err carries the reason and whether the port was taken.
    fn try_start(
        &self,
        server: &Path,
        installer: &Path,
        client: &Path,
        password: &str,
    ) -> Result<MariaDb, (String, bool)> {
        let began = Instant::now();
        let dir = TempDir::new(&format!("mariadb-{}", self.label));
        let socket = dir.join("mysql.sock");
        // sun_path holds 108 bytes, NUL included.
        assert!(
            socket.as_os_str().len() < 100,
            "socket path too long for a Unix socket: {} (set TMPDIR to a shorter directory)",
            socket.display()
        );
        let account = run_as();
        let tmp = dir.mkdir("tmp");
        if let Some(a) = &account {
            chown(dir.path(), a);
            chown(&tmp, a);
        }
        let datadir = dir.join("data");

        // mariadb-install-db: system tables, no test database, a root@localhost without
        // password (locked down below, once the server runs).
        let mut install = Command::new(installer);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .arg("--skip-name-resolve")
            // Its own tmpdir: at start-up mariadbd deletes every `#sql*` file in its tmpdir,
            // which breaks other instances bootstrapping with the shared /tmp at the same time.
            .arg(format!("--tmpdir={}", tmp.display()))
            .args(SIZING);
        if let Some(a) = &account {
            install.arg(format!("--user={}", a.name));
        }
        let out = run_bounded(&mut install, CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("run {}: {e}", installer.display()));
        if !out.status.success() {
            let mut dir = dir;
            dir.keep();
            panic!(
                "{} failed ({}):\n{}{}",
                installer.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let installed = began.elapsed();

        let port = free_port();
        let mut args = vec![
            format!("--datadir={}", datadir.display()),
            format!("--tmpdir={}", tmp.display()),
            "--skip-networking=0".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--port={port}"),
            format!("--socket={}", socket.display()),
            format!("--pid-file={}", dir.join("mysqld.pid").display()),
            format!("--log-error={}", dir.join("error.log").display()),
            "--skip-name-resolve".to_string(),
            format!("--max-connections={}", self.max_connections),
            "--character-set-server=utf8mb4".to_string(),
            "--collation-server=utf8mb4_general_ci".to_string(),
            "--innodb-flush-log-at-trx-commit=2".to_string(),
        ];
        args.extend(SIZING.iter().map(|s| s.to_string()));
        if let Some(a) = &account {
            args.push(format!("--user={}", a.name));
        }
        args.extend(self.args.iter().cloned());

        let mut db = MariaDb {
            server: server.to_path_buf(),
            client: client.to_path_buf(),
            args,
            port,
            socket,
            password: password.to_string(),
            root_password: None,
            max_connections: self.max_connections,
            process: ServerProcess::default(),
            dir,
        };
        db.spawn();
        if let Err(e) = wait_ready(&mut db, READY_TIMEOUT, Duration::from_millis(50)) {
            db.kill();
            if !port_taken(&e) {
                db.dir.keep();
            }
            return Err((e.clone(), port_taken(&e)));
        }
        let ready = began.elapsed();
        db.provision();
        eprintln!(
            "mariadb {}: install-db {} ms, ready after {} ms, provisioned after {} ms (port {}, {})",
            self.label,
            installed.as_millis(),
            ready.as_millis(),
            began.elapsed().as_millis(),
            db.port,
            db.dir.path().display()
        );
        Ok(db)
    }
}

/// The system account the server drops to when the tests run as root.
#[derive(Clone, Debug)]
struct Account {
    name: String,
    uid: u32,
    gid: u32,
}

/// `Some(mysql)` when root (mariadbd refuses to run as root without `--user`), else `None`.
fn run_as() -> Option<Account> {
    if !is_root() {
        return None;
    }
    let passwd = fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    let account = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && f[0] == "mysql")
        .map(|f| Account {
            name: "mysql".to_string(),
            uid: f[2].parse().expect("uid in /etc/passwd"),
            gid: f[3].parse().expect("gid in /etc/passwd"),
        });
    // Without a mysql account (it comes with mariadb-server), stay root, which mariadbd
    // accepts when told explicitly.
    Some(account.unwrap_or(Account {
        name: "root".to_string(),
        uid: 0,
        gid: 0,
    }))
}

fn chown(path: &Path, a: &Account) {
    std::os::unix::fs::chown(path, Some(a.uid), Some(a.gid))
        .unwrap_or_else(|e| panic!("chown {} to {}: {e}", path.display(), a.name));
}

fn first_existing(candidates: &[&str], what: &str) -> PathBuf {
    match candidates.iter().map(Path::new).find(|p| p.exists()) {
        Some(p) => p.to_path_buf(),
        None => {
            require(Path::new(candidates[0]), what);
            unreachable!()
        }
    }
}

/// Letters and digits, random per call (no extra crates: std's randomly keyed hasher).
fn random_token(prefix: &str) -> String {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{prefix}{:016x}", h.finish())
}

/// Quote a string as an SQL literal.
pub fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// Run `cmd` to completion with its output captured; kill it after `timeout`.
fn run_bounded(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => {
            signal("KILL", pid);
            // The waiting thread reaps the child.
            let _ = rx.recv_timeout(Duration::from_secs(5));
            Err(format!("{cmd:?} still running after {timeout:?}: killed"))
        }
    }
}

pub struct MariaDb {
    server: PathBuf,
    client: PathBuf,
    /// Server options after `--no-defaults`, reused by `restart`.
    args: Vec<String>,
    port: u16,
    socket: PathBuf,
    password: String,
    /// Set once root@localhost got its password.
    root_password: Option<String>,
    max_connections: u32,
    process: ServerProcess,
    dir: TempDir,
}

impl MariaDb {
    /// A server with default settings (200 connections, random password).
    pub fn start() -> MariaDb {
        MariaDb::builder("db").start()
    }

    /// `label` names the temp dir (`resolve-test-mariadb-<label>-...`).
    pub fn builder(label: &str) -> MariaDbBuilder {
        MariaDbBuilder {
            label: label.to_string(),
            max_connections: 200,
            password: None,
            args: Vec::new(),
        }
    }

    /// The Unix socket and the TCP port on 127.0.0.1 it listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `resolve`, granted everything on `resolve_test` from 127.0.0.1 and localhost (the socket).
    pub fn user(&self) -> &str {
        USER
    }

    pub fn password(&self) -> &str {
        &self.password
    }

    pub fn database(&self) -> &str {
        DATABASE
    }

    pub fn max_connections(&self) -> u32 {
        self.max_connections
    }

    /// `mysql://resolve:PASS@127.0.0.1:PORT/resolve_test` (user and password percent-encoded).
    pub fn url(&self) -> String {
        format!(
            "mysql://{}:{}@127.0.0.1:{}/{DATABASE}",
            encode(USER),
            encode(&self.password),
            self.port
        )
    }

    /// `mysql://resolve:PASS@localhost/resolve_test?socket=/path/mysql.sock` (the query form
    /// MySQL client libraries use for a socket).
    pub fn socket_url(&self) -> String {
        format!(
            "mysql://{}:{}@localhost/{DATABASE}?socket={}",
            encode(USER),
            encode(&self.password),
            encode(&self.socket.display().to_string())
        )
    }

    /// The instance's directory (data/, tmp/, error.log, mysql.sock).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn error_log(&self) -> String {
        read_lossy(&self.dir.join("error.log"))
    }

    /// Process id of the running server.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Run SQL as root over the socket (`-N -B`: no column names, tab-separated, `NULL` for
    /// NULL, tabs/newlines/backslashes in values escaped as `\t`, `\n`, `\\`); stdout, or Err
    /// with the client's stderr.
    pub fn try_root_sql(&self, sql: &str) -> Result<String, String> {
        let mut cmd = self.client_command(Via::Socket, "root", self.root_password.as_deref());
        cmd.arg("-e").arg(sql);
        self.run_client(cmd)
    }

    /// The server's `Connections` status (each call adds its own connection).
    pub fn connections(&self) -> u64 {
        self.root_sql("SHOW GLOBAL STATUS LIKE 'Connections'")
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("Connections")
    }

    /// `try_root_sql`, panicking on error.
    pub fn root_sql(&self, sql: &str) -> String {
        self.try_root_sql(sql)
            .unwrap_or_else(|e| panic!("root SQL failed: {sql}\n{e}"))
    }

    /// Run SQL as `user` with `password`, in `resolve_test`, like `try_root_sql`.
    pub fn sql_as(
        &self,
        via: Via,
        user: &str,
        password: &str,
        sql: &str,
    ) -> Result<String, String> {
        let mut cmd = self.client_command(via, user, Some(password));
        cmd.arg("-e").arg(sql).arg(DATABASE);
        self.run_client(cmd)
    }

    /// Run SQL as the `resolve` account in `resolve_test`.
    pub fn user_sql(&self, via: Via, sql: &str) -> Result<String, String> {
        self.sql_as(via, USER, &self.password, sql)
    }

    fn client_command(&self, via: Via, user: &str, password: Option<&str>) -> Command {
        let mut cmd = Command::new(&self.client);
        // --no-defaults must come first: no /etc/mysql or ~/.my.cnf settings.
        cmd.arg("--no-defaults")
            .arg(format!("--user={user}"))
            .arg("--connect-timeout=10")
            .arg("--batch")
            .arg("--skip-column-names");
        match via {
            Via::Tcp | Via::TcpPort(_) => {
                cmd.arg("--protocol=TCP")
                    .arg("--host=127.0.0.1")
                    .arg(format!(
                        "--port={}",
                        if let Via::TcpPort(p) = via {
                            p
                        } else {
                            self.port
                        }
                    ))
            }
            Via::Socket => cmd
                .arg("--protocol=SOCKET")
                .arg(format!("--socket={}", self.socket.display())),
        };
        for var in [
            "MYSQL_HOST",
            "MYSQL_TCP_PORT",
            "MYSQL_UNIX_PORT",
            "MYSQL_PWD",
        ] {
            cmd.env_remove(var);
        }
        // Through the environment, not argv (visible in ps, and the client warns).
        if let Some(p) = password {
            cmd.env("MYSQL_PWD", p);
        }
        cmd
    }

    fn run_client(&self, mut cmd: Command) -> Result<String, String> {
        let out = run_bounded(&mut cmd, CLIENT_TIMEOUT)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            ))
        }
    }

    /// The account and database the tests use; root@localhost gets a password and is the only
    /// root account left (the others install-db makes answer on TCP without password).
    fn provision(&mut self) {
        let root_password = random_token("root");
        let pw = sql_string(&self.password);
        let hosts = self.root_sql("SELECT Host FROM mysql.user WHERE User = 'root'");
        let mut sql = format!(
            "CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;\n\
             CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY {pw};\n\
             CREATE USER '{USER}'@'localhost' IDENTIFIED BY {pw};\n\
             GRANT ALL PRIVILEGES ON `{DATABASE}`.* TO '{USER}'@'127.0.0.1', '{USER}'@'localhost';\n"
        );
        for host in hosts.lines().map(str::trim).filter(|h| *h != "localhost") {
            sql.push_str(&format!("DROP USER 'root'@{};\n", sql_string(host)));
        }
        sql.push_str(&format!(
            "ALTER USER 'root'@'localhost' IDENTIFIED BY {};\nFLUSH PRIVILEGES;\n",
            sql_string(&root_password)
        ));
        self.root_sql(&sql);
        self.root_password = Some(root_password);
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(&self.server);
        cmd.arg("--no-defaults").args(&self.args);
        let log = self.dir.join("mariadbd.out");
        self.process.spawn(&mut cmd, &log);
    }

    /// Clean shutdown (SIGTERM, waiting up to 30 s), SIGKILL if that does not do it.
    pub fn stop(&mut self) {
        if !self.process.stop(Duration::from_secs(30)) {
            eprintln!("mariadbd ignored SIGTERM for 30 s: killed it");
        }
    }

    /// SIGKILL: no shutdown, InnoDB recovers at the next start.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Start again on the same datadir, port and socket (stopping cleanly first if it runs);
    /// waits until ready.
    pub fn restart(&mut self) {
        self.stop();
        let began = Instant::now();
        // The port may still be in use for a moment by a process that just died.
        if !self
            .args
            .iter()
            .any(|a| a.starts_with("--port-open-timeout"))
        {
            self.args.push("--port-open-timeout=10".to_string());
        }
        self.spawn();
        let result = wait_ready(self, READY_TIMEOUT, Duration::from_millis(50));
        restarted(self, began, result);
    }
}

impl Server for MariaDb {
    const NAME: &'static str = "mariadb";

    fn parts(&mut self) -> (&mut ServerProcess, &mut TempDir, u16) {
        (&mut self.process, &mut self.dir, self.port)
    }

    /// The TCP greeting first (cheap), then a query over the socket.
    fn answers(&self) -> bool {
        greets(self.addr()) && self.try_root_sql("SELECT 1").is_ok()
    }

    fn output(&self) -> String {
        format!(
            "command: {} --no-defaults {}\nstdout/stderr: {}\nerror.log ({}):\n{}",
            self.server.display(),
            self.args.join(" "),
            read_lossy(&self.dir.join("mariadbd.out")),
            self.dir.join("error.log").display(),
            tail(&self.error_log(), 60)
        )
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        show_if_failing("mariadb error.log", &self.dir.join("error.log"), || {
            tail(&self.error_log(), 60)
        });
        self.stop();
    }
}

/// True when a MySQL-protocol greeting (protocol version 10) arrives from `addr`.
fn greets(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = [0u8; 5];
    s.read_exact(&mut head).is_ok() && head[4] == 10
}

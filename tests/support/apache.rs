//! A real Apache 2.4 (Debian's build, event MPM) on 127.0.0.1 in its own temp dir, stopped on drop; the binary runs under mod_cgid, or under mod_fcgid when RESOLVE_TEST_APACHE_MODE=fcgid.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::client::{HttpClient, fire};
use super::net::free_port;
use super::process::{port_taken, read_lossy, spawn_group, start_retrying};
use super::system::{ServerUser, binary, give_to_server_user, processes_of, require, server_user};
use super::temp::{TempDir, set_mode};

pub const APACHE: &str = "/usr/sbin/apache2";
pub const MODULES: &str = "/usr/lib/apache2/modules";

/// Modules every instance loads.
const BASE_MODULES: &[&str] = &[
    "mpm_event",
    "authz_core",
    "unixd",
    "mime",
    "dir",
    "alias",
    "env",
    "log_config",
    "cgid",
];

/// How Apache runs the binary under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One process per request, forked by mod_cgid's daemon.
    Cgid,
    /// Long-lived FastCGI processes managed by mod_fcgid.
    Fcgid,
}

/// Environment variable that chooses the mode of every instance whose test does not choose:
/// `cgid` (the default) or `fcgid`.
pub const MODE_ENV: &str = "RESOLVE_TEST_APACHE_MODE";

impl Mode {
    /// The mode RESOLVE_TEST_APACHE_MODE names; mod_cgid when it is unset.
    pub fn from_env() -> Mode {
        match std::env::var(MODE_ENV).as_deref() {
            Err(_) | Ok("" | "cgid") => Mode::Cgid,
            Ok("fcgid") => Mode::Fcgid,
            Ok(other) => panic!("{MODE_ENV}={other:?}: use cgid or fcgid"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Cgid => "cgid",
            Mode::Fcgid => "fcgid",
        }
    }
}

/// FastCGI processes started in fcgid mode before a test's first request (see
/// `ApacheBuilder::fcgid_pool`).
pub const FCGID_WARM_POOL: usize = 8;

pub struct ApacheBuilder {
    label: String,
    mode: Mode,
    fcgid_pool: usize,
    /// Name in cgi-bin/, the program, and whether it is the binary under test (run as FastCGI
    /// in fcgid mode; other programs stay plain CGI).
    cgi_programs: Vec<(String, PathBuf, bool)>,
    env: Vec<(String, String)>,
    modules: Vec<String>,
    extra_conf: Vec<String>,
    log_level: String,
}

impl ApacheBuilder {
    /// Copy the binary under test into cgi-bin/ as `resolve` (run by mod_fcgid in fcgid mode).
    pub fn resolve_cgi(mut self) -> ApacheBuilder {
        self.cgi_programs
            .push(("resolve".to_string(), binary(), true));
        self
    }

    /// Copy `program`, a build of the binary under test (e.g. the static release build), into
    /// cgi-bin/ as `name`: run like `resolve_cgi`, by mod_fcgid in fcgid mode.
    pub fn resolve_program(mut self, name: &str, program: &Path) -> ApacheBuilder {
        self.cgi_programs
            .push((name.to_string(), program.to_path_buf(), true));
        self
    }

    /// Copy `program` into cgi-bin/ as `name` (mode 0755), run as a plain CGI program.
    pub fn cgi(mut self, name: &str, program: &Path) -> ApacheBuilder {
        self.cgi_programs
            .push((name.to_string(), program.to_path_buf(), false));
        self
    }

    /// Run the binary under test this way, whatever RESOLVE_TEST_APACHE_MODE says.
    pub fn mode(mut self, mode: Mode) -> ApacheBuilder {
        self.mode = mode;
        self
    }

    /// In fcgid mode, FastCGI processes to start before the test's first request (default
    /// `FCGID_WARM_POOL`), as a site that has been busy has them. mod_fcgid starts processes
    /// only when a request finds none idle, and such a request waits a whole second before it
    /// looks again; tests that bound latency under concurrency would measure that wait. Warm-up
    /// requests go through `/warm-up/` with a configuration of their own (the echo provider, a
    /// file store in the instance's run/): they count nothing, call nothing and log nothing that
    /// the test sees. 0: no warm-up.
    pub fn fcgid_pool(mut self, processes: usize) -> ApacheBuilder {
        self.fcgid_pool = processes;
        self
    }

    /// `SetEnv name value` for every request (reaches CGI programs when suEXEC is off; in fcgid
    /// mode also `FcgidInitialEnv`, the FastCGI processes' own environment).
    pub fn set_env(mut self, name: &str, value: &str) -> ApacheBuilder {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Load `mod_<name>.so` too (e.g. "headers", "fcgid", "suexec").
    pub fn module(mut self, name: &str) -> ApacheBuilder {
        self.modules.push(name.to_string());
        self
    }

    /// Append raw configuration. `@DIR@` is replaced by the instance's directory.
    pub fn conf(mut self, text: &str) -> ApacheBuilder {
        self.extra_conf.push(text.to_string());
        self
    }

    /// `LogLevel` (default `warn`).
    pub fn log_level(mut self, level: &str) -> ApacheBuilder {
        self.log_level = level.to_string();
        self
    }

    pub fn start(self) -> Apache {
        require(Path::new(APACHE), "apache2");
        let built_in = compiled_in_modules();
        let mut modules: Vec<String> = Vec::new();
        let mode_modules = match self.mode {
            Mode::Cgid => vec![],
            Mode::Fcgid => vec!["fcgid".to_string()],
        };
        for m in BASE_MODULES
            .iter()
            .map(|m| m.to_string())
            .chain(mode_modules)
            .chain(self.modules.clone())
        {
            if !modules.contains(&m) && !built_in.contains(&m) {
                modules.push(m);
            }
        }
        for m in &modules {
            require(
                &Path::new(MODULES).join(format!("mod_{m}.so")),
                &format!("apache2 module mod_{m}"),
            );
        }
        // A free port can be taken by someone else before Apache binds it: retry then.
        start_retrying("apache", || self.try_start(&modules))
    }

    /// Err carries the reason and whether the port was taken.
    fn try_start(&self, modules: &[String]) -> Result<Apache, (String, bool)> {
        let dir = TempDir::new(&format!("apache-{}", self.label));
        dir.mkdir("logs");
        dir.mkdir("run");
        dir.mkdir("conf");
        let htdocs = dir.mkdir("htdocs");
        dir.write("htdocs/index.html", "ok\n");
        let cgi_bin = dir.mkdir("cgi-bin");
        if self.mode == Mode::Fcgid {
            // mod_fcgid's sockets, made by the server account's processes.
            let ipc = dir.mkdir("run/fcgid");
            give_to_server_user(&ipc);
            let warm_data = dir.mkdir("run/warm-up-data");
            give_to_server_user(&warm_data);
            dir.write(
                "conf/warm-up.json",
                format!(
                    r#"{{"provider": {{"kind": "echo"}},
 "store": {{"kind": "file", "dir": "{}", "sweep_one_in": 0}},
 "rules": [{{"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}}]}}"#,
                    warm_data.display()
                ),
            );
        }
        for (name, program, _) in &self.cgi_programs {
            let dest = cgi_bin.join(name);
            fs::copy(program, &dest).unwrap_or_else(|e| {
                panic!("copy {} to {}: {e}", program.display(), dest.display())
            });
            set_mode(&dest, 0o755);
        }
        let mime = if Path::new("/etc/mime.types").exists() {
            PathBuf::from("/etc/mime.types")
        } else {
            dir.write("conf/mime.types", "text/html html\n")
        };
        let port = free_port();
        let conf = self.render(&dir, port, modules, &htdocs, &cgi_bin, &mime, server_user());
        let conf_path = dir.write("conf/httpd.conf", conf);
        let stdout = fs::File::create(dir.join("logs/stdout")).expect("create stdout log");
        let stderr = fs::File::create(dir.join("logs/stderr")).expect("create stderr log");
        let child = spawn_group(
            Command::new(APACHE)
                .arg("-f")
                .arg(&conf_path)
                .arg("-DFOREGROUND"),
            stdout,
            stderr,
            APACHE,
        );
        let mut apache = Apache {
            port,
            mode: self.mode,
            child: Some(child),
            dir,
        };
        match apache
            .wait_ready(Duration::from_secs(20))
            .and_then(|()| self.warm_up(&apache))
        {
            Ok(()) => Ok(apache),
            Err(e) => {
                apache.stop_now();
                if !port_taken(&e) {
                    apache.dir.keep();
                }
                Err((e.clone(), port_taken(&e)))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn render(
        &self,
        dir: &TempDir,
        port: u16,
        modules: &[String],
        htdocs: &Path,
        cgi_bin: &Path,
        mime: &Path,
        user: Option<ServerUser>,
    ) -> String {
        let d = dir.path().display().to_string();
        let mut c = String::new();
        c.push_str(&format!("ServerRoot \"{d}\"\n"));
        for m in modules {
            c.push_str(&format!("LoadModule {m}_module {MODULES}/mod_{m}.so\n"));
        }
        if let Some(u) = user {
            c.push_str(&format!("User {}\nGroup {}\n", u.name, u.group));
        }
        c.push_str(&format!(
            r#"ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile "{d}/run/httpd.pid"
DefaultRuntimeDir "{d}/run"
Mutex file:{d}/run default
ErrorLog "{d}/logs/error_log"
LogLevel {log_level}
LogFormat "%a %l %u %t \"%r\" %>s %b %D" timed
CustomLog "{d}/logs/access_log" timed
TypesConfig "{mime}"
ScriptSock "{d}/run/cgid.sock"
CGIDScriptTimeout 30

Timeout 30
KeepAlive Off
GracefulShutdownTimeout 5
StartServers 2
ServerLimit 4
ThreadLimit 64
ThreadsPerChild 64
MinSpareThreads 32
MaxSpareThreads 256
MaxRequestWorkers 256
MaxConnectionsPerChild 0
ListenBacklog 511

DocumentRoot "{htdocs}"
DirectoryIndex index.html
<Directory />
    AllowOverride None
    Require all denied
</Directory>
<Directory "{htdocs}">
    Require all granted
</Directory>
{cgi_bin_conf}"#,
            log_level = self.log_level,
            mime = mime.display(),
            htdocs = htdocs.display(),
            cgi_bin_conf = self.cgi_bin_conf(&d, cgi_bin),
        ));
        for (k, v) in &self.env {
            c.push_str(&format!("SetEnv {k} \"{v}\"\n"));
            if self.mode == Mode::Fcgid {
                c.push_str(&format!("FcgidInitialEnv {k} \"{v}\"\n"));
            }
        }
        for extra in &self.extra_conf {
            c.push_str(&extra.replace("@DIR@", &d));
            c.push('\n');
        }
        c
    }
}

impl ApacheBuilder {
    /// Starts the FastCGI processes of `fcgid_pool`: rounds of that many requests at once to
    /// each program run by mod_fcgid (a request that finds no idle process makes mod_fcgid start
    /// one), until the pool is there or two rounds in a row needed no new process (at most 6
    /// rounds): on a busy machine one round can be answered by the processes already there.
    fn warm_up(&self, apache: &Apache) -> Result<(), String> {
        if self.mode != Mode::Fcgid || self.fcgid_pool == 0 {
            return Ok(());
        }
        let client = apache.client().timeout(Duration::from_secs(30));
        for (name, _, fastcgi) in &self.cgi_programs {
            if !*fastcgi {
                continue;
            }
            let program = apache.dir().join("cgi-bin").join(name);
            let target = format!("/warm-up/{name}?link=https%3A%2F%2Fwarm-up.example%2F");
            let mut running = 0;
            let mut stalled = 0;
            for round in 0..6 {
                let before = running;
                running = settled_processes(&program);
                if round > 0 && running == before {
                    stalled += 1;
                } else {
                    stalled = 0;
                }
                // Enough, or the last two rounds found enough idle processes to start none.
                if running >= self.fcgid_pool || stalled >= 2 {
                    break;
                }
                for answer in fire(self.fcgid_pool, self.fcgid_pool, |_| {
                    client.send(&super::client::Request::get(&target))
                }) {
                    match answer {
                        Ok(r) if r.status == 200 || r.status == 429 => {}
                        Ok(r) => {
                            return Err(format!("warm-up request answered\n{}", r.everything()));
                        }
                        Err(e) => return Err(format!("warm-up request failed: {e}")),
                    }
                }
            }
        }
        Ok(())
    }

    /// How cgi-bin/ is served: every program by mod_cgid, or in fcgid mode the binary under
    /// test by mod_fcgid (the others still by mod_cgid).
    fn cgi_bin_conf(&self, d: &str, cgi_bin: &Path) -> String {
        let cgi_bin = cgi_bin.display();
        match self.mode {
            Mode::Cgid => format!(
                r#"ScriptAlias /cgi-bin/ "{cgi_bin}/"
<Directory "{cgi_bin}">
    AllowOverride None
    Options None
    Require all granted
</Directory>
"#
            ),
            Mode::Fcgid => {
                let mut files = String::new();
                for (name, _, fastcgi) in &self.cgi_programs {
                    if *fastcgi {
                        files.push_str(&format!(
                            "    <Files \"{name}\">\n        SetHandler fcgid-script\n    </Files>\n"
                        ));
                    }
                }
                // Processes are spawned quickly (a burst of 32 needs several at once) and kept;
                // FcgidMaxRequestsPerProcess stays 0 (no limit): the binary's own
                // fastcgi.max_requests retires a process. Tests may append other values.
                format!(
                    r#"FcgidIPCDir "{d}/run/fcgid"
# File locks (fcntl) on the process table can fail with EDEADLK under many requests at once.
Mutex pthread fcgid-proctbl fcgid-pipe
FcgidProcessTableFile "{d}/run/fcgid_shm"
FcgidIOTimeout 30
FcgidConnectTimeout 10
FcgidMaxProcesses 64
FcgidMaxProcessesPerClass 16
FcgidMinProcessesPerClass 0
FcgidSpawnScoreUpLimit 64
FcgidIdleTimeout 300
FcgidMaxRequestsPerProcess 0
Alias /cgi-bin/ "{cgi_bin}/"
Alias /warm-up/ "{cgi_bin}/"
<Location /warm-up/>
    SetEnv RESOLVE_CONFIG "{d}/conf/warm-up.json"
</Location>
<Directory "{cgi_bin}">
    AllowOverride None
    Options +ExecCGI
    SetHandler cgi-script
{files}    Require all granted
</Directory>
"#
                )
            }
        }
    }
}

/// Checks the program's log `lines` since a mark, after `requests` requests that each had to
/// log once: that many lines, and each one `says` what it must.
pub fn assert_a_line_per_request(
    lines: &[String],
    requests: usize,
    what: &str,
    says: impl Fn(&str) -> bool,
) {
    assert_eq!(
        lines.len(),
        requests,
        "{what}: one line per request:\n{}",
        lines.join("\n")
    );
    for l in lines {
        assert!(says(l), "{what}: the line does not say what it must: {l}");
    }
}

/// Processes running `program` (their /proc/PID/exe), whoever owns them.
pub fn processes_running(program: &Path) -> usize {
    processes_of(program).len()
}

/// `processes_running` once it stops changing (looked at every 100 ms, for at most a second):
/// mod_fcgid starts the processes a round asked for after the round's requests were answered,
/// and on a busy machine they appear later still.
fn settled_processes(program: &Path) -> usize {
    let mut seen = processes_running(program);
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        let now = processes_running(program);
        if now == seen {
            break;
        }
        seen = now;
    }
    seen
}

/// Modules compiled into the apache2 binary (`apache2 -l`), e.g. "unixd", "log_config".
fn compiled_in_modules() -> Vec<String> {
    static MODULES: OnceLock<Vec<String>> = OnceLock::new();
    MODULES
        .get_or_init(|| {
            let out = Command::new(APACHE)
                .arg("-l")
                .output()
                .unwrap_or_else(|e| panic!("run {APACHE} -l: {e}"));
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.trim().strip_prefix("mod_")?.strip_suffix(".c"))
                .map(str::to_string)
                .collect()
        })
        .clone()
}

pub struct Apache {
    port: u16,
    mode: Mode,
    child: Option<Child>,
    dir: TempDir,
}

impl Apache {
    /// `label` names the temp dir (`resolve-test-apache-<label>-...`).
    pub fn builder(label: &str) -> ApacheBuilder {
        ApacheBuilder {
            label: label.to_string(),
            mode: Mode::from_env(),
            fcgid_pool: FCGID_WARM_POOL,
            cgi_programs: Vec::new(),
            env: Vec::new(),
            modules: Vec::new(),
            extra_conf: Vec::new(),
            log_level: "warn".to_string(),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// How this instance runs the binary under test.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> HttpClient {
        HttpClient::new(self.addr())
    }

    /// Process ids of the programs running from cgi-bin/ (in fcgid mode, the FastCGI
    /// processes).
    pub fn fastcgi_processes(&self) -> BTreeSet<u32> {
        processes_of(&self.dir().join("cgi-bin"))
    }

    /// The instance's ServerRoot (conf/, logs/, run/, htdocs/, cgi-bin/).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn error_log_path(&self) -> PathBuf {
        self.dir.join("logs/error_log")
    }

    /// The error_log so far (what CGI programs write to stderr lands here).
    pub fn error_log(&self) -> String {
        read_lossy(&self.error_log_path())
    }

    /// Bytes in the error_log so far: a mark for `log_since`.
    pub fn log_len(&self) -> usize {
        fs::read(self.error_log_path()).map_or(0, |b| b.len())
    }

    /// The error_log from byte `from` on, once it stopped growing.
    pub fn log_since(&self, from: usize) -> String {
        self.settle_log();
        let bytes = fs::read(self.error_log_path()).unwrap_or_default();
        String::from_utf8_lossy(bytes.get(from..).unwrap_or_default()).into_owned()
    }

    pub fn access_log(&self) -> String {
        read_lossy(&self.dir.join("logs/access_log"))
    }

    /// Wait (bounded) until the error_log contains `needle`; true if it did.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.error_log().contains(needle))
    }

    /// Wait (2 s at most) until the error_log is longer than `len` bytes; true if it grew.
    pub fn log_grew_past(&self, len: usize) -> bool {
        wait_until(Duration::from_secs(2), || self.error_log().len() > len)
    }

    /// Wait (bounded) until the error_log stops growing, so that stderr of finished CGI
    /// programs has been written.
    pub fn settle_log(&self) {
        let mut last = self.error_log().len();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(100));
            let now = self.error_log().len();
            if now == last {
                return;
            }
            last = now;
        }
    }

    /// Once the error_log has settled, fails if it holds any of `bad`.
    pub fn assert_log_lacks(&self, bad: &[&str]) {
        self.settle_log();
        let log = self.error_log();
        for b in bad {
            assert!(!log.contains(b), "{b:?} in the error_log:\n{log}");
        }
    }

    fn startup_output(&self) -> String {
        format!(
            "stderr: {}\nerror_log: {}",
            read_lossy(&self.dir.join("logs/stderr")),
            self.error_log()
        )
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "apache exited at start-up ({status}); config {}\n{}",
                    self.dir.join("conf/httpd.conf").display(),
                    self.startup_output()
                ));
            }
            // Answering is not enough: mod_cgid's daemon, which forks every CGI program, may
            // not have made its socket yet, and a request then gets Apache's own 503.
            if probe(self.addr()) && self.cgid_daemon_ready() {
                return Ok(());
            }
            if Instant::now() >= until {
                return Err(format!(
                    "apache did not answer within {timeout:?}\n{}",
                    self.startup_output()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether mod_cgid's daemon has made its socket (`ScriptSock`, with the server's pid
    /// appended).
    fn cgid_daemon_ready(&self) -> bool {
        fs::read_dir(self.dir.join("run")).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("cgid.sock"))
        })
    }

    fn signal(&self, sig: &str, target: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg("--")
            .arg(target)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Kill the whole process group at once.
    fn stop_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            self.signal("KILL", &format!("-{}", child.id()));
            let _ = child.wait();
        }
    }

    /// Graceful stop (SIGWINCH: finish running requests), then kill what is left.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        self.signal("WINCH", &pid.to_string());
        let until = Instant::now() + Duration::from_secs(10);
        let mut exited = false;
        while !exited && Instant::now() < until {
            exited = matches!(child.try_wait(), Ok(Some(_)));
            if !exited {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if !exited {
            let _ = child.kill();
        }
        // Whatever is left of the group (cgid's daemon, CGI programs still running).
        self.signal("KILL", &format!("-{pid}"));
        let _ = child.wait();
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "apache error_log ({}):\n{}",
                self.error_log_path().display(),
                self.error_log()
            );
        }
        self.stop();
    }
}

/// Polls `done` every 50 ms until it holds or `timeout` passes; whether it held.
fn wait_until(timeout: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when something at `addr` answers an HTTP request.
fn probe(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 12];
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf[..got].starts_with(b"HTTP/1.")
}

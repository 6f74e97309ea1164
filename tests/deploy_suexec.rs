//! deploy.sh end to end, as root: a new cPanel-style account, `deploy.sh --transport local`, a real Apache running the program through suEXEC (UserDir, Debian's apache2-suexec-pristine), a re-deploy under load, `--dry-run`, and the errors an owner can meet.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use support::config::{TOKEN, http_provider, rule};
use support::temp::{entries_under, set_mode};
use support::urlenc::link_param;
use support::{
    Apache, HttpClient, Provider, Request, Response, TempDir, free_port, is_root, server_user,
};

const SUEXEC: &str = "/usr/lib/apache2/suexec";
const SUEXEC_LOG: &str = "/var/log/apache2/suexec.log";
/// The rule the owner configures: 30 requests per address in a window long enough for the test.
const LIMIT: usize = 30;
const WINDOW_SECS: u64 = 600;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn require_root() {
    assert!(
        is_root(),
        "tests/deploy_suexec.rs must run as root: it creates a system account and runs Apache \
         with suEXEC, which only root can start (run tests/run-all.sh as root)"
    );
}

// ---------------------------------------------------------------------------------------------
// suEXEC on this machine

/// `suexec -V`: the values compiled into Debian's wrapper.
fn suexec_settings() -> BTreeMap<String, String> {
    let meta = fs::metadata(SUEXEC).unwrap_or_else(|e| {
        panic!(
            "{SUEXEC}: {e}: install apache2-suexec-pristine (tests/run-all.sh does when run as root)"
        )
    });
    assert!(
        meta.uid() == 0 && meta.mode() & 0o4000 != 0,
        "{SUEXEC} must be setuid root for Apache to enable suEXEC (mode {:o}, uid {})",
        meta.mode(),
        meta.uid()
    );
    let out = Command::new(SUEXEC)
        .arg("-V")
        .output()
        .unwrap_or_else(|e| panic!("run {SUEXEC} -V: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("-D "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// Checks that this wrapper can run programs of `user` from `~user/public_html` for Apache's
/// account; returns the settings for messages.
fn check_suexec_fits(user: &HostUser) -> BTreeMap<String, String> {
    let s = suexec_settings();
    let get = |k: &str| {
        s.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("{SUEXEC} -V does not show {k}: {s:?}"))
    };
    assert_eq!(get("AP_USERDIR_SUFFIX"), "public_html", "{s:?}");
    let apache_user = server_user().expect("root has a server account");
    assert_eq!(
        get("AP_HTTPD_USER"),
        apache_user.name,
        "suEXEC accepts calls only from this account: {s:?}"
    );
    let uid_min: u32 = get("AP_UID_MIN").parse().expect("AP_UID_MIN");
    let gid_min: u32 = get("AP_GID_MIN").parse().expect("AP_GID_MIN");
    assert!(
        user.uid >= uid_min && user.gid >= gid_min,
        "{user:?} is below suEXEC's minimum ({uid_min}/{gid_min})"
    );
    s
}

/// The suEXEC log from a given length on.
struct SuexecLog {
    start: u64,
}

impl SuexecLog {
    fn mark() -> SuexecLog {
        SuexecLog {
            start: fs::metadata(SUEXEC_LOG).map(|m| m.len()).unwrap_or(0),
        }
    }

    fn since(&self) -> String {
        let bytes = fs::read(SUEXEC_LOG).unwrap_or_default();
        let start = (self.start as usize).min(bytes.len());
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    /// The log since the mark, with runs of successful starts counted instead of listed.
    fn summary(&self) -> String {
        let mut out = String::new();
        let mut ran = 0;
        for line in self.since().lines() {
            if line.contains(" cmd: resolve") && line.contains("]: uid: (") {
                ran += 1;
                continue;
            }
            if ran > 0 {
                out.push_str(&format!("({ran} programs started)\n"));
                ran = 0;
            }
            out.push_str(line);
            out.push('\n');
        }
        if ran > 0 {
            out.push_str(&format!("({ran} programs started)\n"));
        }
        out
    }
}

impl Drop for SuexecLog {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{SUEXEC_LOG} during the test:\n{}", self.summary());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A hosting account, removed on drop

#[derive(Debug)]
struct HostUser {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
}

fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let mix = (nanos as u64) ^ (u64::from(std::process::id()) << 20) ^ (n << 28);
    format!("{:08x}", mix & 0xffff_ffff)
}

impl HostUser {
    /// A new account `resolvetest<random>` with no shell and a home laid out like cPanel's:
    /// home 711, public_html 750 (group: Apache's), and `public_html/cgi-bin` 755 unless
    /// `cgi_bin` is false.
    fn create(cgi_bin: bool) -> HostUser {
        HostUser::create_with_shell(cgi_bin, "/usr/sbin/nologin")
    }

    /// The same, for an account the host gives a shell (ssh, FTP logins check it).
    fn create_with_shell(cgi_bin: bool, shell: &str) -> HostUser {
        let name = format!("resolvetest{}", random_suffix());
        let home = PathBuf::from("/home").join(&name);
        // useradd takes a lock on /etc/passwd: retry when a parallel test holds it.
        let mut last = String::new();
        let mut created = false;
        for _ in 0..20 {
            let out = Command::new("useradd")
                .args(["--create-home", "--home-dir"])
                .arg(&home)
                .args(["--shell", shell, "--user-group", &name])
                .output()
                .unwrap_or_else(|e| panic!("run useradd: {e}"));
            if out.status.success() {
                created = true;
                break;
            }
            last = String::from_utf8_lossy(&out.stderr).into_owned();
            std::thread::sleep(Duration::from_millis(250));
        }
        assert!(created, "useradd {name} failed: {last}");
        let passwd = fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
        let fields: Vec<&str> = passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&name.as_str()))
            .unwrap_or_else(|| panic!("{name} not in /etc/passwd after useradd"));
        let user = HostUser {
            uid: fields[2].parse().expect("uid"),
            gid: fields[3].parse().expect("gid"),
            name,
            home,
        };
        assert!(
            user.uid >= 1000,
            "useradd gave {} uid {}: an unprivileged account needs >= 1000",
            user.name,
            user.uid
        );
        set_mode(&user.home, 0o711);
        let web = user.home.join("public_html");
        user.mkdir(&web, 0o750);
        let apache = server_user().expect("root has a server account");
        std::os::unix::fs::chown(&web, Some(user.uid), Some(apache.gid)).expect("chown web root");
        if cgi_bin {
            user.mkdir(&web.join("cgi-bin"), 0o755);
        }
        user
    }

    fn web(&self) -> PathBuf {
        self.home.join("public_html")
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.home.join(rel)
    }

    /// `mkdir` owned by the account.
    fn mkdir(&self, path: &Path, mode: u32) {
        fs::create_dir(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).expect("chown");
        set_mode(path, mode);
    }

    /// Write a file owned by the account.
    fn write(&self, path: &Path, contents: impl AsRef<[u8]>, mode: u32) {
        fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).expect("chown");
        set_mode(path, mode);
    }

    /// Sets the account's password (`None`: no password, but not locked either, so that a key
    /// login works).
    fn set_password(&self, password: Option<&str>) {
        let entry = match password {
            Some(p) => format!("{}:{p}\n", self.name),
            None => format!("{}:*\n", self.name),
        };
        let mut cmd = Command::new("chpasswd");
        if password.is_none() {
            cmd.arg("--encrypted");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run chpasswd: {e}"));
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(entry.as_bytes())
            .expect("write to chpasswd");
        assert!(child.wait().expect("chpasswd").success(), "chpasswd failed");
    }

    /// `/~user/<rel>`
    fn url(&self, rel: &str) -> String {
        format!("/~{}/{rel}", self.name)
    }
}

impl Drop for HostUser {
    fn drop(&mut self) {
        let out = Command::new("userdel")
            .args(["--remove", "--force", &self.name])
            .output();
        let removed = !self.home.exists();
        if !removed || out.as_ref().map(|o| !o.status.success()).unwrap_or(true) {
            // A leftover account is worth a line, never a second panic.
            eprintln!(
                "userdel --remove {}: {:?}; home {} removed: {removed}",
                self.name,
                out.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()),
                self.home.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// deploy.sh

struct Deployed {
    output: Output,
    took: Duration,
}

impl Deployed {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn all(&self) -> String {
        format!(
            "exit {:?} after {:?}\n--- stdout\n{}--- stderr\n{}",
            self.output.status.code(),
            self.took,
            self.stdout(),
            self.stderr()
        )
    }

    fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    fn assert_exit(&self, code: i32) -> &Deployed {
        assert_eq!(self.code(), Some(code), "{}", self.all());
        self
    }

    /// Its standard output holds each of `expected`.
    fn says(&self, expected: &[&str]) -> &Deployed {
        for e in expected {
            assert!(self.stdout().contains(e), "{e:?} in\n{}", self.all());
        }
        self
    }

    /// Its standard error holds each of `expected`.
    fn warns(&self, expected: &[&str]) -> &Deployed {
        for e in expected {
            assert!(self.stderr().contains(e), "{e:?} in\n{}", self.all());
        }
        self
    }

    fn assert_ok(&self) -> &Deployed {
        assert!(
            self.output.status.success(),
            "deploy.sh failed:\n{}",
            self.all()
        );
        self
    }

    /// The binary the script checked and uploaded (from its "static binary: PATH (" line).
    fn binary(&self) -> PathBuf {
        let out = self.stdout();
        let line = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("static binary: "))
            .unwrap_or_else(|| panic!("no \"static binary:\" line:\n{}", self.all()));
        PathBuf::from(line.split(" (").next().expect("path"))
    }
}

/// Runs deploy.sh from the checkout with no RESOLVE_CONFIG in its environment.
fn deploy(args: &[&str]) -> Deployed {
    let started = Instant::now();
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("deploy.sh"));
    // A deploy.conf in the checkout must not change what the tests do.
    if !args.contains(&"--settings") {
        cmd.args(["--settings", "/dev/null"]);
    }
    let output = cmd
        .args(args)
        .current_dir(repo())
        .env_remove("RESOLVE_CONFIG")
        .env_remove("LFTP_PASSWORD")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run deploy.sh: {e}"));
    Deployed {
        output,
        took: started.elapsed(),
    }
}

fn local_args<'a>(user: &'a HostUser, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--transport",
        "local",
        "--target",
        user.home.to_str().expect("utf-8 home"),
    ];
    args.extend_from_slice(extra);
    args
}

// ---------------------------------------------------------------------------------------------
// Listings of a home directory, with modes, owners, inodes and contents

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    mode: u32,
    uid: u32,
    gid: u32,
    ino: u64,
    mtime_ns: i128,
    contents: Option<Vec<u8>>,
}

fn listing(root: &Path) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    list_into(root, root, &mut out);
    out
}

fn list_into(root: &Path, dir: &Path, out: &mut BTreeMap<String, Entry>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let meta = fs::symlink_metadata(&path).expect("metadata");
        let rel = path
            .strip_prefix(root)
            .expect("under root")
            .display()
            .to_string();
        let contents = meta.is_file().then(|| fs::read(&path).expect("read file"));
        out.insert(
            rel,
            Entry {
                mode: meta.mode(),
                uid: meta.uid(),
                gid: meta.gid(),
                ino: meta.ino(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                contents,
            },
        );
        if meta.is_dir() {
            list_into(root, &path, out);
        }
    }
}

fn describe_differences(a: &BTreeMap<String, Entry>, b: &BTreeMap<String, Entry>) -> String {
    let mut d = String::new();
    for (k, v) in a {
        match b.get(k) {
            None => d.push_str(&format!("removed: {k}\n")),
            Some(w) if w != v => d.push_str(&format!(
                "changed: {k}: mode {:o} -> {:o}, uid {} -> {}, inode {} -> {}, mtime {} -> {}, \
                 contents same: {}\n",
                v.mode,
                w.mode,
                v.uid,
                w.uid,
                v.ino,
                w.ino,
                v.mtime_ns,
                w.mtime_ns,
                v.contents == w.contents
            )),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        d.push_str(&format!("added: {k}\n"));
    }
    d
}

fn assert_untouched(before: &BTreeMap<String, Entry>, user: &HostUser, what: &str) {
    let after = listing(&user.home);
    assert!(
        before == &after,
        "{what} changed the account:\n{}",
        describe_differences(before, &after)
    );
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .mode()
        & 0o7777
}

fn assert_owned_with_mode(user: &HostUser, rel: &str, mode: u32) {
    let path = user.path(rel);
    let meta = fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        (meta.mode() & 0o7777, meta.uid()),
        (mode, user.uid),
        "{rel}: mode {:o} owner {}, expected {mode:o} owned by {}",
        meta.mode() & 0o7777,
        meta.uid(),
        user.name
    );
}

/// What is where after a first deployment, owned by the account, with the modes suEXEC wants.
fn assert_serves_only_the_page_and_program(user: &HostUser) {
    let served: Vec<String> = entries_under(&user.web())
        .iter()
        .map(|p| p.strip_prefix(user.web()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        served,
        [
            "app.js",
            "cgi-bin",
            "cgi-bin/resolve",
            "index.html",
            "style.css"
        ],
        "public_html holds the page and the program, nothing else"
    );
}

fn assert_deployed(user: &HostUser, built: &Path) {
    assert_owned_with_mode(user, "public_html/cgi-bin", 0o755);
    assert_owned_with_mode(user, "public_html/cgi-bin/resolve", 0o755);
    assert_eq!(
        fs::read(user.path("public_html/cgi-bin/resolve")).unwrap(),
        fs::read(built).unwrap(),
        "the deployed binary is the one built"
    );
    for page in ["index.html", "style.css", "app.js"] {
        assert_owned_with_mode(user, &format!("public_html/{page}"), 0o644);
        assert_eq!(
            fs::read(user.web().join(page)).unwrap(),
            fs::read(repo().join("public").join(page)).unwrap(),
            "public_html/{page}"
        );
    }
    assert_serves_only_the_page_and_program(user);
    assert_owned_with_mode(user, "resolve", 0o700);
    assert_owned_with_mode(user, "resolve/ratelimit", 0o700);
    assert_owned_with_mode(user, "resolve/config.json", 0o600);
    let starter: serde_json::Value =
        serde_json::from_slice(&fs::read(user.path("resolve/config.json")).unwrap())
            .expect("the starter configuration is plain JSON");
    assert_eq!(starter["provider"]["kind"], "echo", "{starter}");
}

// ---------------------------------------------------------------------------------------------
// The site

fn apache_for(user: &HostUser) -> Apache {
    let home = user.home.display();
    Apache::builder("suexec")
        .module("suexec")
        .module("userdir")
        .log_level("notice")
        .conf(&format!(
            r#"UserDir disabled
UserDir enabled {name}
UserDir public_html
<Directory "{home}/public_html">
    AllowOverride All
    Options SymLinksIfOwnerMatch
    Require all granted
</Directory>
<Directory "{home}/public_html/cgi-bin">
    AllowOverride None
    Options +ExecCGI
    SetHandler cgi-script
</Directory>"#,
            name = user.name
        ))
        .start()
}

fn link(i: usize) -> String {
    format!("https://example.com/file/{i}")
}

fn resolve_target(user: &HostUser, i: usize) -> String {
    format!("{}?{}", user.url("cgi-bin/resolve"), link_param(&link(i)))
}

fn get_link(client: &HttpClient, user: &HostUser, i: usize) -> Response {
    let target = resolve_target(user, i);
    client
        .send(&Request::get(&target).header("Accept", "text/plain"))
        .unwrap_or_else(|e| panic!("GET {target}: {e}"))
}

/// Everything useful when a request through suEXEC went wrong.
fn diagnostics(apache: &Apache, suexec: &SuexecLog) -> String {
    format!(
        "--- apache error_log\n{}\n--- {SUEXEC_LOG} (this test)\n{}",
        apache.error_log(),
        suexec.summary()
    )
}

fn assert_status(r: &Response, status: u16, apache: &Apache, suexec: &SuexecLog) {
    assert_eq!(
        r.status,
        status,
        "{}\n{}",
        r.everything(),
        diagnostics(apache, suexec)
    );
}

// ---------------------------------------------------------------------------------------------

#[test]
fn deploy_serve_and_redeploy_under_suexec() {
    require_root();
    let started = Instant::now();
    let suexec = SuexecLog::mark();
    let user = HostUser::create(true);
    let settings = check_suexec_fits(&user);
    eprintln!(
        "account {} (uid {}), suexec {settings:?}",
        user.name, user.uid
    );

    // A dry run on the fresh account builds nothing and changes nothing.
    let before = listing(&user.home);
    let dry = deploy(&local_args(&user, &["--dry-run"]));
    dry.assert_ok();
    assert_untouched(&before, &user, "deploy.sh --dry-run on a fresh account");
    dry.says(&[
        "cargo build --release --target x86_64-unknown-linux-musl",
        "resolve/config.json will be created",
        "dry run finished: nothing was changed",
    ]);

    // First deployment: deploy.sh builds the static binary itself.
    let first = deploy(&local_args(&user, &["--domain", "example.test"]));
    first.assert_ok();
    eprintln!("first deployment, with the build: {:?}", first.took);
    let built = first.binary();
    let out = first.stdout();
    for expected in [
        "CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --target x86_64-unknown-linux-musl",
        "static binary: ",
        &format!(
            "configuration: {}/resolve/config.json (the account's home directory)",
            user.home.display()
        ),
        "ok   provider: echo",
        "open https://example.test/ (the page)",
        "cgi-bin/resolve sweep",
    ] {
        assert!(out.contains(expected), "{expected:?} in\n{}", first.all());
    }
    assert!(
        out.lines().any(|l| l.trim() == "OK"),
        "resolve check did not report OK:\n{}",
        first.all()
    );

    assert_deployed(&user, &built);

    // The owner edits the configuration: the provider (here the counting stand-in), the limit.
    let provider = Provider::start();
    let config = json!({
        "provider": http_provider(&provider.url("/unrestrict")),
        "store": {"kind": "file", "dir": "ratelimit"},
        "rules": [rule("ip", "ip", LIMIT as u64, WINDOW_SECS)]
    });
    let config_bytes = serde_json::to_vec_pretty(&config).unwrap();
    user.write(&user.path("resolve/config.json"), &config_bytes, 0o600);

    // Apache with suEXEC, and nothing that sets the configuration's place.
    let apache = apache_for(&user);
    assert!(
        apache.wait_for_log("suEXEC mechanism enabled", Duration::from_secs(5)),
        "Apache did not enable suEXEC\n{}",
        diagnostics(&apache, &suexec)
    );
    let httpd_conf = fs::read_to_string(apache.dir().join("conf/httpd.conf")).unwrap();
    assert!(
        !httpd_conf.contains("RESOLVE_CONFIG") && !httpd_conf.contains("SetEnv"),
        "the test's Apache must not pass a configuration path:\n{httpd_conf}"
    );
    assert!(
        std::env::var_os("RESOLVE_CONFIG").is_none(),
        "RESOLVE_CONFIG is set in the test's environment: unset it, the deployed site must not need it"
    );
    let client = apache.client();

    // The page.
    for (page, content_type) in [
        ("", "text/html"),
        ("index.html", "text/html"),
        ("style.css", "text/css"),
        ("app.js", "javascript"),
    ] {
        let r = client.get(&user.url(page)).expect("page");
        assert_status(&r, 200, &apache, &suexec);
        let file = if page.is_empty() { "index.html" } else { page };
        assert_eq!(
            r.body,
            fs::read(repo().join("public").join(file)).unwrap(),
            "{page}"
        );
        assert!(
            r.header("Content-Type")
                .unwrap_or_default()
                .contains(content_type),
            "{}",
            r.everything()
        );
    }

    // Links resolve through the provider, as the account; the 31st in the window gets 429.
    let a = apache.client().bind_source("127.0.0.2");
    let r = a
        .send(
            &Request::post_form(&user.url("cgi-bin/resolve"), link_param(&link(0)))
                .header("Accept", "text/plain"),
        )
        .expect("POST as the page sends it");
    assert_status(&r, 200, &apache, &suexec);
    assert_eq!(r.text(), "https://cdn.test/file/1\n");
    for i in 1..LIMIT {
        let r = get_link(&a, &user, i);
        assert_status(&r, 200, &apache, &suexec);
        assert_eq!(r.text(), format!("https://cdn.test/file/{}\n", i + 1));
    }
    assert_eq!(provider.calls(), LIMIT);
    let r = get_link(&a, &user, LIMIT);
    assert_status(&r, 429, &apache, &suexec);
    assert!(r.header("Retry-After").is_some(), "{}", r.everything());
    assert_eq!(
        r.header("RateLimit-Policy"),
        Some(format!("\"ip\";q={LIMIT};w={WINDOW_SECS}").as_str())
    );
    assert_eq!(
        provider.calls(),
        LIMIT,
        "a refused request reached the provider"
    );

    // It ran through suEXEC as the account: suEXEC's log says so, and the data is the account's.
    let log = suexec.since();
    let ran_as = format!(
        "uid: ({}/{}) gid: ({}/{}) cmd: resolve",
        user.uid, user.name, user.gid, user.name
    );
    assert!(
        log.contains(&ran_as),
        "{ran_as:?} not in {SUEXEC_LOG}:\n{log}"
    );
    let data = user.path("resolve/ratelimit");
    let data_files: Vec<PathBuf> = entries_under(&data)
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    assert!(!data_files.is_empty(), "no counters in {}", data.display());
    for p in entries_under(&data) {
        let meta = fs::metadata(&p).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (user.uid, user.gid),
            "{} is not the account's",
            p.display()
        );
        assert_eq!(
            meta.mode() & 0o077,
            0,
            "{} is open to others: {:o}",
            p.display(),
            meta.mode()
        );
    }
    // Outside the web root.
    assert_serves_only_the_page_and_program(&user);
    assert!(
        !apache.error_log().contains("resolve: error"),
        "the program logged an error:\n{}",
        apache.error_log()
    );

    // Neither the configuration nor the data can be fetched over HTTP.
    let data_rel = data_files[0]
        .strip_prefix(user.path("resolve"))
        .unwrap()
        .display()
        .to_string();
    let home = user.home.display().to_string();
    let mut attempts = Vec::new();
    for secret in [
        "resolve/config.json".to_string(),
        format!("resolve/{data_rel}"),
    ] {
        let inner = secret.trim_start_matches("resolve/");
        attempts.extend([
            user.url(&format!("../{secret}")),
            user.url(&format!("%2e%2e/{secret}")),
            user.url(&format!("..%2f{secret}")),
            user.url(&format!("cgi-bin/../../{secret}")),
            user.url(&format!("cgi-bin/%2e%2e/%2e%2e/{secret}")),
            user.url(&format!("cgi-bin/resolve/../../../{secret}")),
            user.url(&format!("cgi-bin/resolve/%2e%2e/%2e%2e/{secret}")),
            user.url(&secret),
            user.url(inner),
            format!("/{secret}"),
            format!("{home}/{secret}"),
            format!("/~{}/../{}/{secret}", user.name, user.name),
        ]);
    }
    let data_bytes = fs::read(&data_files[0]).unwrap();
    let data_text = String::from_utf8_lossy(&data_bytes).into_owned();
    // The longest line of the counter file: what a leak of it would show.
    let marker = data_text
        .lines()
        .map(|l| l.trim_matches(|c: char| c.is_whitespace() || c == '\0'))
        .max_by_key(|l| l.len())
        .unwrap_or_default()
        .to_string();
    assert!(marker.len() >= 8, "unexpected counter file: {data_text:?}");
    let probe = apache.client().bind_source("127.0.0.9");
    for target in &attempts {
        let r = probe
            .send(&Request::get(target))
            .unwrap_or_else(|e| panic!("GET {target}: {e}"));
        let all = r.everything();
        assert!(
            matches!(r.status, 400 | 403 | 404),
            "GET {target} answered {}:\n{all}",
            r.status
        );
        assert!(
            !all.contains(TOKEN),
            "GET {target} showed the configuration:\n{all}"
        );
        assert!(
            !all.contains(&marker),
            "GET {target} showed rate-limit data:\n{all}"
        );
    }

    // If the repository's ratelimit/ (with its .htaccess) were uploaded under the web root by
    // mistake, its files would be denied. Without the .htaccess they would be served: this
    // vhost honours .htaccess, as cPanel's do.
    let stray = user.web().join("ratelimit");
    user.mkdir(&stray, 0o755);
    user.write(&stray.join("counter"), &data_bytes, 0o644);
    let r = probe.get(&user.url("ratelimit/counter")).expect("answer");
    assert_status(&r, 200, &apache, &suexec);
    let htaccess = fs::read(repo().join("ratelimit/.htaccess")).expect("ratelimit/.htaccess");
    user.write(&stray.join(".htaccess"), &htaccess, 0o644);
    for target in ["ratelimit/counter", "ratelimit/", "ratelimit/.htaccess"] {
        let r = probe.get(&user.url(target)).expect("answer");
        assert_status(&r, 403, &apache, &suexec);
    }
    fs::remove_dir_all(&stray).unwrap();

    // Re-deploy over the running site while requests run: the configuration and the counters
    // survive, and every answer is a real one (200 or 429), never a half-written program.
    let b = apache.client().bind_source("127.0.0.4");
    for i in 0..10 {
        assert_status(&get_link(&b, &user, 100 + i), 200, &apache, &suexec);
    }
    let calls_before_load = provider.calls();
    let binary_inode = fs::metadata(user.path("public_html/cgi-bin/resolve"))
        .unwrap()
        .ino();
    let built_arg = built.to_str().expect("utf-8 path").to_string();
    let stop = AtomicBool::new(false);
    let answers: Mutex<Vec<Result<u16, String>>> = Mutex::new(Vec::new());
    let redeploys = std::thread::scope(|s| {
        for t in 0..8 {
            let stop = &stop;
            let answers = &answers;
            let user = &user;
            let server = apache.addr();
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    // 40 addresses: answers are a mix of 200 and 429.
                    let source = format!("127.0.1.{}", 1 + (t * 7 + n) % 40);
                    let c = HttpClient::new(server).bind_source(&source);
                    let r = c
                        .send(
                            &Request::get(&resolve_target(user, 1000 + n))
                                .header("Accept", "text/plain"),
                        )
                        .map(|r| r.status)
                        .map_err(|e| e.to_string());
                    answers.lock().unwrap().push(r);
                    n += 1;
                }
            });
        }
        // Let the load start, re-deploy three times, let it run a little longer.
        std::thread::sleep(Duration::from_millis(500));
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(deploy(&local_args(&user, &["--binary", &built_arg])));
            std::thread::sleep(Duration::from_millis(300));
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        runs
    });
    for run in &redeploys {
        run.assert_ok();
        assert!(
            run.stdout()
                .contains("resolve/config.json exists: kept as it is"),
            "{}",
            run.all()
        );
    }
    eprintln!("re-deployment with --binary: {:?}", redeploys[0].took);
    let answers = answers.into_inner().unwrap();
    let count = |s: u16| answers.iter().filter(|a| a == &&Ok(s)).count();
    let (ok, limited) = (count(200), count(429));
    eprintln!(
        "during the re-deployments: {} requests, {ok} answered 200, {limited} answered 429",
        answers.len()
    );
    assert!(
        ok + limited == answers.len(),
        "answers other than 200 and 429 during the re-deployments: {:?}\n{}",
        answers
            .iter()
            .filter(|a| !matches!(a, Ok(200 | 429)))
            .collect::<Vec<_>>(),
        diagnostics(&apache, &suexec)
    );
    assert!(
        answers.len() >= 50,
        "too little load: {} requests",
        answers.len()
    );
    assert!(ok > 0, "no request was admitted during the re-deployments");
    assert_eq!(provider.calls(), calls_before_load + ok);
    apache.settle_log();
    let error_log = apache.error_log();
    for bad in [
        "End of script output",
        "malformed header",
        "Exec format error",
        "Text file busy",
        "suexec policy violation",
    ] {
        assert!(
            !error_log.contains(bad),
            "{bad:?} in the error_log:\n{error_log}"
        );
    }
    let suexec_lines = suexec.since();
    let refused: Vec<&str> = suexec_lines
        .lines()
        .filter(|l| !(l.contains("]: uid: (") && l.contains(" cmd: resolve")))
        .collect::<Vec<_>>();
    assert!(
        refused.is_empty(),
        "suEXEC refused to run:\n{}",
        refused.join("\n")
    );

    // The program was replaced (renamed over), the configuration is the owner's, the count
    // continues: 127.0.0.4 has 20 left, 127.0.0.2 none.
    let meta = fs::metadata(user.path("public_html/cgi-bin/resolve")).unwrap();
    assert_ne!(meta.ino(), binary_inode, "the program was not replaced");
    assert_eq!(meta.mode() & 0o7777, 0o755);
    assert_eq!(
        fs::read(user.path("resolve/config.json")).unwrap(),
        config_bytes
    );
    assert_owned_with_mode(&user, "resolve/config.json", 0o600);
    for i in 10..LIMIT {
        assert_status(&get_link(&b, &user, 100 + i), 200, &apache, &suexec);
    }
    assert_status(&get_link(&b, &user, 200), 429, &apache, &suexec);
    assert_status(&get_link(&a, &user, 201), 429, &apache, &suexec);

    // A dry run over the deployed site, with and without a binary, changes nothing.
    let before = listing(&user.home);
    for extra in [
        &["--dry-run"][..],
        &["--dry-run", "--binary", &built_arg][..],
    ] {
        let dry = deploy(&local_args(&user, extra));
        dry.assert_ok();
        assert!(
            dry.stdout()
                .contains("resolve/config.json exists: kept as it is"),
            "{}",
            dry.all()
        );
        assert_untouched(&before, &user, "deploy.sh --dry-run on a deployed account");
    }

    // A group-writable cgi-bin (as some FTP clients leave it) makes suEXEC refuse the program;
    // deploying again repairs it.
    set_mode(&user.web().join("cgi-bin"), 0o775);
    let c = apache.client().bind_source("127.0.0.5");
    assert_status(&get_link(&c, &user, 300), 500, &apache, &suexec);
    let repair = deploy(&local_args(&user, &["--binary", &built_arg]));
    repair.assert_ok();
    assert!(
        repair
            .stdout()
            .contains("suEXEC refuses group- or world-writable directories"),
        "{}",
        repair.all()
    );
    assert_eq!(mode_of(&user.web().join("cgi-bin")), 0o755);
    assert_status(&get_link(&c, &user, 301), 200, &apache, &suexec);

    // An upload that fails leaves the site as it was, with no temporary files behind.
    set_mode(&user.web(), 0o550);
    let before = listing(&user.home);
    let failed = deploy(&local_args(&user, &["--binary", &built_arg]));
    failed.assert_exit(1);
    failed.warns(&["upload failed"]);
    assert_untouched(&before, &user, "a failed upload");
    set_mode(&user.web(), 0o750);
    assert_status(&get_link(&c, &user, 302), 200, &apache, &suexec);

    eprintln!("whole test: {:?}", started.elapsed());
}

#[test]
fn deploy_explains_what_stops_it() {
    require_root();
    // No cgi-bin: CGI is not set up for the account. Nothing is built or changed.
    let user = HostUser::create(false);
    let before = listing(&user.home);
    let r = deploy(&local_args(&user, &[]));
    r.assert_exit(3);
    r.warns(&[
        "cgi-bin does not exist",
        "cPanel",
        "File Manager",
        "--create-cgi-bin",
    ]);
    assert!(
        !r.stdout().contains("cargo build"),
        "built before looking:\n{}",
        r.all()
    );
    assert_untouched(&before, &user, "a refused deployment");
    let r = deploy(&local_args(&user, &["--create-cgi-bin", "--dry-run"]));
    r.assert_ok();
    assert!(
        r.stdout()
            .contains("cgi-bin is missing: it will be created"),
        "{}",
        r.all()
    );
    assert_untouched(&before, &user, "a dry run");
    // The same from a settings file, as an owner keeps them.
    let settings = std::env::temp_dir().join(format!("resolve-deploy-{}.conf", random_suffix()));
    fs::write(
        &settings,
        format!(
            "# the owner's settings\ntransport = local\ntarget = {}\n\ncreate-cgi-bin = yes\n\
             domain = \"example.test\"\n",
            user.home.display()
        ),
    )
    .unwrap();
    let r = deploy(&["--settings", settings.to_str().unwrap(), "--dry-run"]);
    fs::remove_file(&settings).unwrap();
    r.assert_ok();
    r.says(&[
        "cgi-bin is missing: it will be created",
        "open https://example.test/ (the page)",
    ]);
    assert_untouched(&before, &user, "a dry run");

    // A cgi-bin that is not the account's: suEXEC would refuse every program in it.
    let cgi = user.web().join("cgi-bin");
    fs::create_dir(&cgi).unwrap();
    set_mode(&cgi, 0o755);
    let before = listing(&user.home);
    let r = deploy(&local_args(&user, &[]));
    r.assert_exit(1);
    assert!(
        r.stderr().contains("wrong permissions") && r.stderr().contains("belongs to uid 0"),
        "{}",
        r.all()
    );
    assert_untouched(&before, &user, "a refused deployment");
    // Without it, --create-cgi-bin makes one that suEXEC accepts.
    fs::remove_dir(&cgi).unwrap();
    let r = deploy(&local_args(&user, &["--create-cgi-bin"]));
    r.assert_ok();
    assert_deployed(&user, &r.binary());

    // Mistakes in the options or the settings file; never a password on the command line.
    let r = deploy(&["--transport", "ftps", "--password", "hunter2"]);
    r.assert_exit(2);
    r.warns(&["never taken on the command line"]);
    assert!(!r.all().contains("hunter2"), "{}", r.all());
    let settings = std::env::temp_dir().join(format!("resolve-deploy-{}.conf", random_suffix()));
    fs::write(
        &settings,
        "# test\ntransport = ftps\nhost = ftp.example.test\npassword = hunter2\n",
    )
    .unwrap();
    let r = deploy(&["--settings", settings.to_str().unwrap()]);
    fs::remove_file(&settings).unwrap();
    r.assert_exit(2);
    r.warns(&["password-file"]);
    assert!(!r.all().contains("hunter2"), "{}", r.all());
    for (args, expected) in [
        (&[][..], "choose a transport"),
        (&["--transport", "carrier-pigeon"][..], "unknown transport"),
        (
            &["--transport", "local", "--frobnicate"][..],
            "unknown option --frobnicate",
        ),
        (
            &["--transport", "ssh", "--host", "h", "--allow-plain-ftp"][..],
            "--allow-plain-ftp applies to --transport ftps only",
        ),
        (
            &["--transport", "local", "--web-root", "../x"][..],
            "--web-root",
        ),
    ] {
        let r = deploy(args);
        assert_eq!(r.code(), Some(2), "{args:?}: {}", r.all());
        assert!(
            r.stderr().contains(expected),
            "{expected:?} in\n{}",
            r.all()
        );
    }
    let r = deploy(&["--help"]);
    r.assert_ok();
    r.says(&[
        "--transport local|ssh|ftps",
        "--dry-run",
        "--password-file",
        "deploy.conf",
    ]);
}

// ---------------------------------------------------------------------------------------------
// The other transports, against real servers on loopback

/// A server started by the test, killed (its process group) on drop.
struct Daemon {
    child: Child,
    what: String,
    log: PathBuf,
}

impl Daemon {
    fn start(what: &str, cmd: &mut Command, log: PathBuf, port: u16) -> Daemon {
        let err = fs::File::create(&log).expect("create daemon log");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let mut d = Daemon {
            child,
            what: what.to_string(),
            log,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = d.child.try_wait() {
                panic!("{what} exited ({status}):\n{}", d.log());
            }
            assert!(
                Instant::now() < until,
                "{what} did not listen:\n{}",
                d.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{} log:\n{}", self.what, self.log());
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Deploying again (`redeploy`) keeps the owner's configuration and replaces the program; the
/// site still answers.
fn assert_redeploy_keeps_the_configuration(user: &HostUser, redeploy: impl FnOnce()) {
    let config = b"{\"provider\": {\"kind\": \"echo\"}}\n";
    user.write(&user.path("resolve/config.json"), config, 0o600);
    let program = user.path("public_html/cgi-bin/resolve");
    let inode = fs::metadata(&program).unwrap().ino();
    redeploy();
    assert_eq!(fs::read(user.path("resolve/config.json")).unwrap(), config);
    assert_ne!(fs::metadata(&program).unwrap().ino(), inode);
    assert_site_answers(user);
}

/// Serves the account and checks that the deployed site answers: the page, and a link through
/// the starter configuration's echo provider.
fn assert_site_answers(user: &HostUser) {
    let suexec = SuexecLog::mark();
    let apache = apache_for(user);
    let client = apache.client();
    let r = client.get(&user.url("")).expect("page");
    assert_status(&r, 200, &apache, &suexec);
    let r = get_link(&client, user, 7);
    assert_status(&r, 200, &apache, &suexec);
    assert_eq!(r.text(), format!("{}\n", link(7)));
}

#[test]
fn deploy_over_ssh_runs_check_on_the_host() {
    require_root();
    for program in ["/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/rsync"] {
        support::system::require(Path::new(program), program);
    }
    let user = HostUser::create_with_shell(true, "/bin/sh");
    user.set_password(None);
    let dir = TempDir::new("sshd");
    for key in ["host_key", "client_key"] {
        run_ok(
            Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key)),
        );
    }
    let client_pub = fs::read_to_string(dir.join("client_key.pub")).unwrap();
    dir.write("authorized_keys", &client_pub);
    let port = free_port();
    let conf = dir.write(
        "sshd_config",
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nAllowUsers {name}\n",
            d = dir.path().display(),
            name = user.name
        ),
    );
    // sshd's privilege separation directory, made by its service at boot.
    fs::create_dir_all("/run/sshd").expect("create /run/sshd");
    let sshd = Daemon::start(
        "sshd",
        Command::new("/usr/sbin/sshd")
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&conf),
        dir.join("sshd.log"),
        port,
    );
    // The client trusts exactly this server's key.
    let host_pub = fs::read_to_string(dir.join("host_key.pub")).unwrap();
    let host_pub: Vec<&str> = host_pub.split_whitespace().take(2).collect();
    dir.write(
        "known_hosts",
        format!("[127.0.0.1]:{port} {}\n", host_pub.join(" ")),
    );
    let ssh_config = dir.write(
        "ssh_config",
        format!(
            "Host resolve-test-host\n  HostName 127.0.0.1\n  Port {port}\n  User {name}\n  \
             IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n  \
             StrictHostKeyChecking yes\n  BatchMode yes\n",
            d = dir.path().display(),
            name = user.name
        ),
    );
    let ssh_config = ssh_config.to_str().unwrap();
    let args = [
        "--transport",
        "ssh",
        "--ssh-config",
        ssh_config,
        "--host",
        "resolve-test-host",
        "--domain",
        "example.test",
    ];

    // A dry run looks at the account over ssh and changes nothing.
    let before = listing(&user.home);
    let dry = deploy(&[&args[..], &["--dry-run"]].concat());
    dry.assert_ok();
    dry.says(&["resolve/config.json will be created"]);
    assert_untouched(&before, &user, "deploy.sh --dry-run over ssh");

    // The deployment: rsync over ssh, then the host's own `resolve check`.
    let r = deploy(&args);
    r.assert_ok();
    let out = r.stdout();
    for expected in [
        "+ rsync ",
        "host: created resolve/config.json",
        &format!(
            "configuration: {}/resolve/config.json (the account's home directory)",
            user.home.display()
        ),
        "open https://example.test/ (the page)",
    ] {
        assert!(out.contains(expected), "{expected:?} in\n{}", r.all());
    }
    assert!(out.lines().any(|l| l.trim() == "OK"), "{}", r.all());
    assert_deployed(&user, &r.binary());
    assert!(
        sshd.log()
            .contains(&format!("Accepted publickey for {}", user.name)),
        "{}",
        sshd.log()
    );

    assert_redeploy_keeps_the_configuration(&user, || {
        deploy(&args).assert_ok();
    });
}

#[test]
fn deploy_over_ftps_requires_tls_and_never_shows_the_password() {
    require_root();
    for program in ["/usr/sbin/vsftpd", "/usr/bin/lftp", "/usr/bin/openssl"] {
        support::system::require(Path::new(program), program);
    }
    const PASSWORD: &str = "Ftp-Secret-4711";
    let user = HostUser::create_with_shell(true, "/bin/sh");
    user.set_password(Some(PASSWORD));
    let dir = TempDir::new("ftps");
    // A certificate for 127.0.0.1 that the client is told to trust (--ca-file): verified, as
    // every certificate is.
    run_ok(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(dir.join("key.pem"))
            .arg("-out")
            .arg(dir.join("cert.pem")),
    );
    dir.mkdir("empty");
    let server = |name: &str, tls: bool| {
        let port = free_port();
        let conf = dir.write(
            &format!("{name}.conf"),
            format!(
                "listen=YES\nlisten_address=127.0.0.1\nlisten_port={port}\nbackground=NO\n\
                 anonymous_enable=NO\nlocal_enable=YES\nwrite_enable=YES\nlocal_umask=022\n\
                 chmod_enable=YES\npam_service_name=vsftpd\nseccomp_sandbox=NO\n\
                 secure_chroot_dir={d}/empty\nvsftpd_log_file={d}/{name}.log\n\
                 ssl_enable={ssl}\nforce_local_logins_ssl={ssl}\nforce_local_data_ssl={ssl}\n\
                 require_ssl_reuse=NO\nrsa_cert_file={d}/cert.pem\nrsa_private_key_file={d}/key.pem\n",
                d = dir.path().display(),
                ssl = if tls { "YES" } else { "NO" }
            ),
        );
        let d = Daemon::start(
            name,
            Command::new("/usr/sbin/vsftpd").arg(&conf),
            dir.join(&format!("{name}.stderr")),
            port,
        );
        (d, port.to_string())
    };
    let (_tls_server, tls_port) = server("vsftpd-tls", true);
    let (_plain_server, plain_port) = server("vsftpd-plain", false);
    let password_file = dir.path().join("ftp-password");
    user.write(&password_file, format!("{PASSWORD}\n"), 0o600);
    let wrong_file = dir.path().join("wrong-password");
    user.write(&wrong_file, "not-the-password\n", 0o600);
    let ca = dir.join("cert.pem");
    let args = |port: &str, password: &Path| -> Vec<String> {
        [
            "--transport",
            "ftps",
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--user",
            &user.name,
            "--password-file",
            password.to_str().unwrap(),
            "--ca-file",
            ca.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let run = |args: Vec<String>, extra: &[&str]| {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend_from_slice(extra);
        let r = deploy(&all);
        assert!(
            !r.all().contains(PASSWORD),
            "the password was shown:\n{}",
            r.all()
        );
        r
    };

    // A server without TLS is refused (the password would travel readable); a wrong password
    // is named as such. Neither changes anything.
    let before = listing(&user.home);
    let r = run(args(&plain_port, &password_file), &[]);
    r.assert_exit(1);
    assert!(
        r.stderr().contains("refused FTP over TLS") && r.stderr().contains("--allow-plain-ftp"),
        "{}",
        r.all()
    );
    let r = run(
        args(&plain_port, &password_file),
        &["--allow-plain-ftp", "--dry-run"],
    );
    r.assert_ok();
    r.warns(&["password is sent unencrypted"]);
    let r = run(args(&tls_port, &wrong_file), &[]);
    r.assert_exit(1);
    r.warns(&["login refused"]);
    let r = run(args(&tls_port, &password_file), &["--dry-run"]);
    r.assert_ok();
    r.says(&["resolve/config.json will be created"]);
    assert_untouched(&before, &user, "refused or dry-run FTPS deployments");

    // The deployment over TLS: temporary names, SITE CHMOD, renames, modes read back.
    let r = run(args(&tls_port, &password_file), &[]);
    r.assert_ok();
    r.says(&[
        "set ftp:ssl-force true",
        "public_html/cgi-bin/resolve: -rwxr-xr-x",
    ]);
    assert_deployed(&user, &r.binary());

    assert_redeploy_keeps_the_configuration(&user, || {
        run(args(&tls_port, &password_file), &[]).assert_ok();
    });
}

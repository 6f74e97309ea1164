//! deploy.sh end to end, as root: a new cPanel-style account, `deploy.sh --transport local`, a real Apache running the program through suEXEC (UserDir, Debian's apache2-suexec-pristine), a re-deploy under load, `--dry-run`, and the errors an owner can meet.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use support::account::{
    SUEXEC_LOG, SuexecLog, apache_for, assert_status, check_suexec_fits, diagnostics, form_action,
    random_suffix, send_through_page,
};
use support::config::{TOKEN, http_provider, rule};
use support::process::spawn_group;
use support::temp::{entries_under, set_mode};
use support::urlenc::link_param;
use support::{HostUser, HttpClient, Provider, Request, Response, TempDir, free_port, is_root};

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

/// The page file as deploy.sh installs it: `public/FILE`, with the form's `action` in
/// index.html set to `endpoint` and the version filled in.
fn installed_page(file: &str, endpoint: &str) -> Vec<u8> {
    let bytes = fs::read(repo().join("public").join(file)).unwrap();
    if file != "index.html" {
        return bytes;
    }
    let text = String::from_utf8(bytes).expect("utf-8 index.html");
    let at = text
        .find(" action=\"")
        .expect("a form action in public/index.html")
        + 9;
    let end = at + text[at..].find('"').expect("closing quote");
    format!("{}{endpoint}{}", &text[..at], &text[end..])
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
        .into_bytes()
}

/// What is where after a first deployment (the page in `public_html/resolve/`), owned by the
/// account, with the modes suEXEC wants.
fn assert_serves_only_the_page_and_program(user: &HostUser) {
    let served: Vec<String> = entries_under(&user.web())
        .iter()
        .map(|p| p.strip_prefix(user.web()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        served,
        [
            "cgi-bin",
            "cgi-bin/resolve",
            "resolve",
            "resolve/app.js",
            "resolve/index.html",
            "resolve/style.css"
        ],
        "public_html holds the page and the program, nothing else"
    );
}

fn assert_deployed(user: &HostUser, built: &Path) {
    user.assert_mode("public_html/cgi-bin", 0o755);
    user.assert_mode("public_html/cgi-bin/resolve", 0o755);
    assert_eq!(
        fs::read(user.path("public_html/cgi-bin/resolve")).unwrap(),
        fs::read(built).unwrap(),
        "the deployed binary is the one built"
    );
    user.assert_mode("public_html/resolve", 0o755);
    for page in ["index.html", "style.css", "app.js"] {
        user.assert_mode(&format!("public_html/resolve/{page}"), 0o644);
        assert_eq!(
            fs::read(user.web().join("resolve").join(page)).unwrap(),
            installed_page(page, "/cgi-bin/resolve"),
            "public_html/resolve/{page}"
        );
    }
    assert_serves_only_the_page_and_program(user);
    user.assert_mode("resolve/installed.txt", 0o600);
    user.assert_mode("resolve", 0o700);
    user.assert_mode("resolve/ratelimit", 0o700);
    user.assert_mode("resolve/config.json", 0o600);
    let starter: serde_json::Value =
        serde_json::from_slice(&fs::read(user.path("resolve/config.json")).unwrap())
            .expect("the starter configuration is plain JSON");
    assert_eq!(starter["provider"]["kind"], "echo", "{starter}");
}

// ---------------------------------------------------------------------------------------------
// The site

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
        "open https://example.test/resolve/ (the page)",
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
        let r = client
            .get(&user.url(&format!("resolve/{page}")))
            .expect("page");
        assert_status(&r, 200, &apache, &suexec);
        let file = if page.is_empty() { "index.html" } else { page };
        assert_eq!(r.body, installed_page(file, "/cgi-bin/resolve"), "{page}");
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
        run.assert_ok()
            .says(&["resolve/config.json exists: kept as it is"]);
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
    apache.assert_log_lacks(&[
        "End of script output",
        "malformed header",
        "Exec format error",
        "Text file busy",
        "suexec policy violation",
    ]);
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
    user.assert_mode("resolve/config.json", 0o600);
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
        dry.assert_ok()
            .says(&["resolve/config.json exists: kept as it is"]);
        assert_untouched(&before, &user, "deploy.sh --dry-run on a deployed account");
    }

    // A group-writable cgi-bin (as some FTP clients leave it) makes suEXEC refuse the program;
    // deploying again repairs it.
    set_mode(&user.web().join("cgi-bin"), 0o775);
    let c = apache.client().bind_source("127.0.0.5");
    assert_status(&get_link(&c, &user, 300), 500, &apache, &suexec);
    let repair = deploy(&local_args(&user, &["--binary", &built_arg]));
    repair
        .assert_ok()
        .says(&["suEXEC refuses group- or world-writable directories"]);
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
    r.assert_ok()
        .says(&["cgi-bin is missing: it will be created"]);
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
        "open https://example.test/resolve/ (the page)",
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
        let child = spawn_group(cmd, Stdio::null(), err, what);
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
    let (_, r) = send_through_page(&apache, &user.url("resolve/"), &link(6));
    assert_status(&r, 200, &apache, &suexec);
    assert!(r.text().contains(&link(6)), "{}", r.everything());
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
        "open https://example.test/resolve/ (the page)",
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
                 xferlog_enable=YES\nlog_ftp_protocol=YES\n\
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
    // A deployment that should work, failing: with what the servers logged of it (lftp's side
    // is in deploy.sh's output).
    let servers_log = || {
        ["vsftpd-tls", "vsftpd-plain"]
            .iter()
            .map(|name| {
                let log = fs::read_to_string(dir.join(&format!("{name}.log"))).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- {name}.log, last lines\n{}\n", tail.join("\n"))
            })
            .collect::<String>()
    };
    let deployed = |r: Deployed| {
        assert!(
            r.output.status.success(),
            "deploy.sh failed:\n{}{}",
            r.all(),
            servers_log()
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
    let r = deployed(run(
        args(&plain_port, &password_file),
        &["--allow-plain-ftp", "--dry-run"],
    ));
    r.warns(&["password is sent unencrypted"]);
    let r = run(args(&tls_port, &wrong_file), &[]);
    r.assert_exit(1);
    r.warns(&["login refused"]);
    let r = deployed(run(args(&tls_port, &password_file), &["--dry-run"]));
    r.says(&["resolve/config.json will be created"]);
    assert_untouched(&before, &user, "refused or dry-run FTPS deployments");

    // The deployment over TLS: temporary names, SITE CHMOD, renames, modes read back.
    let r = deployed(run(args(&tls_port, &password_file), &[]));
    r.says(&[
        "set ftp:ssl-force true",
        "public_html/cgi-bin/resolve: -rwxr-xr-x",
    ]);
    assert_deployed(&user, &r.binary());

    // Over FTPS too, a page file changed since is found (fetched and hashed) and kept, the new
    // version's beside it.
    let css = user.web().join("resolve/style.css");
    user.write(&css, "/* the owner's */\n", 0o644);
    let r = deployed(run(args(&tls_port, &password_file), &[]));
    r.warns(&["public_html/resolve/style.css was edited since deploy.sh installed it"]);
    assert_eq!(fs::read_to_string(&css).unwrap(), "/* the owner's */\n");
    assert_eq!(
        fs::read(user.web().join("resolve/style.css.new")).unwrap(),
        installed_page("style.css", "/cgi-bin/resolve")
    );
    user.write(&css, installed_page("style.css", "/cgi-bin/resolve"), 0o644);

    assert_redeploy_keeps_the_configuration(&user, || {
        deployed(run(args(&tls_port, &password_file), &[]));
    });
}

// ---------------------------------------------------------------------------------------------
// The owner's site: what deploy.sh did not install, it does not replace

/// `resolve check` on the account's configuration, run as the account.
fn check_as(user: &HostUser) -> String {
    let out = Command::new("runuser")
        .args(["-u", &user.name, "--"])
        .arg(user.path("public_html/cgi-bin/resolve"))
        .arg("check")
        .env_remove("RESOLVE_CONFIG")
        .env_remove("GATEWAY_INTERFACE")
        .output()
        .expect("run resolve check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "resolve check failed:\n{text}");
    text
}

#[test]
fn an_existing_site_keeps_its_files_and_the_page_works_from_its_folder() {
    require_root();
    let suexec = SuexecLog::mark();
    let user = HostUser::create(true);
    // The owner's own site, at the web root.
    let theirs = [
        ("index.html", "<!doctype html><title>My home page</title>\n"),
        ("style.css", "body { color: rebeccapurple }\n"),
        ("app.js", "console.log('mine');\n"),
    ];
    for (name, text) in theirs {
        user.write(&user.web().join(name), text, 0o644);
    }
    let keeps_theirs = |user: &HostUser, what: &str| {
        for (name, text) in theirs {
            assert_eq!(
                fs::read_to_string(user.web().join(name)).unwrap(),
                text,
                "{what} changed public_html/{name}"
            );
        }
    };

    let first = deploy(&local_args(&user, &["--domain", "example.test"]));
    first.assert_ok();
    first.says(&["open https://example.test/resolve/ (the page)"]);
    keeps_theirs(&user, "the first deployment");
    let built = first.binary();
    let built_arg = built.to_str().unwrap().to_string();

    // The starter configuration: safe by default, and it passes check.
    let cfg: serde_json::Value =
        serde_json::from_slice(&fs::read(user.path("resolve/config.json")).unwrap()).unwrap();
    assert_eq!(cfg["provider"], json!({"kind": "echo"}), "{cfg}");
    assert_eq!(
        cfg["spend"],
        json!([
            {"name": "day", "limit": 100, "window_secs": 86400},
            {"name": "month", "limit": 1500, "window_secs": 2592000}
        ]),
        "{cfg}"
    );
    assert_eq!(
        cfg["allowed_origins"],
        json!(["https://example.test", "https://www.example.test"]),
        "{cfg}"
    );
    let check = check_as(&user);
    assert!(check.lines().any(|l| l.trim() == "OK"), "{check}");
    assert!(!check.contains("WARN"), "{check}");
    let manifest = fs::read_to_string(user.path("resolve/installed.txt")).unwrap();
    for rel in [
        "public_html/resolve/index.html",
        "public_html/resolve/style.css",
        "public_html/resolve/app.js",
        "public_html/cgi-bin/resolve",
    ] {
        assert!(
            manifest.contains(&format!("  {rel}\n")),
            "{rel} in\n{manifest}"
        );
    }

    // The page in its folder sends links to /cgi-bin/resolve, and they resolve there, as the
    // account. The origin allowed is the real site's, so the test's own is added, as an owner
    // would for a second address.
    let mut cfg = cfg;
    let apache = apache_for(&user);
    cfg["allowed_origins"]
        .as_array_mut()
        .unwrap()
        .push(json!(apache.base_url()));
    user.write(
        &user.path("resolve/config.json"),
        serde_json::to_vec_pretty(&cfg).unwrap(),
        0o600,
    );
    let (sent_to, r) = send_through_page(&apache, &user.url("resolve/"), &link(1));
    assert_eq!(sent_to, "/cgi-bin/resolve");
    assert_status(&r, 200, &apache, &suexec);
    assert!(r.text().contains(&link(1)), "{}", r.everything());
    let client = apache.client();
    let r = client.get(&user.url("")).expect("home page");
    assert_status(&r, 200, &apache, &suexec);
    assert_eq!(r.text(), theirs[0].1, "the owner's home page is served");
    // Another site's page is refused before anything is counted.
    let r = client
        .send(
            &Request::post_form("/cgi-bin/resolve", link_param(&link(2)))
                .header("Origin", "https://elsewhere.example"),
        )
        .expect("answer");
    assert_status(&r, 403, &apache, &suexec);
    let log = suexec.since();
    assert!(
        log.contains(&format!("uid: ({}/{})", user.uid, user.name)),
        "not run as the account: {log}"
    );

    // --endpoint: the page sends links where it is told.
    let r = deploy(&local_args(
        &user,
        &[
            "--binary",
            &built_arg,
            "--endpoint",
            &user.url("cgi-bin/resolve"),
        ],
    ));
    r.assert_ok();
    let html = fs::read_to_string(user.web().join("resolve/index.html")).unwrap();
    assert_eq!(form_action(&html), user.url("cgi-bin/resolve"));
    let (_, r) = send_through_page(&apache, &user.url("resolve/"), &link(3));
    assert_status(&r, 200, &apache, &suexec);

    // At the web root, the owner's files are in the way: refused, named, nothing changed.
    let before = listing(&user.home);
    let r = deploy(&local_args(
        &user,
        &["--binary", &built_arg, "--page-dir", "."],
    ));
    r.assert_exit(1);
    r.warns(&[
        "public_html/index.html: not installed by deploy.sh",
        "public_html/style.css: not installed by deploy.sh",
        "public_html/app.js: not installed by deploy.sh",
        "--force",
    ]);
    assert_untouched(&before, &user, "a refused deployment");

    // A file of the page the owner changed is kept: the new version's goes beside it, and
    // deploy.sh says so.
    let css = user.web().join("resolve/style.css");
    user.write(&css, "/* mine now */\n", 0o644);
    let r = deploy(&local_args(&user, &["--binary", &built_arg]));
    r.assert_ok();
    r.warns(&[
        "public_html/resolve/style.css was edited since deploy.sh installed it: it is kept as \
         it is, and the new version's goes beside it as public_html/resolve/style.css.new",
    ]);
    assert_eq!(fs::read_to_string(&css).unwrap(), "/* mine now */\n");
    assert_eq!(
        fs::read(user.web().join("resolve/style.css.new")).unwrap(),
        installed_page("style.css", "/cgi-bin/resolve")
    );
    user.assert_mode("public_html/resolve/style.css.new", 0o644);
    let listed = fs::read_to_string(user.path("resolve/installed.txt")).unwrap();
    assert!(
        listed.contains("  public_html/resolve/style.css.new\n")
            && listed.contains("  public_html/resolve/style.css\n"),
        "{listed}"
    );
    let (_, r) = send_through_page(&apache, &user.url("resolve/"), &link(5));
    assert_status(&r, 200, &apache, &suexec);

    // A program in cgi-bin/resolve that deploy.sh did not install.
    let listed = fs::read_to_string(user.path("resolve/installed.txt")).unwrap();
    user.write(
        &user.path("resolve/installed.txt"),
        listed
            .lines()
            .filter(|l| !l.ends_with("cgi-bin/resolve") && !l.ends_with("style.css"))
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
        0o600,
    );
    user.write(
        &user.web().join("resolve/style.css"),
        fs::read(repo().join("public/style.css")).unwrap(),
        0o644,
    );
    let r = deploy(&local_args(&user, &["--binary", &built_arg]));
    r.assert_exit(1);
    r.warns(&["public_html/cgi-bin/resolve: not installed by this deploy.sh"]);

    // --force replaces them, and records them as deploy.sh's from then on.
    let r = deploy(&local_args(
        &user,
        &["--binary", &built_arg, "--page-dir", ".", "--force"],
    ));
    r.assert_ok();
    r.warns(&["--force: replacing public_html/index.html"]);
    for page in ["index.html", "style.css", "app.js"] {
        assert_eq!(
            fs::read(user.web().join(page)).unwrap(),
            installed_page(page, "/cgi-bin/resolve"),
            "{page}"
        );
    }
    let r = deploy(&local_args(
        &user,
        &["--binary", &built_arg, "--page-dir", "."],
    ));
    r.assert_ok();
    let (sent_to, r) = send_through_page(&apache, &user.url(""), &link(4));
    assert_eq!(sent_to, "/cgi-bin/resolve");
    assert_status(&r, 200, &apache, &suexec);
    // The page in its folder is still deploy.sh's, and still unchanged: replaced without --force.
    deploy(&local_args(&user, &["--binary", &built_arg])).assert_ok();
}

#[test]
fn a_provider_and_its_token_go_only_into_a_new_configuration() {
    require_root();
    let user = HostUser::create(true);
    const SECRET: &str = "RDTOKEN0123456789abcdefXYZ";
    let dir = TempDir::new("token");
    let token_file = dir.write("token", format!("{SECRET}\n"));
    set_mode(&token_file, 0o600);
    let token_arg = token_file.to_str().unwrap();

    // Mistakes in the options: no token on the command line, a preset that does not exist.
    let r = deploy(&local_args(&user, &["--token", SECRET]));
    r.assert_exit(2);
    assert!(!r.all().contains(SECRET), "{}", r.all());
    for (extra, expected) in [
        (&["--provider", "realdebrid"][..], "needs --token-file"),
        (
            &["--provider", "nodebrid", "--token-file", token_arg][..],
            "unknown provider",
        ),
        (&["--token-file", token_arg][..], "needs --provider"),
    ] {
        let r = deploy(&local_args(&user, extra));
        r.assert_exit(2);
        r.warns(&[expected]);
    }

    // A dry run shows the configuration it would write, without the token.
    let args = [
        "--domain",
        "example.test",
        "--provider",
        "realdebrid",
        "--token-file",
        token_arg,
    ];
    let r = deploy(&local_args(&user, &[&args[..], &["--dry-run"]].concat()));
    r.assert_ok();
    r.says(&["\"preset\": \"realdebrid\"", "(the first line of "]);
    assert!(!r.all().contains(SECRET), "{}", r.all());

    let r = deploy(&local_args(&user, &args));
    r.assert_ok();
    assert!(
        !r.all().contains(SECRET),
        "the token was shown:\n{}",
        r.all()
    );
    r.says(&["resolve check on the new configuration (here, before uploading it)"]);
    let cfg: serde_json::Value =
        serde_json::from_slice(&fs::read(user.path("resolve/config.json")).unwrap()).unwrap();
    assert_eq!(
        cfg["provider"],
        json!({"preset": "realdebrid", "token": SECRET})
    );
    user.assert_mode("resolve/config.json", 0o600);
    let check = check_as(&user);
    assert!(!check.contains(SECRET), "{check}");
    assert!(
        !check.contains("WARN spend") && !check.contains("WARN allowed_origins"),
        "{check}"
    );
    assert!(check.lines().any(|l| l.trim() == "OK"), "{check}");
    // Nowhere under the web root, and nothing left behind.
    for p in entries_under(&user.home) {
        if p.is_file() && p != user.path("resolve/config.json") {
            let bytes = fs::read(&p).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(SECRET),
                "the token is in {}",
                p.display()
            );
        }
    }

    // An existing configuration is never changed: said so, and nothing happens.
    let before = listing(&user.home);
    let r = deploy(&local_args(
        &user,
        &["--provider", "alldebrid", "--token-file", token_arg],
    ));
    r.assert_exit(1);
    r.warns(&[
        "deploy.sh never changes a configuration",
        "\"preset\": \"alldebrid\"",
    ]);
    assert!(!r.all().contains(SECRET), "{}", r.all());
    assert_untouched(&before, &user, "a refused deployment");
}

/// The cookies a `Set-Cookie` list gives, as a `Cookie` header (the removed ones left out).
fn cookies_of(r: &Response, jar: &mut Vec<(String, String)>) -> String {
    for (_, value) in r
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("Set-Cookie"))
    {
        let (name, rest) = value.split_once('=').expect("name=value");
        jar.retain(|(n, _)| n != name);
        if !value.contains("Max-Age=0") {
            jar.push((name.to_owned(), rest.split(';').next().unwrap().to_owned()));
        }
    }
    jar.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn admin_password_is_shown_once_and_only_its_hash_is_kept() {
    require_root();
    let suexec = SuexecLog::mark();
    let user = HostUser::create(true);

    // Archives to share never hold one; a dry run says where the hash would go, and makes none.
    let dist = TempDir::new("admin-package");
    let r = deploy(&[
        "--package",
        dist.path().to_str().unwrap(),
        "--admin-password",
    ]);
    r.assert_exit(2);
    r.warns(&["never hold a password"]);
    let r = deploy(&local_args(
        &user,
        &["--admin-password", "--domain", "example.test", "--dry-run"],
    ));
    r.assert_ok();
    r.says(&[
        "\"admin\": {\"password_hash\": \"(the hash of a new random password, shown once)\"}",
        "dashboard: https://example.test/cgi-bin/resolve/admin",
    ]);
    assert!(!r.stdout().contains("shown this once"), "{}", r.all());

    let r = deploy(&local_args(
        &user,
        &["--admin-password", "--domain", "example.test"],
    ));
    r.assert_ok();
    let out = r.stdout();
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("the dashboard's password (shown this once"))
        .unwrap_or_else(|| panic!("no password shown:\n{}", r.all()));
    let password = lines[at + 1].trim().to_owned();
    assert!(
        password.len() == 20
            && password
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{password:?}"
    );
    assert_eq!(
        r.all().matches(&password).count(),
        1,
        "shown once:\n{}",
        r.all()
    );
    r.says(&[
        "sign in at https://example.test/cgi-bin/resolve/admin",
        "dashboard: https://example.test/cgi-bin/resolve/admin (its password was shown above, once)",
    ]);
    let cfg: serde_json::Value =
        serde_json::from_slice(&fs::read(user.path("resolve/config.json")).unwrap()).unwrap();
    let hash = cfg["admin"]["password_hash"]
        .as_str()
        .unwrap_or_else(|| panic!("no hash in {cfg}"))
        .to_owned();
    assert!(
        resolve::support::password::verify(&hash, &password),
        "{hash}"
    );
    let check = check_as(&user);
    assert!(check.contains("dashboard: on"), "{check}");
    assert!(!check.contains(&hash), "{check}");

    // Signing in through suEXEC, as the owner's browser would, at the address in the bar.
    let apache = apache_for(&user);
    let client = apache.client();
    let mut jar = Vec::new();
    let form = client.get("/cgi-bin/resolve/admin").unwrap();
    assert_status(&form, 200, &apache, &suexec);
    assert!(
        form.header("Set-Cookie")
            .is_some_and(|c| c.contains("; Path=/cgi-bin/resolve/admin;")),
        "{}",
        form.everything()
    );
    let token = {
        let text = form.text();
        let at = text.find("name=\"csrf\" value=\"").expect("a token") + 19;
        text[at..at + text[at..].find('"').unwrap()].to_owned()
    };
    let cookie = cookies_of(&form, &mut jar);
    let signed_in = client
        .send(
            &Request::post_form(
                "/cgi-bin/resolve/admin",
                format!("action=signin&csrf={token}&password={password}"),
            )
            .header("Cookie", &cookie),
        )
        .unwrap();
    assert_status(&signed_in, 303, &apache, &suexec);
    let cookie = cookies_of(&signed_in, &mut jar);
    let page = client
        .send(&Request::get("/cgi-bin/resolve/admin").header("Cookie", &cookie))
        .unwrap();
    assert_status(&page, 200, &apache, &suexec);
    assert!(
        page.text().contains("Configuration check"),
        "{}",
        page.everything()
    );
    // The dashboard's secret was made by the account, private, outside the web root.
    let secret = user.path("resolve/ratelimit/admin-secret");
    assert_eq!(mode_of(&secret), 0o600);
    assert_eq!(
        fs::metadata(&secret).unwrap().uid(),
        fs::metadata(&user.home).unwrap().uid()
    );
    // The password is in no file of the account.
    for p in entries_under(&user.home) {
        if p.is_file() {
            let bytes = fs::read(&p).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(&password),
                "the password is in {}",
                p.display()
            );
        }
    }

    // An existing configuration is never changed: said so, and nothing happens.
    let before = listing(&user.home);
    let r = deploy(&local_args(&user, &["--admin-password"]));
    r.assert_exit(1);
    r.warns(&[
        "deploy.sh never changes a configuration",
        "resolve hash-password",
    ]);
    assert!(!r.stdout().contains("shown this once"), "{}", r.all());
    assert_untouched(&before, &user, "a refused deployment");
}

//! Browser tests: headless Chromium, driven over WebDriver, using the page in `public/` against `resolve serve`.
//!
//! Needs Debian's `chromium` and `chromium-driver` packages. Set `BROWSER_TEST_KEEP=1` to keep the
//! temporary folder (screenshots, server and driver logs) after a passing run; it is always kept when
//! a test fails.

mod support;

use std::env;
use std::fs;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::config::{self, rule};
use support::system::command;
use support::temp::set_mode;
use support::{TempDir, free_port};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key under which W3C WebDriver returns an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
const LINK: &str = "https://example.com/file.zip";
const POLL: Duration = Duration::from_millis(100);

/// One browser at a time: the countdown test measures time, and this machine may have few cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Fails, never skips, when the browser is not installed.
fn require_browser() {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return;
    }
    let missing = missing.join(" and ");
    if env::var("CI").as_deref() == Ok("true") {
        panic!(
            "browser test cannot run: {missing} not found; CI must install the Debian packages \
             chromium and chromium-driver before running the tests"
        );
    }
    panic!(
        "browser test cannot run: {missing} not found; run tests/run-all.sh as root \
         (it installs the Debian packages chromium and chromium-driver)"
    );
}

fn log_file(path: &Path) -> Stdio {
    Stdio::from(fs::File::create(path).expect("create log file"))
}

fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Polls `probe` until it gives `Ok`, or fails with its last `Err` after `timeout`.
fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(value) => return value,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => thread::sleep(POLL),
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Sends one HTTP request with an optional JSON body; answers the status and the body text.
fn http(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    body: Option<&Value>,
) -> Result<(u16, String), String> {
    let sent = match (method, body) {
        ("GET", _) => agent.get(url).call(),
        ("DELETE", _) => agent.delete(url).call(),
        ("POST", body) => agent
            .post(url)
            .header("Content-Type", "application/json")
            .send(body.unwrap_or(&json!({})).to_string()),
        _ => return Err(format!("unsupported method {method}")),
    };
    let response = sent.map_err(|e| format!("{method} {url}: {e}"))?;
    let status = response.status().as_u16();
    let text = response
        .into_body()
        .into_with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| format!("{method} {url}: reading the answer: {e}"))?;
    Ok((status, text))
}

/// A small W3C WebDriver client for one session.
struct WebDriver {
    agent: ureq::Agent,
    session: String,
}

impl WebDriver {
    fn start(driver: &str, profile: &Path, javascript: bool) -> WebDriver {
        let agent = agent();
        // Content setting 2 blocks the page's own scripts; WebDriver commands still work.
        let prefs = if javascript {
            json!({})
        } else {
            json!({"profile.managed_default_content_settings.javascript": 2})
        };
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            "timeouts": {"implicit": 0, "pageLoad": 30000, "script": 10000},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "prefs": prefs,
                "args": [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--disable-dev-shm-usage",
                    "--no-proxy-server",
                    "--lang=en-US",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let value = Self::unwrap(http(
            &agent,
            "POST",
            &format!("{driver}/session"),
            Some(&caps),
        ))
        .unwrap_or_else(|e| panic!("starting Chromium through chromedriver failed: {e}"));
        let id = value["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("new session answered no sessionId: {value}"));
        WebDriver {
            agent,
            session: format!("{driver}/session/{id}"),
        }
    }

    /// The `value` of a WebDriver answer, or its error as text.
    fn unwrap(answer: Result<(u16, String), String>) -> Result<Value, String> {
        let (status, text) = answer?;
        let body: Value =
            serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text}"))?;
        let value = body.get("value").cloned().unwrap_or(Value::Null);
        if status == 200 {
            Ok(value)
        } else {
            Err(format!(
                "HTTP {status}: {}: {}",
                value["error"].as_str().unwrap_or("?"),
                value["message"].as_str().unwrap_or("")
            ))
        }
    }

    fn try_cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.session);
        Self::unwrap(http(&self.agent, method, &url, body.as_ref()))
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_cmd(method, path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path} failed: {e}"))
    }

    fn open(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    fn find(&self, css: &str) -> String {
        let found = self.cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        found[ELEMENT_KEY]
            .as_str()
            .unwrap_or_else(|| panic!("no element reference for {css}: {found}"))
            .to_string()
    }

    fn click(&self, css: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/clear"), Some(json!({})));
        self.cmd(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        );
    }

    fn script(&self, body: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": body, "args": []})),
        )
    }

    fn resize(&self, width: u32, height: u32) {
        self.cmd(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        );
    }

    fn try_screenshot(&self, path: &Path) -> Result<(), String> {
        let data = self.try_cmd("GET", "/screenshot", None)?;
        let png = base64_decode(data.as_str().ok_or("screenshot is not a string")?)?;
        fs::write(path, png).map_err(|e| format!("writing {}: {e}", path.display()))
    }

    fn screenshot(&self, path: &Path) {
        self.try_screenshot(path)
            .unwrap_or_else(|e| panic!("screenshot failed: {e}"));
        assert!(
            fs::metadata(path).map(|m| m.len()).unwrap_or(0) > 1000,
            "screenshot {} is empty",
            path.display()
        );
    }

    fn quit(&self) {
        let _ = http(&self.agent, "DELETE", &self.session, None);
    }
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for byte in text.bytes() {
        let six = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\n' | b'\r' => continue,
            _ => return Err(format!("bad base64 byte {byte:#x}")),
        };
        acc = (acc << 6) | u32::from(six);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// What the page shows, read in one go.
#[derive(Debug)]
struct View {
    result: String,
    href: Option<String>,
    countdown: Option<String>,
    message: Option<String>,
    disabled: bool,
    button: String,
    path: String,
    marker: bool,
}

const VIEW_SCRIPT: &str = r#"
var r = document.getElementById('result');
var b = document.getElementById('submit');
if (!r || !b) { return {missing: true, path: location.pathname, text: document.body ? document.body.innerText : ''}; }
var a = r.querySelector('a');
var c = r.querySelector('.countdown');
var m = r.querySelector('.message');
return {
  result: r.innerText,
  href: a ? a.getAttribute('href') : null,
  countdown: c ? c.textContent : null,
  message: m ? m.textContent : null,
  disabled: b.disabled,
  button: b.textContent,
  path: location.pathname,
  marker: window.resolveTestMarker === 'kept'
};
"#;

/// A running `resolve serve`, chromedriver and browser session, all ended on drop.
struct Harness {
    dir: TempDir,
    base: String,
    server: Option<Child>,
    driver: Option<Child>,
    web: Option<WebDriver>,
    _serial: MutexGuard<'static, ()>,
}

impl Harness {
    fn start() -> Harness {
        Harness::start_with(true)
    }

    fn start_with(javascript: bool) -> Harness {
        require_browser();
        let serial = SERIAL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = TempDir::new("browser");
        let data = dir.mkdir("data");
        set_mode(&data, 0o700);
        let config = config::write(
            &dir,
            &json!({
                "provider": {"kind": "echo"},
                "store": {"kind": "file", "dir": data},
                "rules": [rule("ip", "ip", 2, 5)],
            }),
        );
        let mut harness = Harness {
            base: String::new(),
            server: None,
            driver: None,
            web: None,
            _serial: serial,
            dir,
        };
        let dir = harness.dir.path().to_path_buf();

        let public = Path::new(env!("CARGO_MANIFEST_DIR")).join("public");
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let server = command(&["serve", "--addr", &addr.to_string()])
            .arg("--public")
            .arg(&public)
            .arg("--config")
            .arg(&config)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log_file(&dir.join("server.out")))
            .stderr(log_file(&dir.join("server.log")))
            .spawn()
            .expect("start resolve serve");
        harness.server = Some(server);
        harness.base = format!("http://{addr}/");
        let server_log = dir.join("server.log");
        wait_for(
            "resolve serve to accept connections",
            Duration::from_secs(20),
            || {
                if let Some(status) = harness
                    .server
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    panic!(
                        "resolve serve exited early ({status}):\n{}",
                        tail(&server_log)
                    );
                }
                TcpStream::connect_timeout(&addr, Duration::from_millis(500))
                    .map(drop)
                    .map_err(|e| e.to_string())
            },
        );

        let driver_port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={driver_port}"))
            .stdin(Stdio::null())
            .stdout(log_file(&dir.join("chromedriver.log")))
            .stderr(Stdio::from(
                fs::OpenOptions::new()
                    .append(true)
                    .open(dir.join("chromedriver.log"))
                    .expect("open driver log"),
            ))
            .spawn()
            .expect("start chromedriver");
        harness.driver = Some(driver);
        let driver_url = format!("http://127.0.0.1:{driver_port}");
        let status_agent = agent();
        let driver_log = dir.join("chromedriver.log");
        wait_for("chromedriver to be ready", Duration::from_secs(20), || {
            if let Some(status) = harness
                .driver
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "chromedriver exited early ({status}):\n{}",
                    tail(&driver_log)
                );
            }
            let value = WebDriver::unwrap(http(
                &status_agent,
                "GET",
                &format!("{driver_url}/status"),
                None,
            ))?;
            if value["ready"] == json!(true) {
                Ok(())
            } else {
                Err(value.to_string())
            }
        });

        let profile = dir.join("profile");
        fs::create_dir_all(&profile).expect("create browser profile folder");
        harness.web = Some(WebDriver::start(&driver_url, &profile, javascript));
        harness
    }

    fn web(&self) -> &WebDriver {
        self.web.as_ref().expect("browser session")
    }

    fn open_page(&self) {
        self.web().open(&self.base);
        // Set on the page's window: gone if the form navigates away instead of answering in place.
        self.web()
            .script("window.resolveTestMarker = 'kept'; return null;");
    }

    fn view(&self) -> View {
        let v = self.web().script(VIEW_SCRIPT);
        if v.get("missing").is_some() {
            panic!(
                "the page was replaced (now at {}): {}",
                v["path"], v["text"]
            );
        }
        let text = |key: &str| v[key].as_str().map(str::to_string);
        View {
            result: text("result").unwrap_or_default(),
            href: text("href"),
            countdown: text("countdown"),
            message: text("message"),
            disabled: v["disabled"].as_bool().expect("button state"),
            button: text("button").unwrap_or_default(),
            path: text("path").unwrap_or_default(),
            marker: v["marker"].as_bool().unwrap_or(false),
        }
    }

    /// Types `link`, presses the button and waits until the page shows a new answer.
    fn submit(&self, link: &str) -> View {
        self.web()
            .script("document.getElementById('result').textContent = ''; return null;");
        self.web().type_into("#link", link);
        self.web().click("#submit");
        wait_for("an answer on the page", Duration::from_secs(15), || {
            let view = self.view();
            if view.result.trim().is_empty() || view.button == "Working…" {
                Err(format!("{view:?}"))
            } else {
                Ok(view)
            }
        })
    }

    fn shot(&self, name: &str) {
        self.web().screenshot(&self.dir.join(name));
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let failed = thread::panicking();
        if let Some(web) = self.web.take() {
            if failed {
                let _ = web.try_screenshot(&self.dir.join("failure.png"));
            }
            web.quit();
        }
        for child in [self.driver.take(), self.server.take()]
            .into_iter()
            .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(self.dir.join("profile"));
        if failed || env::var_os("BROWSER_TEST_KEEP").is_some() {
            self.dir.keep();
            let mut err = std::io::stderr();
            let _ = writeln!(
                err,
                "browser test files kept in {}\n--- server.log (end) ---\n{}",
                self.dir.path().display(),
                tail(&self.dir.join("server.log"))
            );
        }
    }
}

fn seconds_in(text: &str) -> u64 {
    text.split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in the countdown {text:?}"))
}

#[test]
fn page_is_a_plain_accessible_form() {
    let h = Harness::start();
    h.web().open(&h.base);
    let page = h.web().script(
        r#"
var f = document.querySelector('form');
var i = document.querySelector('input[name="link"]');
var b = f && f.querySelector('button[type="submit"], input[type="submit"]');
var l = i && i.labels && i.labels[0];
var r = document.getElementById('result');
return {
  method: f ? f.getAttribute('method') : null,
  action: f ? f.getAttribute('action') : null,
  inside: !!(f && i && f.contains(i)),
  type: i ? i.type : null,
  required: i ? i.required : null,
  label: l ? l.textContent.trim() : '',
  button: !!b,
  live: r ? r.getAttribute('aria-live') : null,
  viewport: !!document.querySelector('meta[name="viewport"]'),
  inline: Array.prototype.filter.call(document.scripts, function (s) { return !s.src; }).length,
  external: Array.prototype.map.call(document.scripts, function (s) { return s.getAttribute('src'); }),
  handlers: document.querySelectorAll('[onclick], [onsubmit], [onload], [style]').length
};
"#,
    );
    assert_eq!(page["method"], "post", "{page}");
    assert_eq!(page["action"], "cgi-bin/resolve", "{page}");
    assert_eq!(
        page["inside"], true,
        "the field must be inside the form: {page}"
    );
    assert_eq!(page["type"], "url", "{page}");
    assert_eq!(page["required"], true, "{page}");
    assert_ne!(page["label"], "", "the field needs a <label>: {page}");
    assert_eq!(page["button"], true, "{page}");
    assert_eq!(page["live"], "polite", "{page}");
    assert_eq!(page["viewport"], true, "{page}");
    assert_eq!(page["inline"], 0, "no inline scripts: {page}");
    assert_eq!(page["external"], json!(["app.js"]), "{page}");
    assert_eq!(page["handlers"], 0, "no inline handlers or styles: {page}");

    // Keyboard focus must be visible.
    h.web()
        .script("document.getElementById('link').focus(); return null;");
    let outline = h.web().script(
        "var s = getComputedStyle(document.getElementById('link')); \
         return [s.outlineStyle, parseFloat(s.outlineWidth)];",
    );
    assert_ne!(
        outline[0], "none",
        "focused field shows no outline: {outline}"
    );
    assert!(outline[1].as_f64().unwrap_or(0.0) >= 2.0, "{outline}");
}

#[test]
fn form_works_without_javascript() {
    let h = Harness::start_with(false);
    h.web().open(&h.base);
    h.web().type_into("#link", LINK);
    h.web().click("#submit");
    let page = wait_for("the answer page", Duration::from_secs(15), || {
        let page = h.web().script(
            "return {path: location.pathname, text: document.body ? document.body.innerText : ''};",
        );
        if page["path"] == "/cgi-bin/resolve" && page["text"] != "" {
            Ok(page)
        } else {
            Err(page.to_string())
        }
    });
    let text = page["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(LINK),
        "the answer page must show the link: {page}"
    );
    h.shot("no-script.png");
}

#[test]
fn shows_download_link_without_reloading() {
    let h = Harness::start();
    h.open_page();
    // Hold every request in the page for a moment, and count them, to see the waiting state.
    h.web().script(
        "window.resolveTestCalls = 0; var send = window.fetch; \
         window.fetch = function () { var args = arguments; window.resolveTestCalls += 1; \
           return new Promise(function (ok) { setTimeout(ok, 1500); }) \
             .then(function () { return send.apply(window, args); }); }; \
         return null;",
    );
    h.web().type_into("#link", LINK);
    h.web().click("#submit");
    let waiting = h.view();
    assert!(
        waiting.disabled,
        "button must be disabled while waiting: {waiting:?}"
    );
    assert_ne!(
        waiting.button, "Get link",
        "button must say it is waiting: {waiting:?}"
    );
    // Neither a click nor Enter in the field sends a second request meanwhile.
    h.web().click("#submit");
    h.web().type_into("#link", &format!("{LINK}\u{e007}"));
    let view = wait_for("the download link", Duration::from_secs(15), || {
        let view = h.view();
        if view.href.is_some() {
            Ok(view)
        } else {
            Err(format!("{view:?}"))
        }
    });
    assert_eq!(h.web().script("return window.resolveTestCalls;"), json!(1));
    assert_eq!(view.href.as_deref(), Some(LINK), "{view:?}");
    assert!(view.marker, "the page was reloaded: {view:?}");
    assert_eq!(view.path, "/", "{view:?}");
    assert!(
        !view.disabled,
        "button must be enabled after an answer: {view:?}"
    );
    let kind = h.web().script(
        "var a = document.querySelector('#result a'); \
         return [a.tagName, a.protocol, a.href];",
    );
    assert_eq!(kind, json!(["A", "https:", LINK]));
    h.shot("desktop.png");

    // Phone-sized window: nothing wider than the screen, large tap targets.
    h.web().resize(390, 844);
    let layout = h.web().script(
        "var b = document.getElementById('submit').getBoundingClientRect(); \
         var i = document.getElementById('link').getBoundingClientRect(); \
         return {inner: window.innerWidth, scroll: document.documentElement.scrollWidth, \
                 buttonHeight: b.height, buttonWidth: b.width, fieldHeight: i.height, fieldWidth: i.width};",
    );
    let num = |k: &str| layout[k].as_f64().unwrap_or(0.0);
    assert!(
        num("inner") <= 500.0,
        "window did not shrink to phone size: {layout}"
    );
    assert!(
        num("scroll") <= num("inner"),
        "page scrolls sideways on a phone: {layout}"
    );
    assert!(
        num("buttonHeight") >= 44.0,
        "button too small to tap: {layout}"
    );
    assert!(
        num("fieldHeight") >= 44.0,
        "field too small to tap: {layout}"
    );
    assert!(
        num("fieldWidth") >= num("inner") * 0.75,
        "field too narrow on a phone: {layout}"
    );
    h.shot("phone.png");
}

#[test]
fn shows_server_detail_on_error() {
    let h = Harness::start();
    // Longer than the endpoint accepts, but a valid address for the browser.
    let long = format!("https://example.com/{}", "a".repeat(2100));
    let mut answer = agent()
        .post(format!("{}cgi-bin/resolve", h.base))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json")
        .send(format!("link={long}"))
        .expect("ask the endpoint directly");
    assert_eq!(answer.status().as_u16(), 400);
    let problem: Value = serde_json::from_str(
        &answer
            .body_mut()
            .read_to_string()
            .expect("read the problem"),
    )
    .expect("problem+json body");
    let detail = problem["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("no detail in {problem}"))
        .to_string();
    assert!(!detail.trim().is_empty(), "{problem}");

    h.open_page();
    let view = h.submit(&long);
    assert!(
        view.result.contains(detail.trim()),
        "the page must show the server's detail {detail:?}: {view:?}"
    );
    assert!(view.href.is_none(), "{view:?}");
    assert!(!view.disabled, "{view:?}");
    assert!(view.marker, "the page was reloaded: {view:?}");
    h.shot("error.png");
}

#[test]
fn countdown_after_too_many_requests() {
    let h = Harness::start();
    h.open_page();
    for n in 1..=2 {
        let view = h.submit(LINK);
        assert_eq!(view.href.as_deref(), Some(LINK), "request {n}: {view:?}");
    }

    let refused = h.submit(LINK);
    let seen = Instant::now();
    let countdown = refused
        .countdown
        .clone()
        .unwrap_or_else(|| panic!("no countdown after a refusal: {refused:?}"));
    let first = seconds_in(&countdown);
    let message = refused.message.clone().unwrap_or_default();
    assert!(
        message.to_lowercase().contains("too many requests")
            && message.chars().any(|c| c.is_ascii_digit()),
        "the server's sentence is not shown: {refused:?}"
    );
    assert!(refused.href.is_none(), "{refused:?}");
    assert!(
        refused.disabled,
        "button enabled during the countdown: {refused:?}"
    );
    assert_ne!(refused.button, "Get link", "{refused:?}");
    assert!(
        (3..=5).contains(&first),
        "countdown should start near the 5 s window: {refused:?}"
    );
    h.shot("countdown.png");

    thread::sleep(Duration::from_millis(2100));
    let later = h.view();
    let second = seconds_in(
        later
            .countdown
            .as_deref()
            .unwrap_or_else(|| panic!("countdown ended too early: {later:?}")),
    );
    assert!(
        second < first && second + 3 >= first,
        "countdown went from {first} to {second} in 2 s"
    );
    assert!(
        later.disabled,
        "button enabled during the countdown: {later:?}"
    );

    let ended = wait_for("the countdown to end", Duration::from_secs(8), || {
        let view = h.view();
        if view.disabled {
            Err(format!("{view:?}"))
        } else {
            Ok(view)
        }
    });
    assert!(
        seen.elapsed() >= Duration::from_secs(first.saturating_sub(1)),
        "button enabled after {:?}, before the countdown of {first} s ended",
        seen.elapsed()
    );
    assert!(ended.countdown.is_none(), "{ended:?}");
    assert_eq!(ended.button, "Get link", "{ended:?}");

    let again = h.submit(LINK);
    assert_eq!(
        again.href.as_deref(),
        Some(LINK),
        "a new request after the countdown must succeed: {again:?}"
    );
}

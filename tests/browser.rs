//! Browser tests: headless Chromium, driven over WebDriver, using the page in `public/` served by
//! a real Apache from a folder of its own (`/resolve/`), with the binary as `/cgi-bin/resolve`
//! (mod_cgid, or mod_fcgid under RESOLVE_TEST_APACHE_MODE=fcgid) and the provider stand-in.
//!
//! Every state of the page is checked, in light and dark schemes, with axe-core (pinned, and
//! installed from the npm registry into `target/test-deps/` when missing), and the contrast of
//! its borders, focus ring and text is measured. The dashboard is checked the same way, on a
//! desktop and on a phone's 390 px, where its text is measured too.
//!
//! Needs Debian's `chromium` and `chromium-driver` packages and npm. Set `BROWSER_TEST_KEEP=1`
//! to keep the temporary folder (screenshots of every state, driver log) after a passing run;
//! it is always kept when a test fails.

mod support;

use std::env;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::config::rule;
use support::provider::Reply;
use support::temp::set_mode;
use support::{Site, TempDir, free_port};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key under which W3C WebDriver returns an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
const LINK: &str = "https://example.com/file.zip";
/// What the provider stand-in answers for its first call.
const DOWNLOAD_1: &str = "https://cdn.test/file/1";
const POLL: Duration = Duration::from_millis(100);
/// WebDriver key codes.
const TAB: &str = "\u{e004}";
const ENTER: &str = "\u{e007}";

/// axe-core, pinned: the version, and the SHA-256 of its `axe.min.js`.
const AXE_VERSION: &str = "4.14.1";
const AXE_SHA256: &str = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c";

/// The owner's footer every site here is configured with.
const SITE_NAME: &str = "Example Links";
const CONTACT: &str = "owner@example.com";
const TERMS: &str = "https://example.com/terms";

/// One browser at a time: the countdown tests measure time, and this machine may have few cores.
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

/// Waits for the account at `path` to have been read once: the program reads it after the
/// answer is written, so the browser may see the link before the read is made.
fn account_read_once(h: &Harness, path: &str) {
    let calls = wait_for(path, Duration::from_secs(15), || {
        match h.site().provider.calls_to("GET", path) {
            0 => Err("no call yet".into()),
            n => Ok(n),
        }
    });
    assert_eq!(calls, 1, "{path} read {calls} times, once wanted");
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

    /// Runs `body` as an async script: it calls `arguments[0]` with its result.
    fn async_script(&self, body: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/async",
            Some(json!({"script": body, "args": []})),
        )
    }

    /// Presses and releases each key in turn, wherever focus is (a real keyboard's events).
    fn keys(&self, keys: &[&str]) {
        let mut actions = Vec::new();
        for key in keys {
            for c in key.chars() {
                actions.push(json!({"type": "keyDown", "value": c.to_string()}));
                actions.push(json!({"type": "keyUp", "value": c.to_string()}));
            }
        }
        self.cmd(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        );
        let _ = self.try_cmd("DELETE", "/actions", None);
    }

    /// A Chrome DevTools command, through chromedriver.
    fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
    }

    /// Light or dark, as the visitor's system would ask (`prefers-color-scheme`).
    fn scheme(&self, scheme: &str) {
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
    }

    /// A phone's screen, 390 CSS pixels wide (`false`: the window's own size again).
    fn phone(&self, on: bool) {
        if on {
            self.cdp(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": true}),
            );
        } else {
            self.cdp("Emulation.clearDeviceMetricsOverride", json!({}));
        }
    }

    /// The whole page, not only what the window shows.
    fn full_screenshot(&self, path: &Path) {
        let shot = self.cdp(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = base64_decode(shot["data"].as_str().expect("screenshot data"))
            .unwrap_or_else(|e| panic!("screenshot: {e}"));
        fs::write(path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
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

/// axe-core's script, installed with npm into `target/test-deps/` the first time, and checked
/// against its pinned SHA-256. Missing npm or a failed install fails the test (never skips it).
fn axe_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/test-deps")
            .join(format!("axe-core-{AXE_VERSION}"));
        let file = prefix.join("node_modules/axe-core/axe.min.js");
        if !file.exists() {
            fs::create_dir_all(&prefix).expect("create target/test-deps");
            let out = Command::new("npm")
                .arg("install")
                .arg("--prefix")
                .arg(&prefix)
                .arg(format!("axe-core@{AXE_VERSION}"))
                .args([
                    "--no-save",
                    "--no-package-lock",
                    "--ignore-scripts",
                    "--no-audit",
                    "--no-fund",
                ])
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| {
                    panic!(
                        "axe-core is not installed and npm could not be run ({e}): install npm \
                         (Debian package npm) so that the browser tests can install axe-core \
                         {AXE_VERSION}"
                    )
                });
            assert!(
                out.status.success() && file.exists(),
                "npm install axe-core@{AXE_VERSION} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let bytes = fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let digest: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            digest,
            AXE_SHA256,
            "{} is not the pinned axe-core {AXE_VERSION}: remove {} to install it again",
            file.display(),
            prefix.display()
        );
        String::from_utf8(bytes).expect("axe.min.js is UTF-8")
    })
}

/// What the page shows, read in one go.
#[derive(Debug, Clone)]
struct View {
    result: String,
    /// The card's kind: busy, ok, error or wait ("" with no card).
    kind: String,
    href: Option<String>,
    message: Option<String>,
    elapsed: Option<String>,
    /// `aria-disabled` on the button: busy or locked.
    locked: bool,
    /// The `disabled` property: never set, it would take focus away.
    disabled: bool,
    button: String,
    /// Where keyboard focus is: an id, or tag.class.
    focus: String,
    footer: String,
    path: String,
    marker: bool,
}

impl View {
    /// The page says `message`, and the button can be used again.
    fn assert_says_unlocked(&self, message: &str) {
        assert_eq!(self.message.as_deref(), Some(message), "{self:?}");
        assert!(!self.locked, "{self:?}");
    }
}

const VIEW_SCRIPT: &str = r#"
var r = document.getElementById('result');
var b = document.getElementById('submit');
if (!r || !b) { return {missing: true, path: location.pathname, text: document.body ? document.body.innerText : ''}; }
var card = r.querySelector('.card');
var a = r.querySelector('.card a');
var m = r.querySelector('.message');
var e = r.querySelector('.elapsed');
var f = document.activeElement;
var ft = document.getElementById('site-footer');
return {
  result: r.innerText,
  kind: card ? card.className.replace('card', '').trim() : '',
  href: a ? a.getAttribute('href') : null,
  message: m ? m.textContent : null,
  elapsed: e ? e.textContent : null,
  locked: b.getAttribute('aria-disabled') === 'true',
  disabled: b.disabled,
  button: b.textContent,
  focus: !f || f === document.body ? 'body' : (f.id || (f.tagName.toLowerCase() + (f.className ? '.' + f.className : ''))),
  footer: ft && !ft.hidden ? ft.innerText : '',
  path: location.pathname,
  marker: window.resolveTestMarker === 'kept'
};
"#;

/// Everything the live region said since the page was opened, in order.
const SAID_SCRIPT: &str = "return window.resolveSaid || [];";

/// Contrast ratios (WCAG 2.2) of the page as it is now: each pair's name, ratio and minimum.
const CONTRAST_SCRIPT: &str = r#"
function rgb(c) { return c.match(/[\d.]+/g).slice(0, 3).map(Number); }
function lum(c) {
  var v = rgb(c).map(function (x) { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
}
function ratio(a, b) { var x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); }
function css(el, prop, pseudo) { return getComputedStyle(el, pseudo || null)[prop]; }
var out = [];
function pair(name, a, b, min) { out.push({name: name, ratio: Math.round(ratio(a, b) * 100) / 100, min: min, a: a, b: b}); }
var page = css(document.body, 'backgroundColor');
var input = document.getElementById('link');
var button = document.getElementById('submit');
pair('text on page', css(document.body, 'color'), page, 4.5);
var intro = document.querySelector('.intro, .hint');
if (intro) pair('muted text on page', css(intro, 'color'), page, 4.5);
pair('field border / field', css(input, 'borderTopColor'), css(input, 'backgroundColor'), 3);
pair('field border / page', css(input, 'borderTopColor'), page, 3);
pair('placeholder / field', css(input, 'color', '::placeholder'), css(input, 'backgroundColor'), 4.5);
if (button.getAttribute('aria-disabled') === 'true') {
  // Marked disabled (busy or waiting): its border shows where it is.
  pair('waiting button border / page', css(button, 'borderTopColor'), page, 3);
} else {
  pair('button / page', css(button, 'backgroundColor'), page, 3);
}
pair('button text / button', css(button, 'color'), css(button, 'backgroundColor'), 4.5);
input.focus();
pair('focus ring / page', css(input, 'outlineColor'), page, 3);
pair('focus ring / field', css(input, 'outlineColor'), css(input, 'backgroundColor'), 3);
input.blur();
var card = document.querySelector('.result .card');
if (card) {
  var bg = css(card, 'backgroundColor');
  pair('card text / card', css(card, 'color'), bg, 4.5);
  pair('card edge / card', css(card, 'borderLeftColor'), bg, 3);
  var muted = card.querySelector('.url, .elapsed');
  if (muted) pair('card muted text / card', css(muted, 'color'), bg, 4.5);
  var copy = card.querySelector('button');
  if (copy) {
    pair('copy button border / card', css(copy, 'borderTopColor'), bg, 3);
    copy.focus();
    pair('focus ring / card', css(copy, 'outlineColor'), bg, 3);
    copy.blur();
  }
}
var foot = document.querySelector('.site-footer:not([hidden]) a');
if (foot) pair('footer link / page', css(foot, 'color'), page, 4.5);
return out;
"#;

/// How a site under test is made.
struct Setup {
    javascript: bool,
    rules: Vec<Value>,
    edit: Box<dyn FnOnce(&mut Value)>,
    provider: Option<support::Provider>,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            javascript: true,
            rules: vec![rule("ip", "ip", 100, 60)],
            edit: Box::new(|_| {}),
            provider: None,
        }
    }

    fn without_javascript(self) -> Setup {
        self.javascript(false)
    }

    /// With the browser's JavaScript on or off.
    fn javascript(mut self, on: bool) -> Setup {
        self.javascript = on;
        self
    }

    fn rules(mut self, rules: Vec<Value>) -> Setup {
        self.rules = rules;
        self
    }

    fn config(mut self, edit: impl FnOnce(&mut Value) + 'static) -> Setup {
        self.edit = Box::new(edit);
        self
    }

    /// The provider stand-in, when not the one that resolves every link.
    fn provider(mut self, provider: support::Provider) -> Setup {
        self.provider = Some(provider);
        self
    }

    fn start(self) -> Harness {
        Harness::start(self)
    }
}

/// Apache serving the page and the binary, chromedriver and a browser session, all ended on
/// drop.
struct Harness {
    dir: TempDir,
    site: Option<Site>,
    /// The page's address: `http://127.0.0.1:PORT/resolve/`.
    base: String,
    driver: Option<Child>,
    web: Option<WebDriver>,
    _serial: MutexGuard<'static, ()>,
}

impl Harness {
    fn start(setup: Setup) -> Harness {
        require_browser();
        axe_source();
        let serial = SERIAL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = TempDir::new("browser");
        let edit = setup.edit;
        let mut builder = Site::builder("browser");
        if let Some(provider) = setup.provider {
            builder = builder.provider(provider);
        }
        let site = builder
            .rules(setup.rules)
            .config(|c| {
                c["page"] = json!({"site_name": SITE_NAME, "contact": CONTACT, "terms_url": TERMS});
            })
            .config(edit)
            .start();
        // The page in a folder of its own, as deploy.sh installs it by default: the form must
        // find the program at /cgi-bin/resolve from there.
        let public = Path::new(env!("CARGO_MANIFEST_DIR")).join("public");
        let folder = site.apache.dir().join("htdocs/resolve");
        fs::create_dir_all(&folder).expect("create htdocs/resolve");
        set_mode(&folder, 0o755);
        for file in ["index.html", "style.css", "app.js"] {
            let to = folder.join(file);
            fs::copy(public.join(file), &to).unwrap_or_else(|e| panic!("copy {file}: {e}"));
            set_mode(&to, 0o644);
        }
        let base = format!("{}/resolve/", site.apache.base_url());
        let mut harness = Harness {
            base,
            site: Some(site),
            driver: None,
            web: None,
            _serial: serial,
            dir,
        };
        let dir = harness.dir.path().to_path_buf();

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
        harness.web = Some(WebDriver::start(&driver_url, &profile, setup.javascript));
        harness
    }

    fn web(&self) -> &WebDriver {
        self.web.as_ref().expect("browser session")
    }

    fn site(&self) -> &Site {
        self.site.as_ref().expect("site")
    }

    /// The program's address.
    fn endpoint(&self) -> String {
        format!("{}/cgi-bin/resolve", self.site().apache.base_url())
    }

    /// Opens the page, marks its window (gone if the form navigates away instead of answering
    /// in place) and records what its live region says.
    fn open_page(&self) {
        self.web().open(&self.base);
        self.web().script(
            "window.resolveTestMarker = 'kept'; window.resolveSaid = []; \
             var s = document.getElementById('status'); \
             new MutationObserver(function () { if (s.textContent) { window.resolveSaid.push(s.textContent); } }) \
               .observe(s, {childList: true, characterData: true, subtree: true}); \
             return null;",
        );
    }

    /// The error card the page shows by itself once it has opened (no link sent).
    fn notice_on_opening(&self) -> View {
        wait_for("the notice", Duration::from_secs(10), || {
            let view = self.view();
            if view.kind == "error" {
                Ok(view)
            } else {
                Err(format!("{view:?}"))
            }
        })
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
            kind: text("kind").unwrap_or_default(),
            href: text("href"),
            message: text("message"),
            elapsed: text("elapsed"),
            locked: v["locked"].as_bool().expect("button state"),
            disabled: v["disabled"].as_bool().expect("button state"),
            button: text("button").unwrap_or_default(),
            focus: text("focus").unwrap_or_default(),
            footer: text("footer").unwrap_or_default(),
            path: text("path").unwrap_or_default(),
            marker: v["marker"].as_bool().unwrap_or(false),
        }
    }

    fn said(&self) -> Vec<String> {
        serde_json::from_value(self.web().script(SAID_SCRIPT)).expect("a list of sentences")
    }

    /// Waits (2 s at most: the live region is filled a moment after it is emptied) until the
    /// last thing the live region said is `sentence`.
    fn said_last(&self, sentence: &str) {
        wait_for(
            &format!("{sentence:?} to be said"),
            Duration::from_secs(2),
            || {
                let said = self.said();
                if said.last().is_some_and(|s| s == sentence) {
                    Ok(())
                } else {
                    Err(format!("{said:?}"))
                }
            },
        );
    }

    /// Waits until the page shows an answer (a card that is not the working one).
    fn answer(&self, timeout: Duration) -> View {
        wait_for("an answer on the page", timeout, || {
            let view = self.view();
            if view.kind.is_empty() || view.kind == "busy" {
                Err(format!("{view:?}"))
            } else {
                Ok(view)
            }
        })
    }

    /// Types `link`, presses the button and waits until the page shows the answer.
    fn submit(&self, link: &str) -> View {
        self.web().type_into("#link", link);
        self.web().click("#submit");
        self.answer(Duration::from_secs(15))
    }

    fn shot(&self, name: &str) {
        self.web().screenshot(&self.dir.join(name));
    }

    /// axe-core on the page as it is now, in the light and the dark scheme: no violation of
    /// WCAG 2.x A and AA or of axe's best practices. Screenshots of both as `<label>-light.png`
    /// and `<label>-dark.png`.
    fn axe(&self, label: &str) {
        let web = self.web();
        if web.script("return typeof window.axe;") != json!("object") {
            web.script(&format!("{}\n;return null;", axe_source()));
        }
        for scheme in ["light", "dark"] {
            web.scheme(scheme);
            let found = web.async_script(
                "var done = arguments[0]; \
                 axe.run(document, {resultTypes: ['violations'], runOnly: {type: 'tag', values: \
                   ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice']}}) \
                 .then(function (r) { done(r.violations.map(function (v) { return {id: v.id, \
                   impact: v.impact, help: v.help, nodes: v.nodes.map(function (n) { \
                   return n.target.join(' ') + ': ' + n.failureSummary; })}; })); }, \
                   function (e) { done({error: String(e)}); });",
            );
            assert_eq!(
                found,
                json!([]),
                "axe-core {AXE_VERSION} found violations in {label} ({scheme}): {found:#}"
            );
            self.shot(&format!("{label}-{scheme}.png"));
        }
        web.scheme("light");
    }

    /// The contrast ratios of the page as it is now, in both schemes; each at least its minimum.
    fn contrast(&self, label: &str) -> Vec<String> {
        let mut lines = Vec::new();
        for scheme in ["light", "dark"] {
            self.web().scheme(scheme);
            let pairs = self.web().script(CONTRAST_SCRIPT);
            for p in pairs.as_array().expect("pairs") {
                let (ratio, min) = (p["ratio"].as_f64().unwrap(), p["min"].as_f64().unwrap());
                assert!(
                    ratio >= min,
                    "{label} ({scheme}): {} is {ratio}:1, below {min}:1 ({} on {})",
                    p["name"],
                    p["a"],
                    p["b"]
                );
                lines.push(format!(
                    "{label} {scheme}: {} {ratio}:1",
                    p["name"].as_str().unwrap()
                ));
            }
        }
        self.web().scheme("light");
        eprintln!("{}", lines.join("\n"));
        lines
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
        if let Some(mut child) = self.driver.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(self.site.take());
        let _ = fs::remove_dir_all(self.dir.join("profile"));
        if failed || env::var_os("BROWSER_TEST_KEEP").is_some() {
            self.dir.keep();
            let _ = writeln!(
                std::io::stderr(),
                "browser test files kept in {}",
                self.dir.path().display()
            );
        }
    }
}

/// The first number in `text`.
fn number_in(text: &str) -> u64 {
    text.split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in {text:?}"))
}

fn page_file(name: &str) -> String {
    fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("public")
            .join(name),
    )
    .unwrap_or_else(|e| panic!("public/{name}: {e}"))
}

#[test]
fn page_is_a_plain_accessible_form() {
    let h = Setup::new().start();
    h.open_page();
    let page = h.web().script(
        r#"
var f = document.querySelector('form');
var i = document.querySelector('textarea[name="links"]');
var b = f && f.querySelector('button[type="submit"], input[type="submit"]');
var l = i && i.labels && i.labels[0];
var s = document.getElementById('status');
return {
  method: f ? f.getAttribute('method') : null,
  action: f ? f.getAttribute('action') : null,
  inside: !!(f && i && f.contains(i)),
  type: i ? i.type : null,
  required: i ? i.required : null,
  label: l ? l.textContent.trim() : '',
  button: !!b,
  status: s ? s.getAttribute('role') : null,
  viewport: !!document.querySelector('meta[name="viewport"]'),
  inline: Array.prototype.filter.call(document.scripts, function (s) { return !s.src; }).length,
  external: Array.prototype.map.call(document.scripts, function (s) { return s.getAttribute('src'); }),
  handlers: document.querySelectorAll('[onclick], [onsubmit], [onload], [style]').length
};
"#,
    );
    assert_eq!(page["method"], "post", "{page}");
    // From any folder: the absolute path, as a plain attribute deploy.sh can rewrite.
    assert_eq!(page["action"], "/cgi-bin/resolve", "{page}");
    assert_eq!(
        page["inside"], true,
        "the field must be inside the form: {page}"
    );
    // One link or many, one a line.
    assert_eq!(page["type"], "textarea", "{page}");
    assert_eq!(page["required"], true, "{page}");
    assert_ne!(page["label"], "", "the field needs a <label>: {page}");
    assert_eq!(page["button"], true, "{page}");
    assert_eq!(
        page["status"], "status",
        "a live region for what changes: {page}"
    );
    assert_eq!(page["viewport"], true, "{page}");
    assert_eq!(page["inline"], 0, "no inline scripts: {page}");
    assert_eq!(page["external"], json!(["app.js"]), "{page}");
    assert_eq!(page["handlers"], 0, "no inline handlers or styles: {page}");
    let html = page_file("index.html");
    assert!(
        html.contains("action=\"/cgi-bin/resolve\"") && html.contains("<!-- resolve @VERSION@ -->"),
        "index.html keeps the action and the version placeholder deploy.sh fills in"
    );

    // The owner's footer, from the configuration through ?about=1.
    let view = wait_for("the footer", Duration::from_secs(10), || {
        let view = h.view();
        if view.footer.is_empty() {
            Err(format!("{view:?}"))
        } else {
            Ok(view)
        }
    });
    assert!(
        view.footer.contains(SITE_NAME)
            && view.footer.contains(&format!("Contact: {CONTACT}"))
            && view.footer.contains("Terms of use"),
        "{view:?}"
    );
    let links = h.web().script(
        "return Array.prototype.map.call(document.querySelectorAll('#site-footer a'), \
         function (a) { return a.getAttribute('href'); });",
    );
    assert_eq!(links, json!([format!("mailto:{CONTACT}"), TERMS]));
    assert_eq!(
        view.kind, "",
        "nothing to say before a link is sent: {view:?}"
    );

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
    h.web()
        .script("document.activeElement.blur(); return null;");
    h.contrast("ready");
    h.axe("ready");
}

#[test]
fn about_costs_no_decision_and_tells_no_secret() {
    // One request a minute: ?about=1 must not use it up, nor reach the provider.
    let h = Setup::new().rules(vec![rule("ip", "ip", 1, 60)]).start();
    let agent = agent();
    for _ in 0..3 {
        let (status, body) =
            http(&agent, "GET", &format!("{}?about=1", h.endpoint()), None).expect("ask ?about=1");
        assert_eq!(status, 200, "{body}");
        let about: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(
            about,
            json!({
                "version": env!("CARGO_PKG_VERSION"),
                "ready": true,
                "site_name": SITE_NAME,
                "contact": CONTACT,
                "contact_href": format!("mailto:{CONTACT}"),
                "terms_url": TERMS,
            })
        );
        assert!(!body.contains(support::config::TOKEN));
    }
    assert_eq!(h.site().provider.calls(), 0);
    h.open_page();
    let view = h.submit(LINK);
    assert_eq!(
        view.href.as_deref(),
        Some(DOWNLOAD_1),
        "the one request of the minute is still there: {view:?}"
    );
}

#[test]
fn form_works_without_javascript() {
    let h = Setup::new()
        .without_javascript()
        .rules(vec![rule("ip", "ip", 2, 60)])
        .start();
    h.web().open(&h.base);
    h.web().type_into("#link", LINK);
    h.web().click("#submit");
    let read = || {
        h.web().script(
            "var f = document.querySelector('form'); var c = document.querySelector('.card'); \
             var l = document.querySelector('.card a'); var ft = document.querySelector('footer'); \
             return {path: location.pathname, text: document.body ? document.body.innerText : '', \
               h1: (document.querySelector('h1') || {}).textContent, \
               action: f ? f.getAttribute('action') : null, kind: c ? c.className : '', \
               href: l ? l.getAttribute('href') : null, footer: ft ? ft.innerText : '', \
               background: getComputedStyle(document.body).backgroundColor, \
               font: getComputedStyle(document.body).fontFamily, \
               field: !!document.querySelector('form input[name=\"link\"][type=\"url\"]'), \
               value: (document.querySelector('#link') || {}).value, \
               segs: Array.prototype.map.call(document.querySelectorAll('.card .seg'), \
                 function (s) { return s.textContent + ' ' + getComputedStyle(s).whiteSpace; }), \
               comment: Array.prototype.some.call(document.body.childNodes, function (n) { \
                 return n.nodeType === 8 && /^ resolve \\d+\\.\\d+\\.\\d+/.test(n.nodeValue); })};",
        )
    };
    let page = wait_for("the answer page", Duration::from_secs(15), || {
        let page = read();
        if page["path"] == "/cgi-bin/resolve" && page["text"] != "" {
            Ok(page)
        } else {
            Err(page.to_string())
        }
    });
    assert_eq!(page["href"], DOWNLOAD_1, "{page}");
    assert_eq!(page["h1"], "Your download link is ready", "{page}");
    assert_eq!(page["kind"], "card ok", "{page}");
    assert_eq!(page["action"], "/cgi-bin/resolve", "the form again: {page}");
    assert_eq!(page["field"], true, "{page}");
    // The page's look: its background and font, not the browser's defaults.
    assert_eq!(page["background"], "rgb(247, 247, 245)", "{page}");
    assert!(
        page["font"].as_str().unwrap_or("").contains("system-ui"),
        "{page}"
    );
    let footer = page["footer"].as_str().unwrap_or_default();
    assert!(
        footer.contains(SITE_NAME) && footer.contains(CONTACT) && footer.contains("Terms of use"),
        "{page}"
    );
    assert_eq!(page["comment"], true, "the version in a comment: {page}");
    // The heading says it once; the address breaks only after a / or a ?.
    let text = page["text"].as_str().unwrap_or_default();
    assert_eq!(text.matches("download link is ready").count(), 1, "{page}");
    assert_eq!(page["value"], "", "another link starts empty: {page}");
    let segs: Vec<&str> = page["segs"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str()).collect())
        .unwrap_or_default();
    assert!(segs.len() >= 4, "{page}");
    for s in &segs {
        let (part, white_space) = s.rsplit_once(' ').unwrap();
        assert_eq!(white_space, "nowrap", "{page}");
        assert!(
            part[..part.len() - 1].chars().all(|c| c != '/' && c != '?'),
            "{page}"
        );
    }
    h.shot("no-script-download.png");

    // The form on the answer page posts to the program again; the third is refused.
    h.web().type_into("#link", LINK);
    h.web().click("#submit");
    let second = wait_for("the second answer", Duration::from_secs(15), || {
        let page = read();
        if page["href"].as_str().is_some_and(|h| h.ends_with("/2")) {
            Ok(page)
        } else {
            Err(page.to_string())
        }
    });
    assert_eq!(second["path"], "/cgi-bin/resolve", "{second}");
    h.web().type_into("#link", LINK);
    h.web().click("#submit");
    let refused = wait_for("the refusal", Duration::from_secs(15), || {
        let page = read();
        if page["kind"] == "card wait" {
            Ok(page)
        } else {
            Err(page.to_string())
        }
    });
    assert_eq!(refused["h1"], "Too many requests", "{refused}");
    assert_eq!(
        refused["value"], LINK,
        "the link is kept for trying again: {refused}"
    );
    assert!(
        refused["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Too many requests: try again in"),
        "{refused}"
    );
    h.shot("no-script-refused.png");
}

#[test]
fn answer_pages_pass_axe_and_contrast() {
    // The program's own pages carry no script: a browser that runs scripts shows them exactly
    // as one that does not, and lets axe-core run in them.
    let h = Setup::new().rules(vec![rule("ip", "ip", 2, 60)]).start();
    let link = format!("{}?link=https%3A%2F%2Fexample.com%2Ffile.zip", h.endpoint());
    // They forbid everything but their own style block, which must still apply.
    let answer = agent()
        .get(format!("{}?link=ftp%3A%2F%2Fx", h.endpoint()))
        .header("Accept", "text/html")
        .call()
        .expect("an answer page");
    let policy = answer
        .headers()
        .get("Content-Security-Policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        policy.starts_with("default-src 'none'; style-src 'sha256-"),
        "{policy}"
    );
    let h1 = || {
        h.web()
            .script("return document.querySelector('h1').textContent;")
    };
    h.web().open(&link);
    assert_eq!(h1(), "Your download link is ready");
    assert_eq!(
        h.web()
            .script("return getComputedStyle(document.body).backgroundColor;"),
        "rgb(247, 247, 245)",
        "the style block applies under the page's own policy"
    );
    h.contrast("no-script download");
    h.axe("no-script-download");
    h.web().open(&format!(
        "{}?link=ftp%3A%2F%2Fexample.com%2Ff",
        h.endpoint()
    ));
    assert_eq!(h1(), "That did not work");
    h.contrast("no-script error");
    h.axe("no-script-error");
    h.web().open(&link);
    h.web().open(&link);
    assert_eq!(h1(), "Too many requests");
    h.contrast("no-script refusal");
    h.axe("no-script-refused");
}

#[test]
fn shows_progress_then_the_download_link_without_reloading() {
    let h = Setup::new().start();
    // The provider takes its time, as one that polls does.
    h.site()
        .provider
        .set_reply(Reply::Default.after(Duration::from_secs(12)));
    h.open_page();
    h.web().type_into("#link", LINK);
    h.web().click("#submit");
    let started = Instant::now();
    let working = h.view();
    assert_eq!(working.kind, "busy", "{working:?}");
    assert!(
        working.locked,
        "busy button is marked disabled: {working:?}"
    );
    assert!(!working.disabled, "and keeps its focus: {working:?}");
    assert_eq!(working.focus, "submit", "{working:?}");
    assert_eq!(working.button, "Working…", "{working:?}");
    let elapsed = working.elapsed.clone().unwrap_or_default();
    let first = if elapsed.starts_with("Just started.") {
        0
    } else {
        number_in(&elapsed)
    };
    // Neither a click nor Enter in the field sends a second request meanwhile.
    h.web().click("#submit");
    h.web().type_into("#link", &format!("{LINK}{ENTER}"));
    thread::sleep(Duration::from_millis(2100));
    let later = h.view();
    assert_eq!(later.kind, "busy", "{later:?}");
    let second = number_in(later.elapsed.as_deref().unwrap_or_default());
    assert!(
        second > first,
        "the seconds working go on: {first} then {second}: {later:?}"
    );
    assert!(
        later
            .elapsed
            .as_deref()
            .unwrap_or_default()
            .contains("half a minute"),
        "{later:?}"
    );
    h.contrast("working");
    h.axe("working");
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "the working state was checked"
    );

    let view = h.answer(Duration::from_secs(20));
    assert_eq!(h.site().provider.calls(), 1, "one request was sent");
    assert_eq!(view.kind, "ok", "{view:?}");
    assert_eq!(view.href.as_deref(), Some(DOWNLOAD_1), "{view:?}");
    assert!(view.marker, "the page was reloaded: {view:?}");
    assert_eq!(view.path, "/resolve/", "{view:?}");
    assert!(!view.locked && !view.disabled, "{view:?}");
    assert_eq!(view.button, "Get link", "{view:?}");
    let kind = h.web().script(
        "var a = document.querySelector('#result a'); \
         return [a.tagName, a.protocol, a.href, a.textContent];",
    );
    assert_eq!(kind, json!(["A", "https:", DOWNLOAD_1, "file.bin"]));
    // Said once when it started, once when it took long, once at the answer.
    let said = wait_for("the answer said", Duration::from_secs(2), || {
        let said = h.said();
        if said.last().is_some_and(|s| s.contains("ready")) {
            Ok(said)
        } else {
            Err(format!("{said:?}"))
        }
    });
    assert_eq!(
        said,
        [
            "Getting your download link. This can take up to half a minute.",
            "Still working.",
            "Your download link is ready: file.bin."
        ]
    );
    h.contrast("download");
    h.axe("download");
    // The address breaks only after a / or a ?: parts that never wrap, a <wbr> after each.
    let parts = h.web().script(
        "return Array.prototype.map.call(document.querySelectorAll('#result .url .seg'), \
           function (s) { return [s.textContent, getComputedStyle(s).whiteSpace, \
             s.nextSibling ? s.nextSibling.nodeName : '']; });",
    );
    assert_eq!(
        parts,
        json!([
            ["https:/", "nowrap", "WBR"],
            ["/", "nowrap", "WBR"],
            ["cdn.test/", "nowrap", "WBR"],
            ["file/", "nowrap", "WBR"],
            ["1", "nowrap", ""]
        ])
    );

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

/// The provider section of a provider that creates a job and polls it every 500 ms, within a
/// deadline of 1.2 s, at the stand-in `api`.
fn job_provider(api: &support::Provider) -> Value {
    json!({
        "kind": "http", "token": "t0k3n-job", "base_url": api.url("/api"),
        "connect_timeout_ms": 500, "timeout_ms": 1000, "deadline_ms": 1200,
        "steps": [
            {"method": "POST", "url": "{base}/create", "form": {"link": "{link}"},
             "extract": {"id": "/id"}},
            {"method": "GET", "url": "{base}/status", "query": {"id": "{id}"},
             "poll": {"interval_ms": 500, "until": {"pointer": "/done", "equals": true},
                      "progress": {"pointer": "/progress", "unit": "fraction"}},
             "extract": {"download": "/link", "filename": "/name"}}
        ]
    })
}

/// A job that outlasts the request: the page shows its progress, asks again by itself (with
/// JavaScript, the script; without, the answer page's `Refresh`), and shows the link when the
/// job is done, one job paid for.
#[test]
fn a_long_job_shows_its_progress_and_is_asked_again_by_itself() {
    for javascript in [true, false] {
        let h = Setup::new().javascript(javascript).start();
        let api = &h.site().provider;
        h.site()
            .edit_config(|cfg| cfg["provider"] = job_provider(api));
        api.route("POST", "/api/create", Reply::ok(json!({"id": 9})));
        api.route(
            "GET",
            "/api/status",
            Reply::ok(json!({"done": false, "progress": 0.4})),
        );
        h.web().open(&h.base);
        h.web().type_into("#link", LINK);
        h.web().click("#submit");
        let text = || {
            h.web()
                .script("return document.body ? document.body.innerText : '';")
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        wait_for("the progress", Duration::from_secs(15), || {
            let t = text();
            if t.contains("preparing this file (40% done)") {
                Ok(())
            } else {
                Err(t)
            }
        });
        api.route(
            "GET",
            "/api/status",
            Reply::ok(json!({"done": true, "link": DOWNLOAD_1, "name": "file.bin"})),
        );
        let href = wait_for("the download link", Duration::from_secs(15), || {
            let href = h.web().script(
                "var a = document.querySelector('.card.ok a'); return a ? a.getAttribute('href') : null;",
            );
            href.as_str().map(str::to_owned).ok_or_else(text)
        });
        assert_eq!(href, DOWNLOAD_1, "javascript: {javascript}");
        assert_eq!(
            api.calls_to("POST", "/api/create"),
            1,
            "javascript: {javascript}"
        );
    }
}

/// A folder link: the page lists every file's link, with JavaScript and without.
#[test]
fn a_folder_shows_every_file() {
    for javascript in [true, false] {
        let h = Setup::new().javascript(javascript).start();
        let api = &h.site().provider;
        let base = api.url("/api");
        h.site().edit_config(|cfg| {
            cfg["provider"] = json!({
                "kind": "http", "token": "t0k3n-folder", "base_url": base,
                "steps": [{"method": "POST", "url": "{base}/folder", "form": {"url": "{link}"},
                           "files": {"list": "/value", "download": "/downloadUrl", "filename": "/name"}}]
            })
        });
        api.route(
            "POST",
            "/api/folder",
            Reply::ok(json!({"success": true, "value": [
                {"name": "part1.rar", "downloadUrl": "https://cdn.test/f/1"},
                {"name": "part2.rar", "downloadUrl": "https://cdn.test/f/2"}
            ]})),
        );
        h.web().open(&h.base);
        h.web().type_into("#link", LINK);
        h.web().click("#submit");
        let links = wait_for("the files", Duration::from_secs(15), || {
            let v = h.web().script(
                "return Array.prototype.map.call(document.querySelectorAll('.card.ok li a'), \
                   function (a) { return [a.getAttribute('href'), a.textContent]; });",
            );
            match v.as_array() {
                Some(list) if list.len() == 2 => Ok(v.clone()),
                _ => Err(v.to_string()),
            }
        });
        assert_eq!(
            links,
            json!([
                ["https://cdn.test/f/1", "part1.rar"],
                ["https://cdn.test/f/2", "part2.rar"]
            ]),
            "javascript: {javascript}"
        );
    }
}

#[test]
fn keyboard_path() {
    let h = Setup::new().start();
    h.open_page();
    // Tab from the top of the page reaches the field first.
    h.web().keys(&[TAB]);
    assert_eq!(h.view().focus, "link");
    h.web().keys(&[LINK, ENTER]);
    let view = h.answer(Duration::from_secs(15));
    assert_eq!(view.href.as_deref(), Some(DOWNLOAD_1), "{view:?}");
    assert_eq!(
        view.focus, "link",
        "focus stays where the visitor was: {view:?}"
    );
    // Then the button, the download link, the copy button.
    h.web().keys(&[TAB]);
    assert_eq!(h.view().focus, "submit");
    h.web().keys(&[TAB]);
    assert_eq!(h.view().focus, "a");
    h.web().keys(&[TAB]);
    let on_copy = h.view();
    assert_eq!(on_copy.focus, "button", "{on_copy:?}");
    assert_eq!(
        h.web().script("return document.activeElement.textContent;"),
        "Copy link"
    );
    h.web().keys(&[ENTER]);
    let copied = wait_for("the copy to be told", Duration::from_secs(5), || {
        let said = h
            .web()
            .script("var c = document.querySelector('.copied'); return c ? c.textContent : '';");
        match said.as_str() {
            Some(text) if !text.is_empty() => Ok(text.to_string()),
            _ => Err(said.to_string()),
        }
    });
    assert!(
        copied.starts_with("Copied") || copied.starts_with("Could not copy"),
        "{copied}"
    );
    assert_eq!(h.view().focus, "button", "focus stays on the copy button");
    h.shot("keyboard.png");

    // From the button, with Enter: focus stays on it through the work and after.
    h.web()
        .script("document.getElementById('submit').focus(); return null;");
    h.web().keys(&[ENTER]);
    let again = h.answer(Duration::from_secs(15));
    assert!(
        again.href.as_deref().is_some_and(|h| h.ends_with("/2")),
        "{again:?}"
    );
    assert_eq!(again.focus, "submit", "{again:?}");
}

#[test]
fn countdown_after_too_many_requests() {
    let h = Setup::new().rules(vec![rule("ip", "ip", 2, 6)]).start();
    h.open_page();
    for n in 1..=2 {
        let view = h.submit(LINK);
        assert!(view.href.is_some(), "request {n}: {view:?}");
    }

    let refused = h.submit(LINK);
    let seen = Instant::now();
    let sentence = refused.message.clone().unwrap_or_default();
    let first = number_in(&sentence);
    assert_eq!(
        sentence,
        format!("Too many requests. You can try again in {first} seconds."),
        "one sentence, with the time in it: {refused:?}"
    );
    assert_eq!(refused.kind, "wait", "{refused:?}");
    assert!(refused.href.is_none(), "{refused:?}");
    assert!(
        refused.locked,
        "button locked during the countdown: {refused:?}"
    );
    assert!(!refused.disabled, "{refused:?}");
    assert_eq!(
        refused.focus, "submit",
        "focus stays on the button: {refused:?}"
    );
    assert_eq!(refused.button, "Please wait", "{refused:?}");
    assert!(
        (4..=6).contains(&first),
        "countdown should start near the 6 s window: {refused:?}"
    );
    h.axe("countdown");
    h.contrast("countdown");

    // A click while locked sends nothing.
    let calls = h.site().provider.calls();
    h.web().click("#submit");

    thread::sleep(Duration::from_millis(1500));
    let later = h.view();
    let second = number_in(later.message.as_deref().unwrap_or_default());
    assert!(
        second < first && second + 4 >= first,
        "the sentence counts down: {first} then {second}: {later:?}"
    );
    assert!(
        later.locked,
        "button locked during the countdown: {later:?}"
    );

    let ended = wait_for("the countdown to end", Duration::from_secs(10), || {
        let view = h.view();
        if view.locked {
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
    assert_eq!(
        ended.message.as_deref(),
        Some("You can try again now."),
        "{ended:?}"
    );
    assert_eq!(ended.button, "Get link", "{ended:?}");
    assert_eq!(
        ended.focus, "submit",
        "focus kept through the lock: {ended:?}"
    );
    assert_eq!(
        h.site().provider.calls(),
        calls,
        "nothing sent while locked"
    );
    // Said at the start and at the end of the wait, not every second.
    let said = wait_for("the end said", Duration::from_secs(2), || {
        let said = h.said();
        if said.last().is_some_and(|s| s == "You can try again now.") {
            Ok(said)
        } else {
            Err(format!("{said:?}"))
        }
    });
    let wait_said: Vec<&String> = said
        .iter()
        .skip_while(|s| !s.starts_with("Too many requests"))
        .collect();
    assert_eq!(wait_said.len(), 2, "{said:?}");
    let at_start = number_in(wait_said[0]);
    assert!(
        (first..=first + 1).contains(&at_start)
            && wait_said[0]
                == &format!("Too many requests. You can try again in {at_start} seconds."),
        "{said:?}"
    );

    let again = h.submit(LINK);
    assert!(
        again.href.is_some(),
        "a new request after the countdown must succeed: {again:?}"
    );
}

#[test]
fn a_long_wait_is_said_in_words_and_does_not_lock() {
    // The site's own budget: one paid call a day.
    let h = Setup::new()
        .config(|c| c["spend"] = json!([{"name": "day", "limit": 1, "window_secs": 86400}]))
        .start();
    h.open_page();
    assert!(h.submit(LINK).href.is_some());
    let refused = h.submit("https://example.com/other.zip");
    let sentence = refused.message.clone().unwrap_or_default();
    assert!(
        sentence
            .starts_with("The service has reached its limit for now. You can try again in about ")
            && sentence.ends_with(" hours."),
        "{refused:?}"
    );
    assert!((23..=24).contains(&number_in(&sentence)), "{refused:?}");
    assert!(
        !refused.locked && !refused.disabled,
        "a 503 does not lock: {refused:?}"
    );
    assert_eq!(refused.button, "Get link", "{refused:?}");
    h.said_last(&sentence);
    h.axe("spend-limit");
    // Trying again is allowed (and refused again, costing no paid call).
    let again = h.submit("https://example.com/other.zip");
    assert_eq!(again.kind, "wait", "{again:?}");
    assert_eq!(h.site().provider.calls(), 1);
}

#[test]
fn a_long_refusal_does_not_lock_either() {
    // One request every two hours: past the two-minute bound, a 429 does not lock.
    let h = Setup::new().rules(vec![rule("ip", "ip", 1, 7200)]).start();
    h.open_page();
    assert!(h.submit(LINK).href.is_some());
    h.submit(LINK)
        .assert_says_unlocked("Too many requests. You can try again in about 2 hours.");
}

#[test]
fn says_when_the_site_is_not_set_up() {
    // A mistake in the configuration: every request gets 503 not_configured.
    let h = Setup::new()
        .config(|c| c["rules"][0]["limit"] = json!(0))
        .start();
    h.open_page();
    // Told as soon as the page opens, without sending a link.
    let view = h.notice_on_opening();
    let notice =
        "This site is not set up yet, so it cannot get download links. Please try again later.";
    assert_eq!(view.message.as_deref(), Some(notice), "{view:?}");
    assert_eq!(
        view.footer, "",
        "no footer without a configuration: {view:?}"
    );
    let sent = h.submit(LINK);
    assert_eq!(sent.message.as_deref(), Some(notice), "{sent:?}");
    assert!(
        !sent.locked,
        "not locked for the 5 minutes of Retry-After: {sent:?}"
    );
    h.said_last(notice);
    h.axe("not-configured");
}

#[test]
fn says_when_the_site_has_no_provider_yet() {
    let h = Setup::new()
        .config(|c| {
            c.as_object_mut().expect("object").remove("provider");
        })
        .start();
    h.open_page();
    let view = h.notice_on_opening();
    assert!(
        view.message
            .as_deref()
            .unwrap_or_default()
            .starts_with("This site is not set up yet"),
        "{view:?}"
    );
    assert!(view.footer.contains(SITE_NAME), "{view:?}");
}

#[test]
fn shows_server_detail_on_error_and_a_lost_connection() {
    let h = Setup::new().start();
    // Longer than the endpoint accepts, but a valid address for the browser.
    let long = format!("https://example.com/{}", "a".repeat(2100));
    let mut answer = agent()
        .post(h.endpoint())
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
    assert_eq!(view.kind, "error", "{view:?}");
    assert!(
        view.result.contains(detail.trim()),
        "the page must show the server's detail {detail:?}: {view:?}"
    );
    assert!(view.href.is_none(), "{view:?}");
    assert!(!view.locked, "{view:?}");
    assert!(view.marker, "the page was reloaded: {view:?}");
    h.axe("error");

    // The server goes away: the page says so, and the button works again.
    let mut h = h;
    h.site.as_mut().expect("site").apache.stop();
    let lost = h.submit(LINK);
    lost.assert_says_unlocked(
        "Could not reach the server. Check your internet connection and try again.",
    );
    assert_eq!(lost.focus, "submit", "{lost:?}");
    h.axe("network-error");
}

#[test]
fn the_dashboard_signs_in_shows_the_figures_and_the_chart_and_signs_out() {
    const PASSWORD: &str = "correct horse battery staple";
    let hash = resolve::support::password::hash(PASSWORD, b"browser-test-sal").expect("hash");
    let h = Setup::new()
        .config(move |c| c["admin"] = json!({ "password_hash": hash }))
        .start();
    // Two paid calls for the figures to show.
    h.open_page();
    assert!(h.submit(LINK).href.is_some());
    assert!(h.submit("https://example.com/other.zip").href.is_some());

    let admin = format!("{}/admin", h.endpoint());
    let read = || {
        h.web().script(
            "var h = document.querySelector('h1'); \
             return {h1: h ? h.textContent : '', path: location.pathname, \
               text: document.body ? document.body.innerText : '', \
               password: !!document.querySelector('form input[type=\"password\"][name=\"password\"]'), \
               bars: document.querySelectorAll('svg.chart rect.column').length, \
               chartName: (document.querySelector('svg.chart title') || {}).textContent || '', \
               barFill: (function () { var b = document.querySelector('svg.chart rect.column'); \
                 return b ? getComputedStyle(b).fill : ''; })(), \
               background: getComputedStyle(document.body).backgroundColor};",
        )
    };
    let page_is = |h1: &str| {
        wait_for(&format!("the page {h1:?}"), Duration::from_secs(15), || {
            let page = read();
            if page["h1"] == h1 {
                Ok(page)
            } else {
                Err(page.to_string())
            }
        })
    };
    h.web().open(&admin);
    let form = page_is("Sign in to the dashboard");
    assert_eq!(form["password"], true, "{form}");
    assert_eq!(form["bars"], 0, "no data before signing in: {form}");
    assert!(
        !form["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Paid calls"),
        "{form}"
    );
    assert_eq!(
        form["background"], "rgb(247, 247, 245)",
        "the page's look: {form}"
    );
    h.axe("dashboard-sign-in");

    // A wrong password: said, and the form again.
    h.web().type_into("#password", "not the right password");
    h.web().click("#submit");
    let wrong = wait_for("the refusal", Duration::from_secs(15), || {
        let page = read();
        if page["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Wrong password.")
        {
            Ok(page)
        } else {
            Err(page.to_string())
        }
    });
    assert_eq!(wrong["password"], true, "{wrong}");
    h.axe("dashboard-wrong-password");

    h.web().type_into("#password", PASSWORD);
    h.web().click("#submit");
    let dashboard = page_is("Dashboard");
    assert_eq!(dashboard["path"], "/cgi-bin/resolve/admin", "{dashboard}");
    let text = dashboard["text"].as_str().unwrap_or_default();
    for shown in [
        "Paid calls",
        "Cache hits (paid calls saved)",
        "No spend limit is set",
        "Top clients",
        "Configuration check",
        "2 paid calls in this period",
    ] {
        assert!(text.contains(shown), "{shown} in {text}");
    }
    assert!(
        !text.contains(support::config::TOKEN),
        "the token is masked"
    );
    assert_eq!(dashboard["bars"], 24, "{dashboard}");
    assert_eq!(dashboard["chartName"], "Paid calls per hour", "{dashboard}");
    // The chart takes its colour from the stylesheet, which the page's policy lets apply.
    assert_eq!(dashboard["barFill"], "rgb(11, 87, 208)", "{dashboard}");
    let paid = h.web().script(
        "var d = Array.prototype.find.call(document.querySelectorAll('.figures dt'), \
         function (dt) { return dt.textContent === 'Paid calls'; }); \
         return d ? d.nextElementSibling.textContent : null;",
    );
    assert_eq!(paid, "2");
    h.axe("dashboard");
    h.web().resize(390, 844);
    let layout = h
        .web()
        .script("return {inner: window.innerWidth, scroll: document.documentElement.scrollWidth};");
    assert!(
        layout["scroll"].as_f64() <= layout["inner"].as_f64(),
        "the dashboard scrolls sideways on a phone: {layout}"
    );
    h.axe("dashboard-phone");
    h.web().resize(1280, 900);

    // Signing out: the form again, and the dashboard is gone from this browser.
    h.web().click("#sign-out");
    let out = page_is("Sign in to the dashboard");
    assert_eq!(out["bars"], 0, "{out}");
    h.web().open(&admin);
    let again = page_is("Sign in to the dashboard");
    assert!(
        !again["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Configuration check")
    );
}

/// How the dashboard reads at the window's width: its chart's labels (the drawing's times and
/// the scale beside it), each with the height of its box and its font size times the scale the
/// drawing is shown at, in CSS pixels, and any time that runs into the next one or out of the
/// page; every word of a table's cell drawn over more than one
/// line (a name or an address broken in its middle); every table wider than its place; the
/// buttons to block a client.
const READING_SCRIPT: &str = r#"
var out = {inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
  labels: [], overlap: [], broken: [], wider: [], cells: 0, block: [], own: []};
Array.prototype.forEach.call(document.querySelectorAll('main details'), function (d) { d.open = true; });
Array.prototype.forEach.call(
  document.querySelectorAll('svg.chart text, .chart-frame .scale span'), function (t) {
    var ctm = t.getScreenCTM ? t.getScreenCTM() : null;
    var scale = ctm ? Math.sqrt(ctm.a * ctm.a + ctm.b * ctm.b) : 1;
    out.labels.push({text: t.textContent, height: t.getBoundingClientRect().height,
      size: parseFloat(getComputedStyle(t).fontSize) * scale});
  });
var times = Array.prototype.map.call(document.querySelectorAll('svg.chart text'), function (t) {
  return {text: t.textContent, box: t.getBoundingClientRect()};
});
var page = document.querySelector('main').getBoundingClientRect();
times.forEach(function (t, i) {
  var next = times[i + 1];
  if (next && t.box.right > next.box.left) { out.overlap.push(t.text + ' runs into ' + next.text); }
  if (t.box.left < page.left || t.box.right > page.right) { out.overlap.push(t.text + ' leaves the page'); }
});
Array.prototype.forEach.call(document.querySelectorAll('main table th, main table td'), function (cell) {
  out.cells++;
  var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (var node = walk.nextNode(); node; node = walk.nextNode()) {
    var word = /\S+/g, m;
    while ((m = word.exec(node.data))) {
      var range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      var lines = {};
      Array.prototype.forEach.call(range.getClientRects(), function (r) {
        if (r.width > 0) { lines[Math.round(r.top)] = true; }
      });
      var n = Object.keys(lines).length;
      if (n > 1) { out.broken.push(m[0] + ' (' + cell.tagName + ', ' + n + ' lines)'); }
    }
  }
});
Array.prototype.forEach.call(document.querySelectorAll('main table'), function (t) {
  var room = t.parentElement.clientWidth;
  if (t.offsetWidth > room) {
    out.wider.push((t.caption ? t.caption.textContent : t.rows[0].textContent) + ': ' +
      t.offsetWidth + ' px in ' + room);
  }
});
Array.prototype.forEach.call(document.querySelectorAll('input[name="action"][value="block"]'),
  function (i) { out.block.push(i.form.querySelector('input[name="client"]').value); });
Array.prototype.forEach.call(document.querySelectorAll('main td'), function (td) {
  if (/\(you\)/.test(td.textContent)) { out.own.push(td.textContent.trim()); }
});
return out;
"#;

/// The dashboard with every part shown (the warning, spend limits, the chart, counts, clients
/// among them an IPv6 /64 and the owner's own address, a note, a block), at 1280 and at 390 px:
/// the chart's text at least 11 px, no word or address broken in a table, no sideways scroll,
/// no block button for the owner's own address, and axe-core clean in both schemes; the
/// sign-in page and the public page on a phone too. Full-page screenshots of each.
#[test]
fn the_dashboard_with_every_part_reads_on_a_phone_and_passes_axe() {
    const PASSWORD: &str = "correct horse battery staple";
    /// A client with a long address: an IPv6 /64, as the rules count it.
    const IPV6: &str = "2001:db8:85a3:1234:5678:9abc:def0:1";
    const IPV6_CLIENT: &str = "2001:db8:85a3:1234::/64";
    let hash = resolve::support::password::hash(PASSWORD, b"browser-test-sal").expect("hash");
    // A link under /fail/ is refused by the provider as a wrong token: an ACTION NEEDED note.
    let provider = support::Provider::start_with(support::Reply::with(|call| {
        if call.form("link").unwrap_or_default().contains("/fail/") {
            support::Reply::json(401, json!({"error": "bad token"}))
        } else {
            support::Reply::Default
        }
    }));
    let h = Setup::new()
        .rules(vec![rule("ip", "ip", 2, 3600)])
        .provider(provider)
        .config(move |c| {
            c["admin"] = json!({ "password_hash": hash });
            c["client"] = json!({"trusted_proxies": ["127.0.0.1"]});
            c["spend"] = json!([{"name": "day", "limit": 100, "window_secs": 86400}]);
        })
        .start();

    // The public page on a phone.
    h.open_page();
    h.web().phone(true);
    h.axe("page-phone");
    h.web().phone(false);

    // The owner's browser: two paid calls and a refusal.
    for i in 0..3 {
        h.submit(&format!("https://example.com/mine-{i}.zip"));
    }
    // Other clients, through the trusted proxy: each two paid calls and a refusal; a provider
    // failure; a bad request.
    let client = h.site().client();
    let ask = |from: &str, link: &str| {
        let target = format!("/cgi-bin/resolve?link={}", support::urlenc::encode(link));
        let r = client
            .send(
                &support::Request::get(&target)
                    .header("Accept", "text/plain")
                    .header("X-Forwarded-For", from),
            )
            .expect("a request");
        r.status
    };
    for from in [IPV6, "198.51.100.254", "203.0.113.77"] {
        let answers: Vec<u16> = (0..3)
            .map(|i| ask(from, &format!("https://example.com/{i}.zip")))
            .collect();
        assert_eq!(answers, [200, 200, 429], "{from}");
    }
    assert_eq!(ask("192.0.2.10", "https://example.com/fail/auth"), 502);
    assert_eq!(ask("192.0.2.11", "not a link"), 400);

    let admin = format!("{}/admin", h.endpoint());
    let heading = |h1: &str| {
        wait_for(&format!("the page {h1:?}"), Duration::from_secs(15), || {
            let seen = h
                .web()
                .script("var h = document.querySelector('h1'); return h ? h.textContent : '';");
            if seen == h1 {
                Ok(())
            } else {
                Err(seen.to_string())
            }
        })
    };
    let shots = |label: &str| {
        for scheme in ["light", "dark"] {
            h.web().scheme(scheme);
            h.web()
                .full_screenshot(&h.dir.join(&format!("{label}-full-{scheme}.png")));
        }
        h.web().scheme("light");
    };
    h.web().open(&admin);
    heading("Sign in to the dashboard");
    h.axe("dashboard-sign-in");
    h.web().phone(true);
    h.axe("dashboard-sign-in-phone");
    h.web().phone(false);
    h.web().type_into("#password", PASSWORD);
    h.web().click("#submit");
    heading("Dashboard");

    // The long client blocked from the dashboard: the Blocks table lists it.
    h.web().script(&format!(
        "document.querySelector('input[name=\"client\"][value=\"{IPV6_CLIENT}\"]').form\
         .querySelector('button').click(); return null;"
    ));
    wait_for("the block to be listed", Duration::from_secs(15), || {
        let text = h.web().script(
            "var b = document.getElementById('blocks'); \
             return b ? b.parentNode.textContent : '';",
        );
        if text.as_str().is_some_and(|t| t.contains(IPV6_CLIENT)) {
            Ok(())
        } else {
            Err(text.to_string())
        }
    });
    heading("Dashboard");

    let text = h
        .web()
        .script("return document.body.innerText;")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for shown in [
        "Spend limits, now",
        "Refused by rule",
        "Provider failures by kind",
        "Bad requests by reason",
        "ACTION NEEDED: ",
        "Any other site can spend your paid calls",
        "allowed_origins",
        "Lift",
        IPV6_CLIENT,
        "198.51.100.254",
    ] {
        assert!(text.contains(shown), "{shown} in {text}");
    }

    for phone in [false, true] {
        h.web().phone(phone);
        let label = if phone {
            "dashboard-data-phone"
        } else {
            "dashboard-data"
        };
        let seen = h.web().script(READING_SCRIPT);
        eprintln!("{label}: {seen:#}");
        let width = if phone { 390.0 } else { 1280.0 };
        assert_eq!(seen["inner"].as_f64(), Some(width), "{seen}");
        assert!(
            seen["scroll"].as_f64() <= seen["inner"].as_f64(),
            "{label}: the page scrolls sideways: {seen}"
        );
        let labels = seen["labels"].as_array().expect("labels");
        assert!(labels.len() >= 8, "the times and the scale: {seen}");
        for l in labels {
            for measure in ["height", "size"] {
                let px = l[measure].as_f64().expect("a size");
                assert!(
                    px >= 11.0,
                    "{label}: the chart's label {} is {px:.1} px ({measure}), under 11: {seen}",
                    l["text"]
                );
            }
        }
        assert_eq!(seen["overlap"], json!([]), "{label}: the chart's times");
        assert!(seen["cells"].as_u64() > Some(40), "{seen}");
        assert_eq!(
            seen["broken"],
            json!([]),
            "{label}: words or addresses broken inside a table's cell"
        );
        assert_eq!(
            seen["wider"],
            json!([]),
            "{label}: tables wider than the page"
        );
        // The owner's own address (the browser's, 127.0.0.1) is marked, with no button.
        let mut block: Vec<&str> = seen["block"]
            .as_array()
            .expect("buttons")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        block.sort_unstable();
        assert_eq!(
            block,
            ["198.51.100.254", IPV6_CLIENT, "203.0.113.77"],
            "{label}: {seen}"
        );
        assert_eq!(
            seen["own"],
            json!(["127.0.0.1 (you)", "127.0.0.1 (you)"]),
            "{label}: {seen}"
        );
        h.axe(label);
        shots(label);
    }
    // The longer periods, drawn day by day, on the phone.
    for since in ["7d", "30d"] {
        h.web().open(&format!("{admin}?since={since}"));
        heading("Dashboard");
        let seen = h.web().script(READING_SCRIPT);
        let labels = seen["labels"].as_array().expect("labels");
        assert!(labels.len() >= 5, "{since}: {seen}");
        for l in labels {
            assert!(l["size"].as_f64() >= Some(11.0), "{since}: {l}");
        }
        assert_eq!(seen["overlap"], json!([]), "{since}: {seen}");
        assert_eq!(seen["scroll"], json!(390), "{since}: {seen}");
    }
    h.web().phone(false);
}

#[test]
fn the_setup_page_and_the_settings_at_phone_and_desktop_widths() {
    let h = Setup::new().start();
    // The account's own folder: the program writes the code and the file beside the
    // configuration.
    let config = h.site().config_path.clone();
    support::system::give_to_server_user(config.parent().expect("a folder"));
    let admin = format!("{}/admin", h.endpoint());
    // The page with this heading and these words (a form sent again keeps its heading: its
    // answer is known by what it says).
    let shows = |h1: &str, words: &str| {
        wait_for(
            &format!("the page {h1:?} saying {words:?}"),
            Duration::from_secs(15),
            || {
                let page = h.web().script(
                    "var h = document.querySelector('h1'); return {h1: h ? h.textContent : '', \
                 text: document.body ? document.body.innerText : '', \
                 inner: window.innerWidth, scroll: document.documentElement.scrollWidth};",
                );
                if page["h1"] == h1 && page["text"].as_str().is_some_and(|t| t.contains(words)) {
                    Ok(page)
                } else {
                    Err(page.to_string())
                }
            },
        )
    };
    let h1_is = |h1: &str| shows(h1, "");
    let says = |page: &Value, words: &str| {
        let text = page["text"].as_str().unwrap_or_default();
        assert!(text.contains(words), "{words:?} in {page}");
    };
    let fits = |label: &str| {
        for (width, height) in [(390, 844), (1280, 900)] {
            h.web().resize(width, height);
            let layout = h.web().script(
                "return {inner: window.innerWidth, scroll: document.documentElement.scrollWidth};",
            );
            assert!(
                layout["scroll"].as_f64() <= layout["inner"].as_f64(),
                "{label} scrolls sideways at {width} px: {layout}"
            );
            h.axe(&format!("{label}-{width}"));
        }
    };
    // A site with the starter's settings: the first setup's whole form.
    let starter: Value = serde_json::from_str(resolve::config::starter::TEXT).expect("starter");
    h.site().edit_config(|c| {
        for key in ["provider", "rules", "spend", "allowed_origins"] {
            c[key] = starter[key].clone();
        }
        if let Some(c) = c.as_object_mut() {
            c.remove("block");
            c.remove("allow");
        }
    });
    h.web().open(&admin);
    let page = h1_is("Set up this site");
    says(&page, "The site's addresses");
    fits("setup");
    let code_file = config.with_file_name("setup-code.txt");
    let code = fs::read_to_string(&code_file).expect("the code's file");
    let code = code.lines().next().expect("the code");
    // Too short a password: the form says so under the field, and keeps the code.
    h.web().type_into("#code", code);
    h.web().type_into("#password", "short");
    h.web().type_into("#password_again", "short");
    h.web().click("#save");
    let page = shows("Set up this site", "Nothing was changed");
    says(&page, "the password has 5 characters");
    let kept = h
        .web()
        .script("return document.getElementById('code').value;");
    assert_eq!(kept, json!(code), "the code stays in its field");
    fits("setup-problems");
    h.web()
        .type_into("#password", "correct horse battery staple");
    h.web()
        .type_into("#password_again", "correct horse battery staple");
    h.web().click("#save");
    let page = shows("Dashboard", "The site is set up");
    says(&page, "Cron Jobs");
    let text = page["text"].as_str().unwrap_or_default();
    assert!(text.contains("Settings"), "{text}");
    assert!(
        !text.contains(support::config::TOKEN),
        "the token is never shown"
    );
    assert!(!code_file.exists(), "the code is used up");
    fits("set-up");
    h.web().type_into("#block", "not an address");
    h.web().click("#save-settings");
    shows("Dashboard", "is not an address or range");
    fits("settings-problems");
    // A range wider than the Block button takes: asked about in a second step, then saved.
    h.web().type_into("#block", "10.0.0.0/8");
    h.web().click("#save-settings");
    // Waited for by what the answer says: the page before it has the same heading.
    let page = shows("Dashboard", "Confirm what this saves");
    says(&page, "10.0.0.0/8 is wider than an IPv4 /16");
    fits("settings-confirm");
    h.web().click("#confirm");
    h.web().click("#save-settings");
    shows("Dashboard", "Saved.");

    // The password forgotten, the admin section removed: set up again, no setting shown.
    h.site().edit_config(|c| {
        c["provider"] = json!({"preset": "alldebrid", "token": support::config::TOKEN});
        if let Some(c) = c.as_object_mut() {
            c.remove("admin");
        }
    });
    h.web().open(&admin);
    let page = shows("Set up this site", "they stay as they are");
    let text = page["text"].as_str().unwrap_or_default();
    assert!(!text.contains("AllDebrid"), "{text}");
    fits("setup-again");

    // A mistake in the file: the dashboard says where, and how to mend it.
    let broken = fs::read_to_string(&config)
        .expect("the configuration")
        .replacen(',', "", 1);
    support::config::write_text(&h.site().dir, &broken);
    h.web().open(&admin);
    let page = h1_is("The settings cannot be read");
    says(&page, "Metrics > Errors");
    says(&page, "config.json.previous");
    fits("broken");
}

/// The dashboard's Account card with a stand-in account (premium ending in 5 days, fair use
/// 86% spent, two host quotas), read once after an admitted link: its facts, its warnings and
/// its bar at 1280 and at 390 px, with no sideways scroll, the bar inside the page and
/// axe-core clean; full-page screenshots of both widths.
#[test]
fn the_account_card_reads_at_both_widths() {
    const PASSWORD: &str = "correct horse battery staple";
    let hash = resolve::support::password::hash(PASSWORD, b"browser-test-sal").expect("hash");
    let provider = support::Provider::start_with(support::Reply::with(|call| {
        if call.path == "/user" {
            support::Reply::ok(json!({"type": "premium", "premium": 5 * 86_400 + 4 * 3600,
                                      "fair": 0.86,
                                      "quotas": {"rapidgator.net": 3, "nitroflare.com": "12 GB"}}))
        } else {
            support::Reply::Default
        }
    }));
    let account = json!({
        "url": provider.url("/user"), "headers": {"Authorization": "Bearer {token}"},
        "premium": {"pointer": "/type", "equals": "premium"},
        "premium_seconds_left": "/premium",
        "fair_use": {"pointer": "/fair", "unit": "used_fraction"},
        "host_quotas": "/quotas"
    });
    let h = Setup::new()
        .provider(provider)
        .config(move |c| {
            c["admin"] = json!({ "password_hash": hash });
            c["provider"]["account"] = account;
        })
        .start();
    h.open_page();
    assert!(h.submit(LINK).href.is_some());
    account_read_once(&h, "/user");

    h.web().open(&format!("{}/admin", h.endpoint()));
    h.web().type_into("#password", PASSWORD);
    h.web().click("#submit");
    let text = wait_for("the dashboard", Duration::from_secs(15), || {
        let text = h.web().script("return document.body.innerText;");
        let text = text.as_str().unwrap_or_default().to_owned();
        if text.contains("Account") && text.contains("Fair use spent") {
            Ok(text)
        } else {
            Err(text)
        }
    });
    for shown in [
        "Premium until",
        "Days left",
        "86%",
        "ACTION NEEDED: the provider account's premium ends in 5 days",
        "ACTION NEEDED: the provider account's fair use is 86% spent",
        "Host quotas left",
        "nitroflare.com",
        "12 GB",
        "Read from the provider on",
    ] {
        assert!(text.contains(shown), "{shown} in {text}");
    }
    assert!(
        !text.contains(support::config::TOKEN),
        "the token is masked"
    );
    for phone in [false, true] {
        h.web().phone(phone);
        let label = if phone {
            "account-phone"
        } else {
            "account-desktop"
        };
        let seen = h.web().script(
            "var s = document.getElementById('account').parentNode; \
             s.scrollIntoView(); \
             var m = s.querySelector('meter').getBoundingClientRect(); \
             var p = document.querySelector('main').getBoundingClientRect(); \
             return {inner: window.innerWidth, scroll: document.documentElement.scrollWidth, \
               meter: {left: m.left, right: m.right, width: m.width, height: m.height}, \
               page: {left: p.left, right: p.right}, \
               days: s.querySelector('dl').textContent};",
        );
        eprintln!("{label}: {seen:#}");
        let width = if phone { 390.0 } else { 1280.0 };
        assert_eq!(seen["inner"].as_f64(), Some(width), "{seen}");
        assert!(
            seen["scroll"].as_f64() <= seen["inner"].as_f64(),
            "{label}: the page scrolls sideways: {seen}"
        );
        let (m, p) = (&seen["meter"], &seen["page"]);
        assert!(m["width"].as_f64() > Some(40.0), "{label}: the bar: {seen}");
        assert!(m["height"].as_f64() > Some(5.0), "{label}: the bar: {seen}");
        assert!(
            m["left"].as_f64() >= p["left"].as_f64() && m["right"].as_f64() <= p["right"].as_f64(),
            "{label}: the bar leaves the page: {seen}"
        );
        h.web()
            .full_screenshot(&h.dir.join(&format!("{label}-full.png")));
        h.web()
            .script("document.getElementById('account').scrollIntoView(); return null;");
        h.shot(&format!("{label}-card.png"));
        h.axe(label);
    }
    h.web().phone(false);
}

/// With two services in `providers`, the Account card shows each one's reading under its
/// name, their warnings naming them, at 390 and 1280 px without sideways scroll, axe-core
/// clean.
#[test]
fn the_account_card_shows_each_service_at_both_widths() {
    const PASSWORD: &str = "correct horse battery staple";
    let hash = resolve::support::password::hash(PASSWORD, b"browser-test-sal").expect("hash");
    let provider =
        support::Provider::start_with(support::Reply::with(|call| match call.path.as_str() {
            "/user" => {
                support::Reply::ok(json!({"type": "premium", "premium": 5 * 86_400 + 4 * 3600,
                                             "fair": 0.3}))
            }
            "/user2" => support::Reply::ok(json!({"type": "free", "fair": 0.9})),
            _ => support::Reply::Default,
        }));
    let account = |path: &str| {
        json!({
            "url": provider.url(path), "headers": {"Authorization": "Bearer {token}"},
            "premium": {"pointer": "/type", "equals": "premium"},
            "premium_seconds_left": "/premium",
            "fair_use": {"pointer": "/fair", "unit": "used_fraction"}
        })
    };
    let (first_account, second_account) = (account("/user"), account("/user2"));
    let h = Setup::new()
        .provider(provider)
        .config(move |c| {
            c["admin"] = json!({ "password_hash": hash });
            let mut first = c["provider"].take();
            let mut second = first.clone();
            first["name"] = json!("firstsvc");
            first["account"] = first_account;
            second["name"] = json!("secondsvc");
            second["account"] = second_account;
            let map = c.as_object_mut().expect("an object");
            map.remove("provider");
            map.insert("providers".into(), json!([first, second]));
        })
        .start();
    h.open_page();
    assert!(h.submit(LINK).href.is_some());
    account_read_once(&h, "/user");
    account_read_once(&h, "/user2");

    h.web().open(&format!("{}/admin", h.endpoint()));
    h.web().type_into("#password", PASSWORD);
    h.web().click("#submit");
    let text = wait_for("the dashboard", Duration::from_secs(15), || {
        let text = h.web().script("return document.body.innerText;");
        let text = text.as_str().unwrap_or_default().to_owned();
        if text.contains("Account") && text.contains("secondsvc") {
            Ok(text)
        } else {
            Err(text)
        }
    });
    for shown in [
        "firstsvc",
        "ACTION NEEDED: the firstsvc account's premium ends in 5 days",
        "secondsvc",
        "ACTION NEEDED: the secondsvc account is not premium",
        "ACTION NEEDED: the secondsvc account's fair use is 90% spent",
    ] {
        assert!(text.contains(shown), "{shown} in {text}");
    }
    for phone in [false, true] {
        h.web().phone(phone);
        let label = if phone {
            "accounts-phone"
        } else {
            "accounts-desktop"
        };
        let seen = h.web().script(
            "var s = document.getElementById('account').parentNode; s.scrollIntoView(); \
             return {inner: window.innerWidth, scroll: document.documentElement.scrollWidth, \
               parts: s.querySelectorAll('h3').length};",
        );
        assert_eq!(seen["parts"].as_u64(), Some(2), "{label}: {seen}");
        assert!(
            seen["scroll"].as_f64() <= seen["inner"].as_f64(),
            "{label}: the page scrolls sideways: {seen}"
        );
        h.shot(&format!("{label}-card.png"));
        h.axe(label);
    }
    h.web().phone(false);
}

/// The challenge as a person meets it: the page asks only when the answer says so, loads the
/// widget's script then (the loopback stand-in), the person solves it by keyboard, and the
/// link comes; in light and dark, at desktop and phone widths.
#[test]
fn a_person_is_challenged_solves_it_and_gets_the_link() {
    let sv = support::siteverify::Siteverify::start();
    let section = sv.section("always");
    let h = Setup::new()
        .config(move |c| c["challenge"] = section)
        .start();
    h.open_page();
    // Nothing loaded before the answer asks for it.
    let before = h
        .web()
        .script("return [typeof window.turnstile, document.scripts.length];");
    assert_eq!(before[0], "undefined", "{before}");
    h.web().type_into("#link", LINK);
    h.web().click("#submit");
    let solve = wait_for("the widget", Duration::from_secs(10), || {
        let found = h.web().script(
            "var b = document.getElementById('stand-in-solve'); \
             var c = document.querySelector('#result .card'); \
             return [b ? b.textContent : '', c ? c.className : '', \
                     c ? c.textContent : ''];",
        );
        if found[0].as_str().is_some_and(|t| !t.is_empty()) {
            Ok(found)
        } else {
            Err(found.to_string())
        }
    });
    assert_eq!(solve[1], "card challenge", "{solve}");
    assert!(
        solve[2]
            .as_str()
            .unwrap_or_default()
            .contains("confirm you are a person"),
        "{solve}"
    );
    assert_eq!(
        h.site().provider.calls(),
        0,
        "nothing paid before the challenge"
    );
    // Screen readers hear that a check is asked for.
    let said = wait_for("the check said", Duration::from_secs(2), || {
        let said = h.said();
        if said.last().is_some_and(|s| s.contains("check")) {
            Ok(said)
        } else {
            Err(format!("{said:?}"))
        }
    });
    assert!(said.last().unwrap().contains("person"), "{said:?}");
    for (scheme, width, height, name) in [
        ("light", 1280, 900, "challenge-desktop-light.png"),
        ("dark", 1280, 900, "challenge-desktop-dark.png"),
        ("light", 390, 844, "challenge-phone-light.png"),
        ("dark", 390, 844, "challenge-phone-dark.png"),
    ] {
        h.web().scheme(scheme);
        h.web().resize(width, height);
        let scroll = h
            .web()
            .script("return [window.innerWidth, document.documentElement.scrollWidth];");
        assert!(
            scroll[1].as_f64() <= scroll[0].as_f64(),
            "no sideways scroll: {scroll}"
        );
        h.shot(name);
        if let Ok(dir) = env::var("CHALLENGE_SHOTS") {
            h.web().screenshot(&Path::new(&dir).join(name));
        }
    }
    h.web().scheme("light");
    h.web().resize(1280, 900);
    h.axe("challenge");
    // By keyboard: the widget comes next after the button; Enter solves it.
    h.web()
        .script("document.getElementById('submit').focus(); return 0;");
    h.web().keys(&[TAB]);
    let focused = h.web().script("return document.activeElement.id;");
    assert_eq!(
        focused, "stand-in-solve",
        "the widget is next after the button"
    );
    h.web().keys(&[ENTER]);
    let view = h.answer(Duration::from_secs(20));
    assert_eq!(view.kind, "ok", "{view:?}");
    assert_eq!(view.href.as_deref(), Some(DOWNLOAD_1), "{view:?}");
    assert_eq!(h.site().provider.calls(), 1);
    assert_eq!(sv.verifications(), 1);
    // Remembered: the next link asks nothing.
    h.web().script(&format!(
        "document.getElementById('link').value = {}; return null;",
        json!(format!("{LINK}2"))
    ));
    h.web().click("#submit");
    let view = h.answer(Duration::from_secs(20));
    assert_eq!(view.kind, "ok", "{view:?}");
    assert_eq!(sv.verifications(), 1, "no second challenge in the visit");
}

/// The program's own answer page asks for the challenge too (a browser whose page script did
/// not run): its policy lets the widget's script, and only it, load; solved, the form posts
/// the token with the link and the answer page has the link.
#[test]
fn the_answer_page_shows_the_widget_under_its_policy_and_posts_the_token() {
    let sv = support::siteverify::Siteverify::start();
    let section = sv.section("always");
    let h = Setup::new()
        .config(move |c| c["challenge"] = section)
        .start();
    let link = support::urlenc::encode(LINK);
    h.web().open(&format!("{}?link={link}", h.endpoint()));
    let solve = wait_for(
        "the widget on the answer page",
        Duration::from_secs(10),
        || {
            let found = h.web().script(
                "var b = document.getElementById('stand-in-solve'); \
             return [b ? 'found' : '', document.querySelector('.card') ? \
               document.querySelector('.card').getAttribute('data-code') : ''];",
            );
            if found[0] == "found" {
                Ok(found)
            } else {
                Err(found.to_string())
            }
        },
    );
    assert_eq!(solve[1], "challenge_required", "{solve}");
    h.axe("challenge answer page");
    h.web().click("#stand-in-solve");
    h.web().click("#submit");
    let page = wait_for("the link", Duration::from_secs(15), || {
        let href = h.web().script(
            "var a = document.querySelector('.card a'); return a ? a.getAttribute('href') : '';",
        );
        if href == DOWNLOAD_1 {
            Ok(href)
        } else {
            Err(href.to_string())
        }
    });
    assert_eq!(page, DOWNLOAD_1);
    assert_eq!(h.site().provider.calls(), 1);
    assert_eq!(sv.verifications(), 1);
}

/// Ten part links of one archive pasted into the box at once.
fn paste_parts(h: &Harness, n: usize) -> Vec<String> {
    let parts: Vec<String> = (1..=n)
        .map(|i| format!("https://hoster.example/f/file.part{i:02}.rar"))
        .collect();
    h.web().script(&format!(
        "document.getElementById('link').value = {}; return null;",
        json!(parts.join("\n"))
    ));
    h.web().click("#submit");
    parts
}

/// The list as the page shows it: each item's state class, its download link, its countdown.
const LIST_SCRIPT: &str = r#"
return Array.prototype.map.call(document.querySelectorAll('#result ol.links > li'), function (li) {
  var a = li.querySelector('a');
  var c = li.querySelector('.countdown');
  return {state: li.getAttribute('data-state'), href: a ? a.getAttribute('href') : null,
          countdown: c ? c.textContent : null, text: li.innerText};
});
"#;

#[test]
fn ten_part_links_with_five_left_give_five_links_and_five_countdowns() {
    let h = Setup::new().rules(vec![rule("ip", "ip", 5, 60)]).start();
    h.open_page();
    let parts = paste_parts(&h, 10);
    let view = h.answer(Duration::from_secs(30));
    assert_eq!(view.kind, "list", "{view:?}");
    let list = h.web().script(LIST_SCRIPT);
    let items = list.as_array().expect("items");
    assert_eq!(items.len(), 10, "{list:#}");
    let ready: Vec<&Value> = items.iter().filter(|i| i["state"] == "ready").collect();
    let refused: Vec<&Value> = items.iter().filter(|i| i["state"] == "refused").collect();
    assert_eq!((ready.len(), refused.len()), (5, 5), "{list:#}");
    for i in &ready {
        assert!(
            i["href"]
                .as_str()
                .is_some_and(|h| h.starts_with("https://cdn.test/file/")),
            "{i}"
        );
    }
    for i in &refused {
        let c = i["countdown"].as_str().unwrap_or("");
        assert!(c.starts_with("You can try again in "), "{i}");
        assert!((1..=60).contains(&number_in(c)), "{i}");
    }
    assert_eq!(h.site().provider.calls(), 5, "paid calls");
    assert!(view.result.starts_with("5 of 10 links ready"), "{view:?}");
    // What is left, in words; the links not served back in the box.
    let allowance = h.web().script(
        "var a = document.getElementById('allowance'); return a.hidden ? '' : a.textContent;",
    );
    assert_eq!(allowance, "0 of 5 left this minute.");
    let back = h
        .web()
        .script("return document.getElementById('link').value;");
    let back: Vec<&str> = back.as_str().unwrap_or("").lines().collect();
    assert_eq!(back.len(), 5, "{back:?}");
    assert!(
        back.iter().all(|l| parts.iter().any(|p| p == l)),
        "{back:?}"
    );
    h.said_last("5 of 10 links ready. The 5 not served are back in the box to send again.");
    // The countdown moves.
    let first = refused[0]["countdown"].as_str().unwrap_or("").to_owned();
    let moved = wait_for("a countdown to move", Duration::from_secs(5), || {
        let now = h.web().script(LIST_SCRIPT);
        let c = now
            .as_array()
            .and_then(|a| a.iter().find(|i| i["state"] == "refused"))
            .and_then(|i| i["countdown"].as_str())
            .unwrap_or("")
            .to_owned();
        if c != first { Ok(c) } else { Err(c) }
    });
    assert!(
        number_in(&moved) < number_in(&first),
        "{first} then {moved}"
    );

    // "Copy all links" by keyboard: from the button, Tab past the five links to it.
    h.web()
        .script("document.getElementById('copy-all').focus(); return null;");
    h.web().keys(&[ENTER]);
    let copied = wait_for("the copy to be told", Duration::from_secs(5), || {
        let said = h
            .web()
            .script("var c = document.querySelector('.copied'); return c ? c.textContent : '';");
        match said.as_str() {
            Some(text) if !text.is_empty() => Ok(text.to_string()),
            _ => Err(said.to_string()),
        }
    });
    assert!(
        copied == "Copied 5 links." || copied.starts_with("Could not copy"),
        "{copied}"
    );
    assert_eq!(h.view().focus, "copy-all", "focus stays on the button");
    h.contrast("links");
    h.axe("links");
    h.web().phone(true);
    h.axe("links-phone");
    h.web().phone(false);
}

/// AllDebrid's public host list (docs.alldebrid.com, "Hosts": `GET /v4/hosts/domains`).
const AD_DOMAINS: &str = "/v4/hosts/domains";

#[test]
fn the_page_says_what_is_left_and_lists_the_hosts_to_search() {
    let api = support::Provider::builder().routes_only().start();
    api.route(
        "GET",
        AD_DOMAINS,
        Reply::ok(json!({"status": "success", "data": {
            "hosts": ["1fichier.com", "mega.nz", "rapidgator.net", "uptobox.com"],
            "streams": ["youtube.com"]
        }})),
    );
    api.route(
        "POST",
        "/v4.1/link/unlock",
        Reply::ok(json!({"status": "success", "data": {"link": "https://a1.debrid.it/dl/x/f.zip", "filename": "f.zip"}})),
    );
    let base = api.url("");
    let h = Setup::new()
        .provider(api)
        .rules(vec![
            rule("ip", "ip", 30, 60),
            json!({"name": "daily-bytes", "key": "ip", "unit": "bytes", "limit": 20_000_000_000u64, "window_secs": 86400}),
        ])
        .config(move |c| {
            c["provider"] = json!({"preset": "alldebrid", "token": support::config::TOKEN,
                "base_url": base, "link_check": null, "account": null,
                "hosts": {"url": "{base}/v4/hosts/domains", "lists": ["/data/hosts", "/data/streams"]}});
        })
        .start();
    h.open_page();
    // No list kept yet: no host section, and asking fetched nothing.
    thread::sleep(Duration::from_millis(500));
    assert_eq!(
        h.web()
            .script("return document.getElementById('hosts').hidden;"),
        true
    );
    assert_eq!(h.site().provider.calls(), 0);
    // One link: the list is fetched before paying, as always; what is left is said.
    let view = h.submit("https://mega.nz/file/abc");
    assert_eq!(
        view.href.as_deref(),
        Some("https://a1.debrid.it/dl/x/f.zip"),
        "{view:?}"
    );
    let allowance = wait_for("the allowance", Duration::from_secs(5), || {
        let a = h.web().script(
            "var a = document.getElementById('allowance'); return a.hidden ? '' : a.textContent;",
        );
        match a.as_str() {
            Some(t) if !t.is_empty() => Ok(t.to_owned()),
            _ => Err(a.to_string()),
        }
    });
    assert_eq!(
        allowance,
        "29 of 30 left this minute. 20 GB of 20 GB left today."
    );
    let calls = h.site().provider.calls();

    // Opened again: the hosts, searchable, by keyboard.
    h.open_page();
    wait_for("the host list", Duration::from_secs(10), || {
        let hidden = h
            .web()
            .script("return document.getElementById('hosts').hidden;");
        if hidden == json!(false) {
            Ok(())
        } else {
            Err(hidden.to_string())
        }
    });
    let summary = h
        .web()
        .script("return document.querySelector('#hosts summary').textContent;");
    assert_eq!(summary, "Supported file hosts (5)");
    h.web()
        .script("document.querySelector('#hosts summary').focus(); return null;");
    h.web().keys(&[ENTER]);
    assert_eq!(
        h.web()
            .script("return document.getElementById('hosts').open;"),
        true
    );
    h.web().keys(&[TAB]);
    assert_eq!(h.view().focus, "host-search");
    h.web().keys(&["rapid"]);
    let shown = h.web().script(
        "return [Array.prototype.map.call(document.querySelectorAll('#host-list li'), \
         function (l) { return l.textContent; }), document.getElementById('host-count').textContent];",
    );
    assert_eq!(shown, json!([["rapidgator.net"], "1 host matches."]));
    h.axe("hosts");
    h.web().phone(true);
    h.axe("hosts-phone");
    h.web().phone(false);
    assert_eq!(
        h.site().provider.calls(),
        calls,
        "the page's questions cost no call"
    );
}

/// Without JavaScript, several links pasted in the box get the program's own list page: each
/// link's state, the wait of those refused, what is left; in both schemes and on a phone.
#[test]
fn several_links_without_javascript_get_a_list_page() {
    let h = Setup::new()
        .without_javascript()
        .rules(vec![rule("ip", "ip", 2, 60)])
        .start();
    h.web().open(&h.base);
    h.web().type_into(
        "#link",
        "https://hoster.example/a.part1.rar\nhttps://hoster.example/a.part2.rar\nhttps://hoster.example/a.part3.rar",
    );
    h.web().click("#submit");
    let page = wait_for("the list page", Duration::from_secs(15), || {
        let page = h.web().script(
            "return {path: location.pathname, h1: (document.querySelector('h1') || {}).textContent, \
             states: Array.prototype.map.call(document.querySelectorAll('ol.links > li'), \
               function (l) { return l.getAttribute('data-state'); }), \
             links: document.querySelectorAll('ol.links a').length, \
             allowance: (document.querySelector('.allowance') || {}).textContent, \
             text: document.body ? document.body.innerText : ''};",
        );
        if page["path"] == "/cgi-bin/resolve"
            && page["states"].as_array().is_some_and(|s| !s.is_empty())
        {
            Ok(page)
        } else {
            Err(page.to_string())
        }
    });
    assert_eq!(page["h1"], "2 of 3 links ready", "{page}");
    // Served a few at a time: which two of the three come first is the scheduler's doing.
    let mut states: Vec<&str> = page["states"]
        .as_array()
        .expect("states")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    states.sort_unstable();
    assert_eq!(states, ["ready", "ready", "refused"], "{page}");
    assert_eq!(page["links"], 2, "{page}");
    assert_eq!(page["allowance"], "0 of 2 left this minute.", "{page}");
    assert!(
        page["text"]
            .as_str()
            .unwrap_or("")
            .contains("Too many requests: try again in "),
        "{page}"
    );
    assert_eq!(h.site().provider.calls(), 2);
    drop(h);

    // The same page in a browser that runs scripts (the page carries none), for axe-core.
    let h = Setup::new().rules(vec![rule("ip", "ip", 2, 60)]).start();
    let query: Vec<String> = ["a.part1.rar", "a.part2.rar", "a.part3.rar"]
        .iter()
        .map(|f| format!("link=https%3A%2F%2Fhoster.example%2F{f}"))
        .collect();
    h.web()
        .open(&format!("{}?{}", h.endpoint(), query.join("&")));
    assert_eq!(
        h.web()
            .script("return document.querySelector('h1').textContent;"),
        "2 of 3 links ready"
    );
    h.contrast("list page");
    h.axe("list-page");
    h.web().phone(true);
    h.axe("list-page-phone");
    h.web().phone(false);
}

/// Several links pasted by a visitor who must solve the challenge: the page asks once, and the
/// solved check sends the whole paste again with its token; every link comes, the service paid
/// once for each, the token checked once.
#[test]
fn a_challenged_paste_of_several_links_is_sent_again_whole_once_solved() {
    let sv = support::siteverify::Siteverify::start();
    let section = sv.section("always");
    let h = Setup::new()
        .config(move |c| c["challenge"] = section)
        .start();
    h.open_page();
    paste_parts(&h, 3);
    let solve = wait_for("the widget", Duration::from_secs(10), || {
        let found = h.web().script(
            "var b = document.getElementById('stand-in-solve'); \
             var c = document.querySelector('#result .card'); \
             return [b ? b.textContent : '', c ? c.className : ''];",
        );
        if found[0].as_str().is_some_and(|t| !t.is_empty()) {
            Ok(found)
        } else {
            Err(found.to_string())
        }
    });
    assert_eq!(solve[1], "card challenge", "{solve}");
    assert_eq!(
        h.site().provider.calls(),
        0,
        "nothing paid before the check"
    );
    h.web().click("#stand-in-solve");
    let view = h.answer(Duration::from_secs(30));
    assert_eq!(view.kind, "list", "{view:?}");
    let list = h.web().script(LIST_SCRIPT);
    let states: Vec<&str> = list
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["state"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(states, ["ready", "ready", "ready"], "{list:#}");
    assert_eq!(h.site().provider.calls(), 3, "each link paid once");
    assert_eq!(sv.verifications(), 1, "one check for the paste");
    h.axe("challenged-paste");
}

//! A stand-in for the challenge service on loopback: siteverify as Turnstile answers it (a
//! token used once; a reused one refused with `timeout-or-duplicate`; a wrong secret refused
//! with `invalid-input-secret`), counting its calls, and the widget's script: a small script
//! that renders a button which "solves" and hands the callback a token.
//!
//! A token the stand-in accepts is `pass.HOST.ACTION.NONCE`, as the widget's script makes it
//! from the page's host and the action it was rendered with: siteverify answers that host and
//! action, as Turnstile answers those the widget was solved with.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::provider::{Provider, Reply};

/// The secret the stand-in accepts.
pub const SECRET: &str = "test-secret-0x4BBB";
/// The site key the configuration names.
pub const SITE_KEY: &str = "test-site-0x4AAA";

/// The widget's script: `turnstile.render(el, {sitekey, action, callback})` draws a button; a
/// press calls `callback` with a token for this page's host. Pages that render implicitly
/// (`<div class="cf-turnstile">` in a form) get the button too, and the token in the form's
/// `cf-turnstile-response` field.
pub const WIDGET_JS: &str = r#"(function () {
  function draw(el, opts) {
    var b = document.createElement('button');
    b.type = 'button';
    b.id = 'stand-in-solve';
    b.textContent = 'I am a person (stand-in)';
    b.addEventListener('click', function () {
      var token = 'pass.' + location.hostname + '.' + (opts.action || '') + '.' + Math.random().toString(36).slice(2);
      var field = document.createElement('input');
      field.type = 'hidden';
      field.name = 'cf-turnstile-response';
      field.value = token;
      el.appendChild(field);
      b.textContent = 'Solved';
      if (typeof opts.callback === 'function') { opts.callback(token); }
    });
    el.appendChild(b);
    return 'w0';
  }
  window.turnstile = { render: function (el, opts) {
    if (typeof el === 'string') { el = document.querySelector(el); }
    return draw(el, opts || {});
  }, reset: function () {}, remove: function () {} };
  var implicit = document.querySelectorAll('.cf-turnstile');
  for (var i = 0; i < implicit.length; i++) {
    draw(implicit[i], { action: implicit[i].getAttribute('data-action') });
  }
})();
"#;

/// The stand-in: siteverify at `/siteverify`, the widget at `/api.js`.
pub struct Siteverify {
    pub server: Provider,
}

impl Siteverify {
    pub fn start() -> Siteverify {
        let server = Provider::builder().routes_only().start();
        let used: Arc<Mutex<HashSet<String>>> = Arc::default();
        server.route(
            "POST",
            "/siteverify",
            Reply::with(move |call| {
                if call.form("secret") != Some(SECRET) {
                    return Reply::ok(
                        json!({"success": false, "error-codes": ["invalid-input-secret"]}),
                    );
                }
                let token = call.form("response").unwrap_or_default().to_owned();
                let parts: Vec<&str> = token.split('.').collect();
                if parts.len() < 4 || parts[0] != "pass" {
                    return Reply::ok(
                        json!({"success": false, "error-codes": ["invalid-input-response"]}),
                    );
                }
                if !used.lock().unwrap().insert(token.clone()) {
                    return Reply::ok(
                        json!({"success": false, "error-codes": ["timeout-or-duplicate"]}),
                    );
                }
                let n = parts.len();
                Reply::ok(json!({
                    "success": true,
                    "error-codes": [],
                    "challenge_ts": "2026-12-05T10:00:00.000Z",
                    "hostname": parts[1..n - 2].join("."),
                    "action": parts[n - 2],
                }))
            }),
        );
        server.route(
            "GET",
            "/api.js",
            Reply::raw(200, "text/javascript", WIDGET_JS),
        );
        Siteverify { server }
    }

    /// The `challenge` section for this stand-in, with this `when`.
    pub fn section(&self, when: &str) -> serde_json::Value {
        json!({
            "site_key": SITE_KEY,
            "secret": SECRET,
            "when": when,
            "verify_url": self.server.url("/siteverify"),
            "script_url": self.server.url("/api.js"),
        })
    }

    /// siteverify calls so far.
    pub fn verifications(&self) -> usize {
        self.server.calls_to("POST", "/siteverify")
    }
}

/// A token the stand-in accepts once, as its widget makes it for `host`.
pub fn token(host: &str, nonce: &str) -> String {
    format!("pass.{host}.resolve.{nonce}")
}

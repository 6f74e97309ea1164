//! The challenge a visitor may be asked to solve before a paid call (Cloudflare Turnstile, or
//! a service whose siteverify takes the same form): its settings, when it is asked, and what
//! its verification said. The HTTPS call is in `siteverify`, the remembering cookie in `cookie`.

pub mod cookie;
pub mod siteverify;

use crate::core::rule::Rule;
use crate::support::secret::Secret;

/// When a visitor is asked to solve the challenge (`challenge.when`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Before every link, unless a solved challenge is remembered.
    Always,
    /// When the client had no admitted request in the last day.
    NewClients,
    /// When a rule of the visitor's own refuses it: a solved challenge gives a small extra
    /// allowance, once per window; a client that does not solve gets the 429.
    OverLimit,
    /// Once the site's spend passes a share of its limit.
    Busy,
}

impl When {
    /// The word the configuration writes.
    pub fn word(self) -> &'static str {
        match self {
            When::Always => "always",
            When::NewClients => "new_clients",
            When::OverLimit => "over_limit",
            When::Busy => "busy",
        }
    }

    /// The mode of a word, if it is one.
    pub fn from_word(word: &str) -> Option<When> {
        [When::Always, When::NewClients, When::OverLimit, When::Busy]
            .into_iter()
            .find(|w| w.word() == word)
    }
}

/// What happens when siteverify cannot answer (down, slow, a broken answer, the secret
/// refused): `challenge.on_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// The link is refused (503) until siteverify answers again: no paid call unchecked.
    Deny,
    /// The link is answered as if the challenge had been solved (nothing is remembered).
    Allow,
}

/// The checked `challenge` section.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Public: shown to the page, which shows the widget with it.
    pub site_key: String,
    /// Sent only to siteverify; never shown, never logged.
    pub secret: Secret,
    pub when: When,
    /// Where tokens are verified (Turnstile's siteverify by default).
    pub verify_url: String,
    /// The widget's script the page loads (Turnstile's by default); another address is for
    /// tests and other services.
    pub script_url: String,
    /// The action the widget is rendered with and siteverify must answer; None: not checked
    /// (a service that answers none).
    pub action: Option<String>,
    /// The hostnames siteverify may answer; empty: the host the request was sent to.
    pub hostnames: Vec<String>,
    /// How long a solved challenge is remembered by its cookie.
    pub remember_secs: u32,
    /// `over_limit`: the extra links a solved challenge gives, once per this rule's window.
    pub extra: Rule,
    /// `busy`: the share of a spend limit past which visitors are asked.
    pub busy_share: f64,
    pub on_error: OnError,
    /// The longest siteverify may take.
    pub timeout_ms: u64,
}

impl Settings {
    /// What the answer asking for the challenge tells the page.
    pub fn offer(&self) -> crate::http::problem::Offer {
        crate::http::problem::Offer {
            site_key: self.site_key.clone(),
            script_url: self.script_url.clone(),
            action: self.action.clone(),
        }
    }
}

pub use crate::http::problem::TOKEN_FIELD;
/// The longest token accepted: Turnstile's tokens are at most 2048 characters.
pub const MAX_TOKEN_BYTES: usize = 2048;

/// What siteverify said of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Solved, for this site's host and action.
    Solved,
    /// Not solved, expired, used before, or for another host or action: the reason for the log.
    Refused(String),
}

/// Why siteverify gave no verdict: down, slow, an answer that is not its form, or one that
/// says the site's own secret is wrong. The owner's policy decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError(pub String);

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VerifyError {}

/// Asks whether a token was solved: the HTTPS call in production, a test's stand-in beside.
pub trait Verify {
    /// `remote_ip` is the client's address; `hostname` the host the page was served from.
    fn verify(
        &self,
        settings: &Settings,
        token: &str,
        remote_ip: &str,
        hostname: &str,
    ) -> Result<Checked, VerifyError>;
}

/// What a request brings for the challenge, read once with the request: the widget's token
/// (POST form or query string), the remembering cookie, the host the page was sent to and
/// whether it came over https.
#[derive(Debug, Clone, Default)]
pub struct Presented {
    pub token: Option<String>,
    pub cookie: Option<String>,
    /// The request's host name, without its port, lower-case.
    pub host: String,
    pub https: bool,
}

impl Presented {
    /// Read from the CGI environment and the body already read (a POST form's).
    pub fn read(env: &crate::http::request::Env, post: bool, body: &[u8]) -> Presented {
        let from = |source: &[u8]| {
            crate::net::form::raw_values(source, TOKEN_FIELD)
                .first()
                .and_then(|raw| crate::net::form::decode(raw).ok())
                .and_then(|t| String::from_utf8(t).ok())
        };
        let token = post
            .then(|| from(body))
            .flatten()
            .or_else(|| env.get("QUERY_STRING").and_then(from))
            .filter(|t| !t.is_empty() && t.len() <= MAX_TOKEN_BYTES);
        let cookie = env
            .text("HTTP_COOKIE")
            .and_then(cookie::find)
            .map(str::to_owned);
        let host = env
            .text("HTTP_HOST")
            .or_else(|| env.text("SERVER_NAME"))
            .unwrap_or_default();
        // `host:port` or `[v6]:port`: the name alone, as siteverify answers it.
        let host = match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        };
        Presented {
            token,
            cookie,
            host: host.trim_matches(['[', ']']).to_ascii_lowercase(),
            https: env
                .get("HTTPS")
                .is_some_and(|v| v.eq_ignore_ascii_case(b"on")),
        }
    }
}

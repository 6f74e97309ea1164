//! The paid link resolver: what the program asks of one (`Provider`), how a call fails
//! (`Failure`, `ProviderError`), and the provider's description as data (`spec`, checked by
//! the configuration's `provider` section), called over HTTPS (`http`), with the common
//! services as presets.

pub mod cache;
pub mod http;
pub mod presets;
pub mod resolved;
pub mod spec;

use std::fmt;

use crate::provider::resolved::Resolved;

/// Something that turns a hoster link into a download URL.
pub trait Provider {
    fn resolve(&self, link: &str) -> Result<Resolved, ProviderError>;
}

/// Answers every link with itself, for trying an installation without spending anything.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoProvider;

impl Provider for EchoProvider {
    fn resolve(&self, link: &str) -> Result<Resolved, ProviderError> {
        Ok(Resolved {
            download: link.to_owned(),
            filename: None,
        })
    }
}

/// How a provider call failed, as far as the visitor and the owner need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The provider refused the site's credentials or configuration (401/403).
    Auth,
    /// The owner's account has no quota left (traffic, links, fair use).
    Quota,
    /// The provider does not support this link's host.
    Unsupported,
    /// The file is gone.
    DeadLink,
    /// The file needs a password.
    Password,
    /// The host or the provider is down for now.
    Temporary,
    /// The provider refused this link for another reason.
    Rejected,
    /// The provider asks the site to slow down.
    RateLimited,
    /// The provider had a server error.
    Unavailable,
    /// The answer was not what the description says.
    BadAnswer,
    /// No complete answer in time. The call may have been charged.
    Timeout,
    /// No connection was made: nothing was sent, nothing charged.
    Unreachable,
}

impl Failure {
    /// The class names used in a provider's `errors` map.
    pub const CLASSES: [(&'static str, Failure); 7] = [
        ("auth", Failure::Auth),
        ("quota", Failure::Quota),
        ("unsupported", Failure::Unsupported),
        ("dead_link", Failure::DeadLink),
        ("password", Failure::Password),
        ("temporary", Failure::Temporary),
        ("rate_limit", Failure::RateLimited),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Failure::Auth => "auth",
            Failure::Quota => "quota",
            Failure::Unsupported => "unsupported",
            Failure::DeadLink => "dead_link",
            Failure::Password => "password",
            Failure::Temporary => "temporary",
            Failure::Rejected => "rejected",
            Failure::RateLimited => "rate_limit",
            Failure::Unavailable => "unavailable",
            Failure::BadAnswer => "bad_answer",
            Failure::Timeout => "timeout",
            Failure::Unreachable => "unreachable",
        }
    }
}

/// A failed provider call. `message` is the provider's words for the visitor (cleaned);
/// `detail` is for the owner's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    pub failure: Failure,
    /// False only when no call of this resolution reached the provider: nothing was charged.
    pub reached: bool,
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message: Option<String>,
    pub retry_after: Option<u32>,
    pub detail: String,
}

impl ProviderError {
    pub fn new(failure: Failure, detail: impl Into<String>) -> ProviderError {
        ProviderError {
            failure,
            reached: failure != Failure::Unreachable,
            status: None,
            code: None,
            message: None,
            retry_after: None,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "class={} {}", self.failure.name(), self.detail)?;
        if let Some(s) = self.status {
            write!(f, " (HTTP {s})")?;
        }
        if let Some(c) = &self.code {
            write!(f, " code={c}")?;
        }
        if let Some(m) = &self.message {
            write!(f, " message={m:?}")?;
        }
        Ok(())
    }
}

/// Longest provider message passed on, in characters.
const MAX_MESSAGE_CHARS: usize = 200;

/// A provider's text made safe to show and log: one line, printable, bounded.
pub fn clean_text(s: &str) -> String {
    crate::support::text::one_line(s, MAX_MESSAGE_CHARS)
}

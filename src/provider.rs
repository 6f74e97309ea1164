//! The paid link resolver: what the program asks of one (`Provider`), how a call fails
//! (`Failure`, `ProviderError`), and the provider's description as data (`spec`, checked by
//! the configuration's `provider` section), called over HTTPS (`http`), with the common
//! services as presets.

pub mod account;
pub mod cache;
pub mod described;
pub mod http;
pub mod job;
pub mod presets;
pub mod resolved;
pub mod spec;

use std::fmt;

use crate::provider::resolved::Resolved;

/// What a free check of one link found: the file dead, or its size when it gave one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    pub dead: bool,
    /// In bytes; None when the check gave none (or 0).
    pub size: Option<u64>,
}

/// Something that turns a hoster link into a download URL. `meter` is asked before every call
/// after the first (the first was counted when the request was admitted).
pub trait Provider {
    fn resolve(&self, link: &str, meter: &dyn Meter) -> Result<Resolved, ProviderError>;

    /// The provider's public list of supported hosts (a free call), when it publishes one:
    /// None when it does not, else the domains or why they could not be had.
    fn host_list(&self) -> Option<Result<Vec<String>, PrecheckError>> {
        None
    }

    /// The owner's account, when the description says where it is: None when it does not,
    /// else its facts read at `now_ms`, or why they could not be had.
    fn account(&self, _now_ms: u64) -> Option<Result<account::AccountFacts, String>> {
        None
    }

    /// The provider's free check of one link, when it has one: None when it has none, else
    /// whether the check found the file dead, or why it could not tell.
    fn link_dead(&self, _link: &str) -> Option<Result<bool, PrecheckError>> {
        None
    }

    /// [`Provider::link_dead`], with the file's size when the check gives it (Real-Debrid's
    /// `unrestrict/check` does): what a site can know of a file before paying for it.
    fn check_link(&self, link: &str) -> Option<Result<Checked, PrecheckError>> {
        self.link_dead(link)
            .map(|r| r.map(|dead| Checked { dead, size: None }))
    }

    /// Polls a job a resolution left under way (every call counted by `meter`).
    fn resume(
        &self,
        _link: &str,
        _job: &job::Job,
        _meter: &dyn Meter,
    ) -> Result<Resolved, ProviderError> {
        Err(ProviderError::new(
            Failure::Unavailable,
            "this provider keeps no jobs",
        ))
    }

    /// True when a call costs the owner something: only such calls count as paid, against
    /// the spend limits, and are worth caching.
    fn pays(&self) -> bool {
        true
    }
}

/// Counts a provider's calls against its published rates as they are made: the next step's
/// call and every poll.
pub trait Meter {
    /// Asks to make one more call, of step `step` (from 0). An error says the rate is used up
    /// for now: the call is not made.
    fn another_call(&self, step: usize) -> Result<(), ProviderError>;
}

/// A meter that counts nothing: for `resolve check --live`'s one announced call.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unmetered;

impl Meter for Unmetered {
    fn another_call(&self, _: usize) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// Answers every link with itself, for trying an installation without spending anything.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoProvider;

impl Provider for EchoProvider {
    fn resolve(&self, link: &str, _: &dyn Meter) -> Result<Resolved, ProviderError> {
        Ok(Resolved {
            size: None,
            download: link.to_owned(),
            filename: None,
            files: Vec::new(),
        })
    }

    /// Nothing is spent: trying the site never uses up the budget.
    fn pays(&self) -> bool {
        false
    }
}

/// How a provider call failed, as far as the visitor and the owner need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The provider refused the site's credentials or configuration (401/403).
    Auth,
    /// The provider refuses calls from this server's address (a datacenter, VPN or shared
    /// address): neither the token's fault nor the visitor's; the owner must do what the
    /// service asks.
    ServerRefused,
    /// The owner's account or plan does not cover this (not premium, not for this host, a top-up
    /// needed): the visitor's link is not at fault.
    Plan,
    /// The owner's account has no quota left (traffic, links, fair use).
    Quota,
    /// The service retired an endpoint this version of the program calls: neither the
    /// visitor's fault nor the account's; the owner must upgrade the program.
    Retired,
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
    /// The work is paid for and still under way when the request's time is up: the job is
    /// kept, and asking again polls it.
    InProgress,
}

impl Failure {
    /// The class names used in a provider's `errors` map.
    pub const CLASSES: [(&'static str, Failure); 11] = [
        ("auth", Failure::Auth),
        ("server_refused", Failure::ServerRefused),
        ("plan", Failure::Plan),
        ("quota", Failure::Quota),
        ("retired", Failure::Retired),
        ("unsupported", Failure::Unsupported),
        ("dead_link", Failure::DeadLink),
        ("password", Failure::Password),
        ("temporary", Failure::Temporary),
        ("rate_limit", Failure::RateLimited),
        ("unavailable", Failure::Unavailable),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Failure::Auth => "auth",
            Failure::ServerRefused => "server_refused",
            Failure::Plan => "plan",
            Failure::Quota => "quota",
            Failure::Retired => "retired",
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
            Failure::InProgress => "in_progress",
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
    /// What the owner can do about it, from the description's `advice` for this class.
    pub advice: Option<String>,
    /// For `InProgress`: the job to poll.
    pub job: Option<Box<job::Job>>,
    /// The provider reported that a job it took (and was paid for) failed: the paid link is
    /// given back to the owner's spend limits.
    pub job_failed: bool,
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
            advice: None,
            job: None,
            job_failed: false,
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

impl std::error::Error for ProviderError {}

/// A template (`provider::spec`) names a value the call does not have: its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingValue(pub String);

impl fmt::Display for MissingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no value for {{{}}}", self.0)
    }
}

impl std::error::Error for MissingValue {}

/// One of a provider's free pre-checks (its link check, its host list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precheck {
    LinkCheck,
    HostList,
}

/// Why a free pre-check could not tell: the link goes on to the paid call.
#[derive(Debug)]
pub enum PrecheckError {
    /// The check's URL names a value there is none of.
    Template(MissingValue),
    /// The call could not be made.
    Call(Precheck, Box<ureq::Error>),
    /// The check answered with this HTTP status.
    Status(Precheck, u16),
    /// The host list could not be read to its end.
    Read(std::io::Error),
    /// The host list is not JSON.
    NotJson,
    /// The host list names no domain.
    NoDomain,
}

impl fmt::Display for PrecheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrecheckError::Template(e) => e.fmt(f),
            PrecheckError::Call(Precheck::LinkCheck, e) => {
                write!(f, "the link check could not be made: {e}")
            }
            PrecheckError::Call(Precheck::HostList, e) => {
                write!(f, "the host list could not be fetched: {e}")
            }
            PrecheckError::Status(Precheck::LinkCheck, s) => {
                write!(f, "the link check answered HTTP {s}")
            }
            PrecheckError::Status(Precheck::HostList, s) => {
                write!(f, "the host list answered HTTP {s}")
            }
            PrecheckError::Read(e) => write!(f, "reading the host list failed: {e}"),
            PrecheckError::NotJson => f.write_str("the host list is not JSON"),
            PrecheckError::NoDomain => f.write_str("the host list holds no domain"),
        }
    }
}

impl std::error::Error for PrecheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PrecheckError::Template(e) => Some(e),
            PrecheckError::Call(_, e) => Some(e.as_ref()),
            PrecheckError::Read(e) => Some(e),
            PrecheckError::Status(..) | PrecheckError::NotJson | PrecheckError::NoDomain => None,
        }
    }
}

impl From<MissingValue> for PrecheckError {
    fn from(e: MissingValue) -> PrecheckError {
        PrecheckError::Template(e)
    }
}

/// Longest provider message passed on, in characters.
const MAX_MESSAGE_CHARS: usize = 200;

/// A provider's text made safe to show and log: one line, printable, bounded.
pub fn clean_text(s: &str) -> String {
    crate::support::text::one_line(s, MAX_MESSAGE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_its_class_detail_status_code_and_message() {
        let mut e = ProviderError::new(Failure::DeadLink, "step 1");
        assert_eq!(e.to_string(), "class=dead_link step 1");
        e.status = Some(404);
        e.code = Some("file_gone".to_owned());
        e.message = Some("File \"x\" removed".to_owned());
        assert_eq!(
            e.to_string(),
            "class=dead_link step 1 (HTTP 404) code=file_gone message=\"File \\\"x\\\" removed\""
        );
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.source().is_none());
    }

    #[test]
    fn a_precheck_error_says_what_could_not_be_told() {
        use std::error::Error as _;
        let e = PrecheckError::from(MissingValue("base".to_owned()));
        assert_eq!(e.to_string(), "no value for {base}");
        assert_eq!(e.source().unwrap().to_string(), "no value for {base}");
        assert_eq!(
            PrecheckError::Status(Precheck::LinkCheck, 503).to_string(),
            "the link check answered HTTP 503"
        );
        assert_eq!(
            PrecheckError::Status(Precheck::HostList, 404).to_string(),
            "the host list answered HTTP 404"
        );
        let e = PrecheckError::Call(Precheck::HostList, Box::new(ureq::Error::ConnectionFailed));
        assert_eq!(
            e.to_string(),
            format!(
                "the host list could not be fetched: {}",
                ureq::Error::ConnectionFailed
            )
        );
        assert!(e.source().is_some());
        let cut = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        assert_eq!(
            PrecheckError::Read(cut).to_string(),
            format!(
                "reading the host list failed: {}",
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof)
            )
        );
        assert_eq!(
            PrecheckError::NotJson.to_string(),
            "the host list is not JSON"
        );
        assert_eq!(
            PrecheckError::NoDomain.to_string(),
            "the host list holds no domain"
        );
        assert!(PrecheckError::NoDomain.source().is_none());
    }
}

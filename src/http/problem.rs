//! A refusal or failure to answer: its status, its kind (a stable code for programs), a
//! sentence for people, and a separate line for the owner's log.

/// What went wrong, as programs read it: each kind is answered with its stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    MethodNotAllowed,
    LengthRequired,
    BadLength,
    BodyTooLarge,
    UnsupportedMediaType,
    MissingLink,
    RepeatedLink,
    /// More links in one request than `request.max_links`.
    TooManyLinks,
    BadEncoding,
    BadLink,
    ShortBody,
    OriginNotAllowed,
    MissingApiKey,
    InvalidApiKey,
    UnknownApiKey,
    UnknownClient,
    /// The client is on a block list.
    Blocked,
    /// No provider is configured, or the configuration cannot be read.
    NotConfigured,
    /// One of the visitor's rules refused it.
    RateLimited,
    /// The site's own budget of paid calls refused it.
    SpendLimit,
    StoreUnavailable,
    LinkRefused,
    UnsupportedHost,
    DeadLink,
    /// The file is larger than the site serves (`max_file_bytes`).
    TooLarge,
    PasswordRequired,
    HostUnavailable,
    ProviderBusy,
    ProviderTimeout,
    ProviderUnavailable,
    /// The visitor is asked to solve the challenge first (or solved it wrong).
    ChallengeRequired,
    /// The challenge could not be checked (siteverify down) and the policy refuses.
    ChallengeUnavailable,
}

impl Kind {
    /// The stable machine-readable code (`code` in JSON answers, the journal's `bad:` events).
    pub fn code(self) -> &'static str {
        match self {
            Kind::MethodNotAllowed => "method_not_allowed",
            Kind::LengthRequired => "length_required",
            Kind::BadLength => "bad_length",
            Kind::BodyTooLarge => "body_too_large",
            Kind::UnsupportedMediaType => "unsupported_media_type",
            Kind::MissingLink => "missing_link",
            Kind::RepeatedLink => "repeated_link",
            Kind::TooManyLinks => "too_many_links",
            Kind::BadEncoding => "bad_encoding",
            Kind::BadLink => "bad_link",
            Kind::ShortBody => "short_body",
            Kind::OriginNotAllowed => "origin_not_allowed",
            Kind::MissingApiKey => "missing_api_key",
            Kind::InvalidApiKey => "invalid_api_key",
            Kind::UnknownApiKey => "unknown_api_key",
            Kind::UnknownClient => "unknown_client",
            Kind::Blocked => "blocked",
            Kind::NotConfigured => "not_configured",
            Kind::RateLimited => "rate_limited",
            Kind::SpendLimit => "spend_limit",
            Kind::StoreUnavailable => "store_unavailable",
            Kind::LinkRefused => "link_refused",
            Kind::UnsupportedHost => "unsupported_host",
            Kind::DeadLink => "dead_link",
            Kind::TooLarge => "too_large",
            Kind::PasswordRequired => "password_required",
            Kind::HostUnavailable => "host_unavailable",
            Kind::ProviderBusy => "provider_busy",
            Kind::ProviderTimeout => "provider_timeout",
            Kind::ProviderUnavailable => "provider_unavailable",
            Kind::ChallengeRequired => "challenge_required",
            Kind::ChallengeUnavailable => "challenge_unavailable",
        }
    }
}

/// The start of every log line that asks the owner to act: such a line is kept in the
/// journal too, as a note.
pub const ACTION_NEEDED: &str = "ACTION NEEDED";

/// What the owner's log line is: a line to read, or one asking the owner to act, which the
/// journal keeps as a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogKind {
    #[default]
    Plain,
    ActionNeeded,
}

use std::fmt;

/// Everything an error answer needs. `detail` is shown to the client; `log` only to the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub status: u16,
    /// What went wrong; its code (e.g. `bad_link`) is what programs read.
    pub kind: Kind,
    /// One sentence for the visitor.
    pub detail: String,
    /// Seconds to wait before trying again, sent as `Retry-After`.
    pub retry_after: Option<u32>,
    /// The rule that refused, for 429.
    pub rule: Option<Box<str>>,
    /// What the owner's log says, when it should say more than `detail` (None: log `detail`).
    pub log: Option<Box<str>>,
    /// `WWW-Authenticate` for a 401.
    pub challenge: Option<Box<str>>,
    /// Whether the log line asks the owner to act (see [`Problem::action_needed`]).
    pub log_kind: LogKind,
    /// The challenge the visitor may solve to go on: the page shows its widget.
    pub offer: Option<Box<Offer>>,
}

/// The form field that carries the widget's token (Turnstile's own name), in the POST body or
/// the query string.
pub const TOKEN_FIELD: &str = "cf-turnstile-response";

/// What the page needs to show the challenge's widget: all of it public.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub site_key: String,
    /// The widget's script.
    pub script_url: String,
    /// The action to render the widget with, when the site checks one.
    pub action: Option<String>,
}

impl Offer {
    /// The origin of the widget's script (`https://challenges.cloudflare.com`): what a
    /// Content-Security-Policy lets load scripts and frames.
    pub fn origin(&self) -> Option<String> {
        let url = crate::net::url::parse(&self.script_url, &["https", "http"]).ok()?;
        Some(url.origin())
    }
}

impl Problem {
    pub fn new(status: u16, kind: Kind, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            kind,
            detail: detail.into(),
            retry_after: None,
            rule: None,
            log: None,
            challenge: None,
            log_kind: LogKind::Plain,
            offer: None,
        }
    }

    /// The stable machine-readable code, e.g. `bad_link`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The challenge the visitor may solve to go on.
    pub fn offer(mut self, offer: Offer) -> Problem {
        self.offer = Some(Box::new(offer));
        self
    }

    pub fn retry_after(mut self, secs: u32) -> Problem {
        self.retry_after = Some(secs.max(1));
        self
    }

    pub fn log(mut self, line: impl Into<String>) -> Problem {
        self.log = Some(line.into().into_boxed_str());
        self.log_kind = LogKind::Plain;
        self
    }

    /// Logs `line` as asking the owner to act: written after `ACTION NEEDED: `, and kept in
    /// the journal as a note.
    pub fn action_needed(mut self, line: impl std::fmt::Display) -> Problem {
        self.log = Some(format!("{ACTION_NEEDED}: {line}").into_boxed_str());
        self.log_kind = LogKind::ActionNeeded;
        self
    }

    /// The problem type URI of the JSON body.
    pub fn type_uri(&self) -> &'static str {
        if self.status == 429 {
            "https://iana.org/assignments/http-problem-types#quota-exceeded"
        } else {
            "about:blank"
        }
    }
}

/// What the owner's log says of it: the status, the code and the log line (or the sentence).
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let said = self.log.as_deref().unwrap_or(&self.detail);
        write!(f, "{} {}: {said}", self.status, self.code())
    }
}

impl std::error::Error for Problem {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_with_its_status_code_and_the_owners_line() {
        let p = Problem::new(400, Kind::BadLink, "That is not a link.");
        assert_eq!(p.to_string(), "400 bad_link: That is not a link.");
        let p = p.log("bad link \"x\"");
        assert_eq!(p.to_string(), "400 bad_link: bad link \"x\"");
        let boxed: Box<dyn std::error::Error> = Box::new(p);
        assert!(boxed.source().is_none());
    }

    /// Every kind.
    const ALL: [Kind; 31] = [
        Kind::MethodNotAllowed,
        Kind::LengthRequired,
        Kind::BadLength,
        Kind::BodyTooLarge,
        Kind::UnsupportedMediaType,
        Kind::MissingLink,
        Kind::RepeatedLink,
        Kind::TooManyLinks,
        Kind::BadEncoding,
        Kind::BadLink,
        Kind::ShortBody,
        Kind::OriginNotAllowed,
        Kind::MissingApiKey,
        Kind::InvalidApiKey,
        Kind::UnknownApiKey,
        Kind::UnknownClient,
        Kind::Blocked,
        Kind::NotConfigured,
        Kind::RateLimited,
        Kind::SpendLimit,
        Kind::StoreUnavailable,
        Kind::LinkRefused,
        Kind::UnsupportedHost,
        Kind::DeadLink,
        Kind::PasswordRequired,
        Kind::HostUnavailable,
        Kind::ProviderBusy,
        Kind::ProviderTimeout,
        Kind::ProviderUnavailable,
        Kind::ChallengeRequired,
        Kind::ChallengeUnavailable,
    ];

    #[test]
    fn every_kind_has_its_own_code_in_snake_case() {
        let codes: std::collections::BTreeSet<&str> = ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ALL.len());
        for code in codes {
            assert!(
                code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{code}"
            );
        }
        assert_eq!(Kind::SpendLimit.code(), "spend_limit");
        assert_eq!(Kind::Blocked.code(), "blocked");
    }

    #[test]
    fn a_line_asking_the_owner_to_act_says_so_and_is_marked() {
        let p = Problem::new(502, Kind::ProviderUnavailable, "x").action_needed("renew the plan");
        assert_eq!(p.log.as_deref(), Some("ACTION NEEDED: renew the plan"));
        assert_eq!(p.log_kind, LogKind::ActionNeeded);
        let plain = Problem::new(502, Kind::ProviderUnavailable, "x").log("ACTION NEEDED: no");
        assert_eq!(plain.log_kind, LogKind::Plain);
    }
}

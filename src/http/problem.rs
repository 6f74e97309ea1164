//! A refusal or failure to answer: its status, a stable code for programs, a sentence for
//! people, and a separate line for the owner's log.

use std::fmt;

/// Everything an error answer needs. `detail` is shown to the client; `log` only to the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub status: u16,
    /// Stable machine-readable code, e.g. `bad_link`.
    pub code: &'static str,
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
}

impl Problem {
    pub fn new(status: u16, code: &'static str, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            code,
            detail: detail.into(),
            retry_after: None,
            rule: None,
            log: None,
            challenge: None,
        }
    }

    pub fn retry_after(mut self, secs: u32) -> Problem {
        self.retry_after = Some(secs.max(1));
        self
    }

    pub fn log(mut self, line: impl Into<String>) -> Problem {
        self.log = Some(line.into().into_boxed_str());
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
        write!(f, "{} {}: {said}", self.status, self.code)
    }
}

impl std::error::Error for Problem {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_with_its_status_code_and_the_owners_line() {
        let p = Problem::new(400, "bad_link", "That is not a link.");
        assert_eq!(p.to_string(), "400 bad_link: That is not a link.");
        let p = p.log("bad link \"x\"");
        assert_eq!(p.to_string(), "400 bad_link: bad link \"x\"");
        let boxed: Box<dyn std::error::Error> = Box::new(p);
        assert!(boxed.source().is_none());
    }
}

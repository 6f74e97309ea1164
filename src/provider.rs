//! The paid link resolver, described as data: where to send the link and the token, and where
//! the answer keeps the download URL or the error. Interpreting an answer is pure; the HTTP call
//! is in `http_provider`.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::render::Resolved;
use crate::secret::Secret;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
}

/// Where a value goes in the provider request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A request header, its value prefixed (e.g. `Authorization: Bearer TOKEN`).
    Header { name: String, prefix: String },
    /// A query-string parameter.
    Query(String),
    /// A field of the form body (POST only).
    Form(String),
}

/// What the answer must hold, beyond a 2xx status, to count as success.
#[derive(Debug, Clone, PartialEq)]
pub struct SuccessTest {
    pub pointer: String,
    pub equals: Value,
}

/// A JSON HTTP API described as data.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSpec {
    pub method: HttpMethod,
    pub url: String,
    pub token: Option<Secret>,
    /// Where the token goes; None when the API takes no token.
    pub auth: Option<Place>,
    /// Where the link goes (never a header).
    pub link: Place,
    /// JSON Pointer to the download URL.
    pub download: String,
    pub filename: Option<String>,
    pub success: Option<SuccessTest>,
    pub error_message: Option<String>,
    pub error_code: Option<String>,
    pub connect_timeout: Duration,
    pub timeout: Duration,
}

/// Which provider the site uses.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderSpec {
    Echo,
    Http(Box<HttpSpec>),
}

/// How a provider call failed, as far as the visitor and the owner need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The provider refused the site's credentials or configuration (401/403).
    Auth,
    /// The provider refused this link (bad, dead or unsupported).
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

/// A failed provider call. `message` is the provider's words for the visitor (cleaned);
/// `detail` is for the owner's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    pub failure: Failure,
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
        write!(f, "{:?}: {}", self.failure, self.detail)?;
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
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_MESSAGE_CHARS)
        .collect::<String>()
        .trim()
        .to_owned()
}

fn text_at(v: &Value, pointer: Option<&str>) -> Option<String> {
    let found = v.pointer(pointer?)?;
    let text = match found {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    let cleaned = clean_text(&text);
    (!cleaned.is_empty()).then_some(cleaned)
}

/// True for an absolute http(s) URL: the only kind of download link passed on.
fn is_web_url(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && s.len() <= 8192
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

impl HttpSpec {
    /// Reads an answer: status, the Retry-After it carried, and the body.
    pub fn interpret(
        &self,
        status: u16,
        retry_after: Option<u32>,
        body: &[u8],
    ) -> Result<Resolved, ProviderError> {
        let json: Option<Value> = serde_json::from_slice(body).ok();
        let error = |failure: Failure, detail: &str| {
            let v = json.as_ref();
            ProviderError {
                failure,
                status: Some(status),
                code: v.and_then(|v| text_at(v, self.error_code.as_deref())),
                message: v.and_then(|v| text_at(v, self.error_message.as_deref())),
                retry_after,
                detail: detail.to_owned(),
            }
        };
        match status {
            200..=299 => {}
            401 | 403 => {
                return Err(error(
                    Failure::Auth,
                    "the provider refused the site's credentials",
                ));
            }
            429 => {
                return Err(error(
                    Failure::RateLimited,
                    "the provider asks the site to slow down",
                ));
            }
            300..=399 => {
                return Err(error(
                    Failure::BadAnswer,
                    "the provider answered with a redirect",
                ));
            }
            400..=499 => return Err(error(Failure::Rejected, "the provider refused the link")),
            _ => {
                return Err(error(
                    Failure::Unavailable,
                    "the provider had a server error",
                ));
            }
        }
        let Some(v) = json.as_ref() else {
            return Err(error(
                Failure::BadAnswer,
                "the provider's answer is not JSON",
            ));
        };
        if let Some(test) = &self.success
            && v.pointer(&test.pointer) != Some(&test.equals)
        {
            return Err(error(Failure::Rejected, "the provider reported an error"));
        }
        let download = match v.pointer(&self.download) {
            Some(Value::String(s)) if is_web_url(s) => s.clone(),
            Some(_) => {
                return Err(error(
                    Failure::BadAnswer,
                    &format!("the value at {} is not an http(s) URL", self.download),
                ));
            }
            None => {
                return Err(error(
                    Failure::Rejected,
                    &format!(
                        "the answer has no {} (and no error the description knows)",
                        self.download
                    ),
                ));
            }
        };
        Ok(Resolved {
            download,
            filename: text_at(v, self.filename.as_deref()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn realdebrid_like() -> HttpSpec {
        HttpSpec {
            method: HttpMethod::Post,
            url: "https://api.example/unrestrict".into(),
            token: Some(Secret::new("tok")),
            auth: Some(Place::Header {
                name: "Authorization".into(),
                prefix: "Bearer ".into(),
            }),
            link: Place::Form("link".into()),
            download: "/download".into(),
            filename: Some("/filename".into()),
            success: None,
            error_message: Some("/error".into()),
            error_code: Some("/error_code".into()),
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
        }
    }

    fn alldebrid_like() -> HttpSpec {
        HttpSpec {
            download: "/data/link".into(),
            filename: Some("/data/filename".into()),
            success: Some(SuccessTest {
                pointer: "/status".into(),
                equals: json!("success"),
            }),
            error_message: Some("/error/message".into()),
            error_code: Some("/error/code".into()),
            ..realdebrid_like()
        }
    }

    fn body(v: Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    #[test]
    fn success_reads_url_and_filename() {
        let r = realdebrid_like()
            .interpret(
                200,
                None,
                &body(json!({"download": "https://dl.example/f", "filename": "f.zip"})),
            )
            .unwrap();
        assert_eq!(r.download, "https://dl.example/f");
        assert_eq!(r.filename.as_deref(), Some("f.zip"));
        let r = alldebrid_like()
            .interpret(
                200,
                None,
                &body(json!({"status": "success", "data": {"link": "https://dl.example/g"}})),
            )
            .unwrap();
        assert_eq!(
            (r.download.as_str(), r.filename),
            ("https://dl.example/g", None)
        );
    }

    #[test]
    fn errors_inside_http_200_are_errors() {
        let e = alldebrid_like()
            .interpret(
                200,
                None,
                &body(json!({"status": "error", "error": {"code": "LINK_DOWN", "message": "Link is dead"}})),
            )
            .unwrap_err();
        assert_eq!(e.failure, Failure::Rejected);
        assert_eq!(e.code.as_deref(), Some("LINK_DOWN"));
        assert_eq!(e.message.as_deref(), Some("Link is dead"));
    }

    #[test]
    fn http_statuses_map_to_failures() {
        let spec = realdebrid_like();
        let err = |status, b: &[u8]| spec.interpret(status, Some(7), b).unwrap_err();
        let e = err(401, &body(json!({"error": "bad_token", "error_code": 8})));
        assert_eq!((e.failure, e.code.as_deref()), (Failure::Auth, Some("8")));
        assert_eq!(err(403, b"").failure, Failure::Auth);
        let e = err(429, b"");
        assert_eq!((e.failure, e.retry_after), (Failure::RateLimited, Some(7)));
        assert_eq!(err(400, b"{}").failure, Failure::Rejected);
        assert_eq!(err(503, b"<html>").failure, Failure::Unavailable);
        assert_eq!(err(302, b"").failure, Failure::BadAnswer);
    }

    #[test]
    fn odd_answers_are_bad_answers() {
        let spec = realdebrid_like();
        for b in [&b"not json"[..], b"", b"\xff\xfe"] {
            assert_eq!(
                spec.interpret(200, None, b).unwrap_err().failure,
                Failure::BadAnswer
            );
        }
        for url in [
            json!("javascript:alert(1)"),
            json!("/relative"),
            json!(5),
            json!("https://a b"),
        ] {
            let e = spec
                .interpret(200, None, &body(json!({"download": url})))
                .unwrap_err();
            assert_eq!(e.failure, Failure::BadAnswer, "{url}");
        }
        assert_eq!(
            spec.interpret(200, None, &body(json!({"other": 1})))
                .unwrap_err()
                .failure,
            Failure::Rejected
        );
    }

    #[test]
    fn provider_text_is_cleaned() {
        let e = realdebrid_like()
            .interpret(
                400,
                None,
                &body(json!({"error": format!("bad\r\nlink{}", "x".repeat(500))})),
            )
            .unwrap_err();
        let m = e.message.unwrap();
        assert!(!m.contains('\n') && !m.contains('\r'));
        assert_eq!(m.chars().count(), 200);
    }
}

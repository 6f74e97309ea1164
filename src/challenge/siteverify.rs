//! The token checked with the service's siteverify: one POST of `secret`, `response` and
//! `remoteip` as a form (Turnstile's; hCaptcha's and reCAPTCHA's take the same fields), its
//! JSON answer judged: `success`, then `hostname` and `action` as this site expects them.

use std::io::Read;
use std::time::Duration;

use crate::challenge::{Checked, Settings, Verify, VerifyError};
use crate::net::lookup;

/// The largest siteverify answer read: a few hundred bytes are expected.
const MAX_ANSWER_BYTES: u64 = 16 * 1024;

/// The codes that say the site's own secret is wrong or missing: the owner must act, and no
/// visitor can solve anything until then.
const SECRET_CODES: [&str; 2] = ["missing-input-secret", "invalid-input-secret"];
/// The codes of a failure on the service's side: no verdict on the token.
const SERVICE_CODES: [&str; 2] = ["internal-error", "bad-request"];

/// siteverify over HTTPS (plain http only on this machine, as the configuration allows).
#[derive(Default)]
pub struct Siteverify;

impl Verify for Siteverify {
    fn verify(
        &self,
        settings: &Settings,
        token: &str,
        remote_ip: &str,
        hostname: &str,
    ) -> Result<Checked, VerifyError> {
        let timeout = Duration::from_millis(settings.timeout_ms);
        let agent = lookup::agent(
            ureq::Agent::config_builder()
                .timeout_global(Some(timeout))
                .http_status_as_error(false)
                .max_redirects(0)
                // Never from the environment: under CGI a client could set HTTP_PROXY (httpoxy).
                .proxy(None)
                .user_agent(concat!("resolve/", env!("CARGO_PKG_VERSION")))
                .build(),
        );
        let sent = agent.post(&settings.verify_url).send_form([
            ("secret", settings.secret.expose()),
            ("response", token),
            ("remoteip", remote_ip),
        ]);
        // ureq's message names the address, never the form: no secret in it.
        let mut response =
            sent.map_err(|e| VerifyError(format!("siteverify could not be reached: {e}")))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(MAX_ANSWER_BYTES)
            .read_to_end(&mut body)
            .map_err(|e| VerifyError(format!("siteverify's answer broke off: {e}")))?;
        if status != 200 {
            return Err(VerifyError(format!("siteverify answered HTTP {status}")));
        }
        judge(settings, &body, hostname)
    }
}

/// What a siteverify answer says of the token, for a page served from `hostname`. Pure.
pub fn judge(settings: &Settings, body: &[u8], hostname: &str) -> Result<Checked, VerifyError> {
    let answer: serde_json::Value = serde_json::from_slice(body)
        .map_err(|_| VerifyError("siteverify's answer is not JSON".into()))?;
    let Some(success) = answer.get("success").and_then(serde_json::Value::as_bool) else {
        return Err(VerifyError(
            "siteverify's answer has no \"success\": is challenge.verify_url a siteverify address?"
                .into(),
        ));
    };
    let codes: Vec<&str> = answer
        .get("error-codes")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    if let Some(code) = codes.iter().find(|c| SECRET_CODES.contains(c)) {
        return Err(VerifyError(format!(
            "siteverify refused the site's secret ({code}): set challenge.secret to the secret key of the widget whose site key is challenge.site_key"
        )));
    }
    if !success {
        if let Some(code) = codes.iter().find(|c| SERVICE_CODES.contains(c)) {
            return Err(VerifyError(format!("siteverify failed ({code})")));
        }
        let said = if codes.is_empty() {
            "no error code".to_owned()
        } else {
            codes.join(", ")
        };
        return Ok(Checked::Refused(format!("token not accepted ({said})")));
    }
    let answered = |field: &str| answer.get(field).and_then(serde_json::Value::as_str);
    let host = answered("hostname").unwrap_or_default();
    let host_ok = if settings.hostnames.is_empty() {
        host.eq_ignore_ascii_case(hostname)
    } else {
        settings
            .hostnames
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    };
    if !host_ok {
        return Ok(Checked::Refused(format!(
            "token solved on another host ({:?})",
            crate::support::text::one_line(host, 80)
        )));
    }
    if let Some(action) = &settings.action
        && answered("action") != Some(action.as_str())
    {
        return Ok(Checked::Refused(format!(
            "token solved for another action ({:?})",
            crate::support::text::one_line(answered("action").unwrap_or_default(), 80)
        )));
    }
    Ok(Checked::Solved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge::{OnError, When};
    use crate::core::rule::{Algorithm, KeyKind, Rule};
    use crate::support::secret::Secret;

    fn settings() -> Settings {
        Settings {
            site_key: "site".into(),
            secret: Secret::new("s3cret"),
            when: When::Always,
            verify_url: "http://127.0.0.1:1/".into(),
            script_url: "http://127.0.0.1:1/api.js".into(),
            action: Some("resolve".into()),
            hostnames: Vec::new(),
            remember_secs: 3600,
            extra: Rule::new(
                "challenge-extra",
                KeyKind::Ip,
                Algorithm::Fixed,
                3,
                3600,
                "resolve:{rule}:{ip}",
            )
            .unwrap(),
            busy_share: 0.8,
            on_error: OnError::Deny,
            timeout_ms: 1000,
        }
    }

    fn judged(body: &str, host: &str) -> Result<Checked, VerifyError> {
        judge(&settings(), body.as_bytes(), host)
    }

    #[test]
    fn solved_for_this_host_and_action() {
        let ok = r#"{"success":true,"error-codes":[],"hostname":"example.com","action":"resolve"}"#;
        assert_eq!(judged(ok, "example.com"), Ok(Checked::Solved));
        assert_eq!(judged(ok, "EXAMPLE.com"), Ok(Checked::Solved));
        assert!(matches!(
            judged(ok, "other.example"),
            Ok(Checked::Refused(_))
        ));
        let other_action =
            r#"{"success":true,"error-codes":[],"hostname":"example.com","action":"login"}"#;
        assert!(matches!(
            judged(other_action, "example.com"),
            Ok(Checked::Refused(_))
        ));
        let no_action = r#"{"success":true,"hostname":"example.com"}"#;
        assert!(matches!(
            judged(no_action, "example.com"),
            Ok(Checked::Refused(_))
        ));
        let mut unchecked = settings();
        unchecked.action = None;
        unchecked.hostnames = vec!["example.com".into()];
        assert_eq!(
            judge(&unchecked, no_action.as_bytes(), "elsewhere"),
            Ok(Checked::Solved)
        );
    }

    #[test]
    fn a_used_or_bad_token_is_refused_and_a_broken_service_is_an_error() {
        let dup = r#"{"success":false,"error-codes":["timeout-or-duplicate"]}"#;
        assert_eq!(
            judged(dup, "example.com"),
            Ok(Checked::Refused(
                "token not accepted (timeout-or-duplicate)".into()
            ))
        );
        let secret = r#"{"success":false,"error-codes":["invalid-input-secret"]}"#;
        assert!(
            judged(secret, "example.com")
                .unwrap_err()
                .0
                .contains("challenge.secret")
        );
        let internal = r#"{"success":false,"error-codes":["internal-error"]}"#;
        assert!(judged(internal, "example.com").is_err());
        assert!(judged("<html>", "example.com").is_err());
        assert!(judged("{}", "example.com").is_err());
    }
}

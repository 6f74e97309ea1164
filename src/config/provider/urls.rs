//! Where a provider may be called: https anywhere, plain http only to this machine, never with
//! credentials in the URL or a placeholder in the host.

use crate::config::error::{ConfigError, err};

/// Checks the start of a provider URL (or a base URL): https, or plain http to this machine,
/// where it cannot be overheard; no user name or password; no fragment.
pub(crate) fn check_url(field: &str, url: &str) -> Result<(), ConfigError> {
    let parsed = crate::net::url::parse(url, &["https", "http"])
        .map_err(|e| err(field, format!("{url:?} is not an https:// URL: {e}")))?;
    if parsed.has_credentials() {
        return Err(err(
            field,
            "must not hold a user name or password before the host: the token goes in \"token\" (and a header or form field that uses {token})",
        ));
    }
    if parsed.has_fragment() {
        return Err(err(field, format!("{url:?} must not hold a #fragment")));
    }
    if parsed.scheme() == "http" && !(parsed.is_on_this_machine() && written_plainly(url, &parsed))
    {
        return Err(err(
            field,
            "use https:// (plain http would send the token unencrypted; it is accepted only for a provider on this machine: localhost, 127.0.0.1 or [::1])",
        ));
    }
    Ok(())
}

/// A step's URL template: `{base}` (checked as `base_url`) followed by a path or query, or a
/// URL whose scheme and host are written out before any placeholder. A placeholder never
/// reaches the host: `{base}@evil.example` or `http://localhost{x}` could name another one.
pub(crate) fn check_step_url(field: &str, template: &str) -> Result<(), ConfigError> {
    if let Some(rest) = template.strip_prefix("{base}") {
        if rest.is_empty() || rest.starts_with(['/', '?']) {
            return Ok(());
        }
        return Err(err(
            field,
            "after {base} comes the path, starting with '/' (e.g. \"{base}/unrestrict/link\")",
        ));
    }
    let written = template.split('{').next().unwrap_or_default();
    check_url(field, written)?;
    let authority_ends = written
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains(['/', '?']));
    if written.len() < template.len() && !authority_ends {
        return Err(err(
            field,
            "write the host out in full before any {placeholder}, followed by '/' (e.g. \"https://api.example.com/{name}\")",
        ));
    }
    Ok(())
}

/// True when the URL starts with its host as the parser reads it, so that any other program
/// reading the text (the HTTP client among them) finds the same host: `http://127.0.0.1/`,
/// not `http://0x7f.1/` or `http://%6cocalhost/`.
pub(crate) fn written_plainly(text: &str, parsed: &crate::net::url::Url) -> bool {
    let origin = parsed.origin();
    text.get(..origin.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(&origin))
        && matches!(
            text.as_bytes().get(origin.len()),
            None | Some(b'/' | b'?' | b':')
        )
}

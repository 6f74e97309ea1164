//! Where a provider may be called: https anywhere, plain http only to this machine, never with
//! credentials in the URL or a placeholder in the host.

use crate::config::error::{ConfigError, err};

/// Checks the start of a provider URL (or a base URL): https, or plain http to this machine,
/// where it cannot be overheard; no user name or password; no fragment.
pub(crate) fn check_url(field: &str, url: &str) -> Result<(), ConfigError> {
    if written_acceptably(url) {
        return Ok(());
    }
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

/// A URL the checks of [`check_url`] accept, told without the URL parser: https to a host of
/// plain labels, or http to `127.0.0.1`, `localhost` or `[::1]`, either with a port or none, and
/// no fragment. A `base_url` is checked at every start, and the parser (with its IDNA tables)
/// would be most of reading the provider section; anything else goes to the parser (a test
/// compares the two).
fn written_acceptably(url: &str) -> bool {
    if url.contains('#') {
        return false;
    }
    if url.starts_with("https://") {
        return crate::http::origin::plain_origin(url).is_some();
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') => {
            let plain_port = !port.is_empty()
                && port.len() <= 5
                && !port.starts_with('0')
                && port.parse::<u16>().is_ok();
            if !plain_port {
                return false;
            }
            host
        }
        _ => authority,
    };
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
        && !path.chars().any(|c| c.is_whitespace() || c.is_control())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the parser's checks say, without the shortcut.
    fn parsed_verdict(url: &str) -> bool {
        let Ok(parsed) = crate::net::url::parse(url, &["https", "http"]) else {
            return false;
        };
        !parsed.has_credentials()
            && !parsed.has_fragment()
            && (parsed.scheme() == "https"
                || (parsed.is_on_this_machine() && written_plainly(url, &parsed)))
    }

    #[test]
    fn a_url_accepted_without_the_parser_is_one_the_parser_accepts() {
        let samples = [
            "https://api.real-debrid.com/rest/1.0",
            "https://api.alldebrid.com/v4.1",
            "https://example.com",
            "https://example.com:8443/x?y=1",
            "https://sub.example.co.uk/a b",
            "https://EXAMPLE.com/",
            "https://xn--bcher-kva.example/",
            "https://user:pw@example.com/",
            "https://example.com/#frag",
            "https://example.com:0/",
            "https://example.com:99999/",
            "https://10.0.0.1/",
            "https://0x7f.1/",
            "https://exa mple.com/",
            "http://127.0.0.1:9",
            "http://127.0.0.1:9/api",
            "http://127.0.0.1",
            "http://localhost:8080/rest?x=1",
            "http://[::1]:8080/",
            "http://[::1]/",
            "http://127.0.0.1:/x",
            "http://127.0.0.1:09/x",
            "http://127.0.0.2/",
            "http://example.com/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://localhost.:80/",
            "http://user@127.0.0.1/",
            "http://127.0.0.1/#x",
            "ftp://127.0.0.1/",
        ];
        for url in samples {
            if written_acceptably(url) {
                assert!(
                    parsed_verdict(url),
                    "{url}: accepted without the parser only"
                );
                assert!(check_url("f", url).is_ok(), "{url}");
            }
            assert_eq!(
                check_url("f", url).is_ok(),
                parsed_verdict(url),
                "{url}: the shortcut changed the verdict"
            );
        }
        // The usual cases take the shortcut.
        for url in [
            "https://api.real-debrid.com/rest/1.0",
            "http://127.0.0.1:9",
            "http://localhost:8080/rest?x=1",
            "http://[::1]:8080/",
        ] {
            assert!(written_acceptably(url), "{url}");
        }
    }
}

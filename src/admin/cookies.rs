//! The dashboard's cookies on the wire: reading one from the request's `Cookie` header, and the
//! `Set-Cookie` lines that give or take one back. HttpOnly and SameSite=Strict always. Over
//! https (said by the web server, or by a trusted proxy) they are `Secure` and named with the
//! `__Host-` prefix, which browsers keep only when set by this very host over https with
//! `Path=/` and no `Domain`: no sibling subdomain or plain-http page can set or shadow them.
//! Over plain http (`resolve serve` on a laptop) the prefix cannot be used, and they are kept
//! to the dashboard's path instead. Pure.

use crate::http::identity::ClientPolicy;
use crate::http::request::Env;

/// The prefix of the cookies' names over https.
pub const HOST_PREFIX: &str = "__Host-";

/// Where and how the cookies are set for this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    /// The dashboard's own path (`/cgi-bin/resolve/admin`), when the program's path is known;
    /// without one the browser keeps the cookie for the directory it came from. Over https the
    /// path is `/`, as the `__Host-` prefix requires.
    pub path: Option<&'a str>,
    /// The request came over https: the browser must never send the cookie over plain http.
    pub secure: bool,
}

impl Scope<'_> {
    /// The name cookie `base` has on the wire in this scope.
    pub fn name(&self, base: &str) -> String {
        if self.secure {
            format!("{HOST_PREFIX}{base}")
        } else {
            base.to_owned()
        }
    }

    /// The value of cookie `base` in the request, under its name in this scope.
    pub fn get<'e>(&self, env: &'e Env, base: &str) -> Option<&'e str> {
        get(env, &self.name(base))
    }
}

/// Whether the request came over https: the web server says so (`HTTPS=on`), or the peer is a
/// trusted proxy (or an edge of a trusted network) that says so (`X-Forwarded-Proto: https`,
/// or Cloudflare's `CF-Visitor: {"scheme":"https"}`). From anyone else those headers are
/// ignored.
pub fn is_https(env: &Env, policy: &ClientPolicy) -> bool {
    if env
        .text("HTTPS")
        .is_some_and(|v| v.eq_ignore_ascii_case("on") || v == "1")
    {
        return true;
    }
    let peer = env
        .text("REMOTE_ADDR")
        .and_then(crate::http::identity::parse_address);
    if !peer.is_some_and(|ip| policy.vouches_for(ip)) {
        return false;
    }
    let proto = env
        .header("X-Forwarded-Proto")
        .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"https"));
    let visitor = env.header("CF-Visitor").is_some_and(|v| {
        let compact: Vec<u8> = v
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        compact.eq_ignore_ascii_case(br#"{"scheme":"https"}"#)
    });
    proto || visitor
}

/// The value of cookie `name` in the request, if it sent one (the first, when it sent several).
pub fn get<'a>(env: &'a Env, name: &str) -> Option<&'a str> {
    let header = std::str::from_utf8(env.header("Cookie")?).ok()?;
    header.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == name).then(|| v.trim().trim_matches('"'))
    })
}

/// A cookie value we set: letters, digits and `.`; anything else is never sent back by us.
fn is_cookie_value(value: &str) -> bool {
    value.len() <= 512
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.')
}

/// The `Set-Cookie` value giving `name=value` for `max_age_secs`.
pub fn set(scope: Scope<'_>, name: &str, value: &str, max_age_secs: u64) -> String {
    let value = if is_cookie_value(value) { value } else { "" };
    attributes(
        scope,
        format!("{}={value}; Max-Age={max_age_secs}", scope.name(name)),
    )
}

/// The `Set-Cookie` value that removes cookie `name`.
pub fn clear(scope: Scope<'_>, name: &str) -> String {
    attributes(scope, format!("{}=; Max-Age=0", scope.name(name)))
}

fn attributes(scope: Scope<'_>, mut line: String) -> String {
    if scope.secure {
        line.push_str("; Path=/");
    } else if let Some(path) = scope.path {
        line.push_str("; Path=");
        line.push_str(path);
    }
    line.push_str("; HttpOnly; SameSite=Strict");
    if scope.secure {
        line.push_str("; Secure");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_named_cookie() {
        let env = Env::new().with(
            "HTTP_COOKIE",
            "other=1; resolve_admin=s1.5.ab.cd ; resolve_admin_form=\"9.ff\"; resolve_admin=second",
        );
        assert_eq!(get(&env, "resolve_admin"), Some("s1.5.ab.cd"));
        assert_eq!(get(&env, "resolve_admin_form"), Some("9.ff"));
        assert_eq!(get(&env, "missing"), None);
        assert_eq!(get(&Env::new(), "resolve_admin"), None);
    }

    #[test]
    fn cookies_are_strict_private_and_secure_over_https() {
        let plain = Scope {
            path: Some("/cgi-bin/resolve/admin"),
            secure: false,
        };
        assert_eq!(
            set(plain, "resolve_admin", "s1.5.ab", 43200),
            "resolve_admin=s1.5.ab; Max-Age=43200; Path=/cgi-bin/resolve/admin; HttpOnly; SameSite=Strict"
        );
        let https = Scope {
            path: Some("/cgi-bin/resolve/admin"),
            secure: true,
        };
        assert_eq!(
            clear(https, "resolve_admin"),
            "__Host-resolve_admin=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict; Secure"
        );
        assert_eq!(
            set(https, "a", "b;c", 1),
            "__Host-a=; Max-Age=1; Path=/; HttpOnly; SameSite=Strict; Secure"
        );
        let env = Env::new().with(
            "HTTP_COOKIE",
            "resolve_admin=plain; __Host-resolve_admin=kept",
        );
        assert_eq!(https.get(&env, "resolve_admin"), Some("kept"));
        assert_eq!(plain.get(&env, "resolve_admin"), Some("plain"));
    }

    #[test]
    fn https_is_what_the_server_or_a_trusted_proxy_says() {
        let none = ClientPolicy::new(64, vec![], vec![]);
        let proxy = ClientPolicy::new(
            64,
            vec![crate::net::cidr::Cidr::parse("10.0.0.0/8").unwrap()],
            vec![],
        );
        assert!(is_https(&Env::new().with("HTTPS", "on"), &none));
        assert!(is_https(&Env::new().with("HTTPS", "ON"), &none));
        assert!(!is_https(&Env::new().with("HTTPS", "off"), &none));
        assert!(!is_https(&Env::new(), &none));
        let from = |peer: &str, name: &str, value: &str| {
            Env::new().with("REMOTE_ADDR", peer).with(name, value)
        };
        for (name, value) in [
            ("HTTP_X_FORWARDED_PROTO", "https"),
            ("HTTP_X_FORWARDED_PROTO", " HTTPS "),
            ("HTTP_CF_VISITOR", r#"{"scheme": "https"}"#),
        ] {
            assert!(is_https(&from("10.1.2.3", name, value), &proxy), "{value}");
            assert!(
                !is_https(&from("192.0.2.1", name, value), &proxy),
                "untrusted peer"
            );
            assert!(
                !is_https(&from("10.1.2.3", name, value), &none),
                "no proxy trusted"
            );
        }
        assert!(!is_https(
            &from("10.1.2.3", "HTTP_X_FORWARDED_PROTO", "http"),
            &proxy
        ));
        assert!(!is_https(
            &from("10.1.2.3", "HTTP_CF_VISITOR", r#"{"scheme":"http"}"#),
            &proxy
        ));
    }
}

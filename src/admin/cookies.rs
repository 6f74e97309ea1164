//! The dashboard's cookies on the wire: reading one from the request's `Cookie` header, and the
//! `Set-Cookie` lines that give or take one back. HttpOnly, SameSite=Strict, limited to the
//! dashboard's path, and Secure when the request came over https. Pure.

use crate::http::request::Env;

/// Where and how the cookies are set for this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    /// The dashboard's own path (`/cgi-bin/resolve/admin`), when the program's path is known;
    /// without one the browser keeps the cookie for the directory it came from.
    pub path: Option<&'a str>,
    /// The request came over https (`HTTPS=on`): the browser must never send the cookie over
    /// plain http.
    pub secure: bool,
}

/// Whether the web server says the request came over https.
pub fn is_https(env: &Env) -> bool {
    env.text("HTTPS")
        .is_some_and(|v| v.eq_ignore_ascii_case("on") || v == "1")
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
    attributes(scope, format!("{name}={value}; Max-Age={max_age_secs}"))
}

/// The `Set-Cookie` value that removes cookie `name`.
pub fn clear(scope: Scope<'_>, name: &str) -> String {
    attributes(scope, format!("{name}=; Max-Age=0"))
}

fn attributes(scope: Scope<'_>, mut line: String) -> String {
    if let Some(path) = scope.path {
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
            path: None,
            secure: true,
        };
        assert_eq!(
            clear(https, "resolve_admin"),
            "resolve_admin=; Max-Age=0; HttpOnly; SameSite=Strict; Secure"
        );
        assert_eq!(
            set(https, "a", "b;c", 1),
            "a=; Max-Age=1; HttpOnly; SameSite=Strict; Secure"
        );
        assert!(is_https(&Env::new().with("HTTPS", "on")));
        assert!(is_https(&Env::new().with("HTTPS", "ON")));
        assert!(!is_https(&Env::new().with("HTTPS", "off")));
        assert!(!is_https(&Env::new()));
    }
}

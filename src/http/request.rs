//! Reading a CGI request: the method, the body's announced size and type, and the link, from
//! the meta-variables the web server set (RFC 3875 section 4). Pure: the adapter reads the body.

use crate::http::link;
use crate::http::problem::{Kind, Problem};
use crate::net::form;

/// The CGI meta-variables of one request, as raw bytes (they need not be UTF-8).
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: Vec<(String, Vec<u8>)>,
}

impl Env {
    pub fn new() -> Env {
        Env::default()
    }

    /// An empty set with room for `n` variables set without growing (a CGI process's
    /// environment, whose size is known).
    pub fn with_capacity(n: usize) -> Env {
        Env {
            vars: Vec::with_capacity(n),
        }
    }

    /// Sets `name`; a later value hides an earlier one (kept, not searched for: setting many
    /// variables stays linear, as a FastCGI request with thousands of params needs).
    pub fn set(&mut self, name: &str, value: impl Into<Vec<u8>>) {
        self.set_owned(name.to_owned(), value.into());
    }

    /// [`Self::set`] of a name already owned, kept as it is rather than copied (the dozen
    /// variables of a CGI request, read from the process's environment).
    pub fn set_owned(&mut self, name: String, value: Vec<u8>) {
        self.vars.push((name, value));
    }

    /// A request with only its method set, for a test to add to.
    #[cfg(test)]
    pub fn method(method: &str) -> Env {
        Env::new().with("REQUEST_METHOD", method)
    }

    pub fn with(mut self, name: &str, value: impl Into<Vec<u8>>) -> Env {
        self.set(name, value);
        self
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.vars
            .iter()
            .rfind(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// Every variable as it was set, in order (a name set twice, twice).
    pub fn vars(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.vars.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// A variable as text, or None when absent or not UTF-8.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The variable that carries request header `name` (`X-Forwarded-For` → `HTTP_X_FORWARDED_FOR`).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        let carries = |var: &str| {
            var.strip_prefix("HTTP_").is_some_and(|rest| {
                rest.len() == name.len()
                    && rest.bytes().zip(name.bytes()).all(|(v, h)| {
                        v == if h == b'-' {
                            b'_'
                        } else {
                            h.to_ascii_uppercase()
                        }
                    })
            })
        };
        self.vars
            .iter()
            .rfind(|(n, _)| carries(n))
            .map(|(_, v)| v.as_slice())
    }
}

/// The methods the endpoint answers, as sent in `Allow`.
pub const ALLOWED_METHODS: &str = "GET, HEAD, POST";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
}

/// What is known before the body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub method: Method,
    /// Bytes of body to read from standard input: exactly CONTENT_LENGTH for POST, else 0.
    pub body_len: u64,
}

/// The method (`REQUEST_METHOD`), when it is one the endpoint answers.
pub fn method(env: &Env) -> Option<Method> {
    match env.get("REQUEST_METHOD") {
        Some(b"GET") => Some(Method::Get),
        Some(b"HEAD") => Some(Method::Head),
        Some(b"POST") => Some(Method::Post),
        _ => None,
    }
}

/// Checks the method and, for POST, the body's length and type. `max_body` is the cap.
pub fn parse_head(env: &Env, max_body: u64) -> Result<Head, Problem> {
    parse_head_for(method(env), env, max_body)
}

/// [`parse_head`] of a request whose method was read already ([`method`]).
pub fn parse_head_for(method: Option<Method>, env: &Env, max_body: u64) -> Result<Head, Problem> {
    let Some(method) = method else {
        return Err(Problem::new(
            405,
            Kind::MethodNotAllowed,
            "Use GET, HEAD or POST.",
        ));
    };
    if method != Method::Post {
        return Ok(Head {
            method,
            body_len: 0,
        });
    }
    let body_len = match env.get("CONTENT_LENGTH") {
        None => {
            return Err(Problem::new(
                411,
                Kind::LengthRequired,
                "Send the form with a Content-Length.",
            ));
        }
        Some(raw) => parse_length(raw).ok_or_else(|| {
            Problem::new(400, Kind::BadLength, "The Content-Length is not a number.")
        })?,
    };
    if body_len > max_body {
        return Err(Problem::new(
            413,
            Kind::BodyTooLarge,
            format!("The form is too large (at most {max_body} bytes)."),
        ));
    }
    let form_type = env.get("CONTENT_TYPE").is_some_and(|ct| {
        let media = ct.split(|&b| b == b';').next().unwrap_or_default();
        media
            .trim_ascii()
            .eq_ignore_ascii_case(b"application/x-www-form-urlencoded")
    });
    if !form_type {
        return Err(Problem::new(
            415,
            Kind::UnsupportedMediaType,
            "Send the link as a form (application/x-www-form-urlencoded).",
        ));
    }
    Ok(Head { method, body_len })
}

/// A decimal Content-Length; one too large to represent is as good as `u64::MAX` (too large).
fn parse_length(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = std::str::from_utf8(raw).ok()?;
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// The link: from the query string for GET and HEAD, from the body for POST.
pub fn parse_link(head: &Head, env: &Env, body: &[u8]) -> Result<String, Problem> {
    let source = match head.method {
        Method::Post => body,
        Method::Get | Method::Head => env.get("QUERY_STRING").unwrap_or_default(),
    };
    let values = form::raw_values(source, "link");
    let raw = match values.as_slice() {
        [] => return Err(Problem::new(400, Kind::MissingLink, "Paste a link first.")),
        [one] => *one,
        _ => {
            return Err(Problem::new(
                400,
                Kind::RepeatedLink,
                "Send one link at a time.",
            ));
        }
    };
    let decoded = form::decode(raw).map_err(|_| {
        Problem::new(
            400,
            Kind::BadEncoding,
            "The link is not properly encoded (a % must be followed by two hex digits).",
        )
    })?;
    link::validate(&decoded)
        .map(str::to_owned)
        .map_err(|e| Problem::new(400, Kind::BadLink, e.to_string()))
}

/// A header name as configured: 1 to 64 letters, digits and `-` (no `_`, which CGI cannot tell
/// from `-`: both arrive as `HTTP_..._...`).
pub fn is_header_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(len: &str, ty: &str) -> Env {
        Env::method("POST")
            .with("CONTENT_LENGTH", len)
            .with("CONTENT_TYPE", ty)
    }

    const FORM: &str = "application/x-www-form-urlencoded";

    #[test]
    fn methods() {
        for (m, want) in [("GET", Method::Get), ("HEAD", Method::Head)] {
            let env = Env::method(m);
            assert_eq!(parse_head(&env, 8192).unwrap().method, want);
        }
        for m in ["PUT", "DELETE", "OPTIONS", "get", "", "G\r\nET"] {
            let env = Env::method(m);
            assert_eq!(parse_head(&env, 8192).unwrap_err().status, 405, "{m:?}");
        }
        assert_eq!(parse_head(&Env::new(), 8192).unwrap_err().status, 405);
    }

    #[test]
    fn post_bodies() {
        assert_eq!(parse_head(&post("10", FORM), 8192).unwrap().body_len, 10);
        assert_eq!(
            parse_head(
                &post("0", "Application/X-WWW-Form-Urlencoded; charset=UTF-8"),
                8192
            )
            .unwrap()
            .body_len,
            0
        );
        assert_eq!(
            parse_head(&post("8192", FORM), 8192).unwrap().body_len,
            8192
        );
        assert_eq!(
            parse_head(&post("8193", FORM), 8192).unwrap_err().status,
            413
        );
        assert_eq!(
            parse_head(&post("99999999999999999999999", FORM), 8192)
                .unwrap_err()
                .status,
            413
        );
        for bad in ["", "-1", "1e3", " 5", "0x10", "5 "] {
            assert_eq!(
                parse_head(&post(bad, FORM), 8192).unwrap_err().status,
                400,
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_head(&post("5", "multipart/form-data; boundary=x"), 8192)
                .unwrap_err()
                .status,
            415
        );
        let no_type = Env::method("POST").with("CONTENT_LENGTH", "5");
        assert_eq!(parse_head(&no_type, 8192).unwrap_err().status, 415);
        let no_length = Env::method("POST").with("CONTENT_TYPE", FORM);
        assert_eq!(parse_head(&no_length, 8192).unwrap_err().status, 411);
    }

    fn link_of(method: &str, query: &[u8], body: &[u8]) -> Result<String, Problem> {
        let env = Env::method(method)
            .with("QUERY_STRING", query)
            .with("CONTENT_TYPE", FORM)
            .with("CONTENT_LENGTH", body.len().to_string());
        let head = parse_head(&env, 8192)?;
        parse_link(&head, &env, body)
    }

    #[test]
    fn links_from_query_and_body() {
        assert_eq!(
            link_of("GET", b"link=https%3A%2F%2Fe.x%2Fa%20b%2Bc", b"")
                .unwrap_err()
                .code(),
            "bad_link"
        );
        assert_eq!(
            link_of("GET", b"link=https%3A%2F%2Fe.x%2Fa%2Bc&x=%zz", b"").unwrap(),
            "https://e.x/a+c"
        );
        assert_eq!(
            link_of("POST", b"link=ignored", b"link=https://e.x/a+b")
                .unwrap_err()
                .code(),
            "bad_link",
            "a + is a space"
        );
        assert_eq!(
            link_of("POST", b"", b"link=https%3A%2F%2Fe.x%2Ff").unwrap(),
            "https://e.x/f"
        );
        assert_eq!(
            link_of("HEAD", b"link=https://e.x/", b"").unwrap(),
            "https://e.x/"
        );
    }

    #[test]
    fn bad_links() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "missing_link"),
            (b"other=1", "missing_link"),
            (b"link=", "bad_link"),
            (b"link", "bad_link"),
            (b"link=https://a.b/&link=https://c.d/", "repeated_link"),
            (b"link=%", "bad_encoding"),
            (b"link=%e", "bad_encoding"),
            (b"link=%zz", "bad_encoding"),
            (b"link=%ff%fe", "bad_link"),
            (b"link=https://e.x/\xff", "bad_link"),
            (b"link=javascript:alert(1)", "bad_link"),
            (b"--help", "missing_link"),
        ];
        for (query, code) in cases {
            assert_eq!(
                link_of("GET", query, b"").unwrap_err().code(),
                *code,
                "{:?}",
                String::from_utf8_lossy(query)
            );
        }
    }

    #[test]
    fn header_names_map_to_cgi_variables() {
        let env = Env::new().with("HTTP_X_FORWARDED_FOR", "1.2.3.4");
        assert_eq!(env.header("X-Forwarded-For"), Some(&b"1.2.3.4"[..]));
        assert_eq!(env.header("cf-connecting-ip"), None);
        assert_eq!(env.header("x-forwarded-for"), Some(&b"1.2.3.4"[..]));
        // Only the whole name: neither a prefix nor a longer name matches.
        assert_eq!(env.header("X-Forwarded"), None);
        assert_eq!(env.header("X-Forwarded-For-X"), None);
        assert_eq!(
            Env::new()
                .with("X_FORWARDED_FOR", "1")
                .header("X-Forwarded-For"),
            None
        );
    }

    #[test]
    fn a_later_value_hides_an_earlier_one() {
        let env = Env::new()
            .with("HTTP_ACCEPT", "text/html")
            .with("REQUEST_METHOD", "GET")
            .with("HTTP_ACCEPT", "application/json");
        assert_eq!(env.get("HTTP_ACCEPT"), Some(&b"application/json"[..]));
        assert_eq!(env.header("Accept"), Some(&b"application/json"[..]));
        assert_eq!(env.text("REQUEST_METHOD"), Some("GET"));
    }
}

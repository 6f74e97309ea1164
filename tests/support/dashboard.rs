//! The owner's dashboard seen from outside: a browser that keeps the cookies it is given and
//! signs in through the form with its CSRF token, and the checks every dashboard answer must
//! pass (the guarding headers; no figures on the sign-in form).

use super::client::{HttpClient, Request, Response};
use super::site::Site;

/// Where the dashboard is served.
pub const TARGET: &str = "/cgi-bin/resolve/admin";

/// The configuration's `admin.password_hash` for `password` (one fixed salt: tests need no
/// other).
pub fn password_hash(password: &str) -> String {
    resolve::support::password::hash(password, b"a salt of sixtee").expect("hash")
}

/// What only the dashboard shows: a figure, the chart, the check's report.
pub const DATA: [&str; 4] = [
    "<dt>Paid calls</dt>",
    "Paid calls per hour",
    "Configuration check",
    "effective configuration",
];

/// The headers every dashboard answer carries, whatever its status.
pub fn assert_guarded(r: &Response) {
    let csp = r.header("Content-Security-Policy").unwrap_or_default();
    for part in [
        "default-src 'none'",
        "style-src 'sha256-",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{part} in {csp:?}:\n{}", r.everything());
    }
    for (name, value) in [
        ("Cache-Control", "no-store"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Content-Type-Options", "nosniff"),
    ] {
        assert_eq!(r.header(name), Some(value), "{name}:\n{}", r.everything());
    }
}

/// Nothing of what only the signed-in owner sees.
pub fn assert_no_data(r: &Response) {
    for data in DATA {
        assert!(
            !r.text().contains(data),
            "{data} shown:\n{}",
            r.everything()
        );
    }
}

/// The sign-in form, and no data.
pub fn assert_sign_in_form(r: &Response) {
    assert!(
        r.text().contains("type=\"password\"") && r.text().contains("name=\"csrf\""),
        "{}",
        r.everything()
    );
    assert_no_data(r);
}

/// A browser: a client that keeps the cookies it is given.
pub struct Browser {
    client: HttpClient,
    cookies: Vec<(String, String)>,
}

impl Browser {
    pub fn new(site: &Site) -> Browser {
        Browser {
            client: site.client(),
            cookies: Vec::new(),
        }
    }

    pub fn from(site: &Site, address: &str) -> Browser {
        Browser {
            client: site.client().bind_source(address),
            cookies: Vec::new(),
        }
    }

    /// A browser using this client (an Apache started without a `Site`).
    pub fn with_client(client: HttpClient) -> Browser {
        Browser {
            client,
            cookies: Vec::new(),
        }
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn set_cookie(&mut self, name: &str, value: &str) {
        self.cookies.retain(|(n, _)| n != name);
        self.cookies.push((name.to_owned(), value.to_owned()));
    }

    pub fn send(&mut self, mut request: Request) -> Response {
        if !self.cookies.is_empty() {
            let header: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            request = request.header("Cookie", &header.join("; "));
        }
        let r = self
            .client
            .send(&request)
            .unwrap_or_else(|e| panic!("{} {}: {e}", request.method, request.target));
        assert_guarded(&r);
        for (_, value) in r
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("Set-Cookie"))
        {
            assert!(
                value.contains("; HttpOnly")
                    && value.contains("; SameSite=Strict")
                    && value.contains(&format!("; Path={TARGET}")),
                "{value}"
            );
            let (name, rest) = value.split_once('=').expect("name=value");
            let cookie = rest.split(';').next().unwrap_or_default();
            self.cookies.retain(|(n, _)| n != name);
            if !value.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), cookie.to_owned()));
            }
        }
        r
    }

    pub fn get(&mut self) -> Response {
        self.send(Request::get(TARGET).header("Accept", "text/html"))
    }

    /// GET another address of the dashboard (`?done=saved`), its fragment left out.
    pub fn get_target(&mut self, target: &str) -> Response {
        let target = target.split('#').next().unwrap_or(target);
        self.send(Request::get(target).header("Accept", "text/html"))
    }

    pub fn post(&mut self, body: &str) -> Response {
        self.send(Request::post_form(TARGET, body.to_owned()))
    }

    /// Opens the sign-in form and sends `password` with the form's token.
    pub fn sign_in(&mut self, password: &str) -> Response {
        let form = self.get();
        assert_sign_in_form(&form);
        let token = hidden(&form.text(), "csrf");
        self.post(&format!(
            "action=signin&csrf={token}&password={}",
            password.replace(' ', "+")
        ))
    }
}

/// The value of hidden field `name` in a page.
pub fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} field in\n{page}"));
    let rest = &page[at + marker.len()..];
    rest[..rest.find('"').expect("closing quote")].to_owned()
}

//! The request read once from the CGI environment into typed values, before anything is
//! counted: the answer's format, whether it is HEAD, the program's path, who asks (as the log
//! names them), and what is asked: the method, body and link checked, the page's origin
//! allowed, the API key checked and the client's address found, or the first thing wrong with
//! it. Nothing after this reads the environment.

use std::fmt;
use std::io::Read;

use crate::app::App;
use crate::core::rule::{KeyKind, Rule};
use crate::http::api_key::ClientKey;
use crate::http::links::Carried;
use crate::http::negotiate::{self, Format};
use crate::http::problem::{Kind, Problem};
use crate::http::request::{self, Env, Method};
use crate::store::Check;

/// One request as read.
pub(super) struct Request<'r> {
    /// The answer's format: JSON for a program that sends a key, else as `Accept` asks.
    pub(super) format: Format,
    /// A HEAD request: its answer has no body.
    pub(super) head_only: bool,
    /// The program's own path (`SCRIPT_NAME`), as the web server gave it.
    pub(super) script_name: Option<&'r str>,
    pub(super) caller: Caller<'r>,
    pub(super) asking: Asking<'r>,
}

/// What the request asks for. One value per request, moved once: its size costs nothing that
/// boxing the link's variant would save.
#[allow(clippy::large_enum_variant)]
pub(super) enum Asking<'r> {
    /// The page's footer and version (`?about=1`): answered before anything else is read or
    /// counted.
    About,
    /// The supported hosts and the visitor's rules (`?hosts=1`): read from the store's cache
    /// only, nothing counted.
    Hosts,
    /// A link: the request read and checked, or the first reason it cannot be answered.
    Link(Result<Asked<'r>, Problem>),
}

/// Who asks, as the owner's log names them: the address the web server saw and, when the
/// request carries an API key, the start of its hash (never the key).
pub(super) struct Caller<'r> {
    remote_addr: Option<&'r [u8]>,
    key: Option<&'r [u8]>,
}

impl fmt::Display for Caller<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}",
            String::from_utf8_lossy(self.remote_addr.unwrap_or(b"-"))
        )?;
        match self.key.and_then(|k| std::str::from_utf8(k).ok()) {
            Some(key) => write!(
                f,
                " key=sha256:{}",
                &crate::http::api_key::hash(key.trim())[..16]
            ),
            None => Ok(()),
        }
    }
}

/// A request read and checked, before anything is counted.
pub(super) struct Asked<'r> {
    pub(super) method: Method,
    /// The client's address.
    pub(super) address: std::net::IpAddr,
    /// The client's address as counted (an IPv6 address by its prefix).
    pub(super) identity: String,
    pub(super) key: Option<ClientKey<'r>>,
    pub(super) link: String,
    /// What it brings for the challenge: a token, the remembering cookie.
    pub(super) presented: crate::challenge::Presented,
    /// Two links or more, each asked as a request of its own (`app::links`); then `link` is
    /// empty.
    pub(super) links: Vec<Vec<u8>>,
}

impl Asked<'_> {
    /// Each rule applied to the key it counts this request by.
    pub(super) fn checks<'x>(&self, rules: &[&'x Rule]) -> Vec<Check<'x>> {
        rules
            .iter()
            .map(|rule| Check {
                rule,
                key: rule.key_for(match rule.key {
                    KeyKind::Ip => &self.identity,
                    KeyKind::Global => "",
                    KeyKind::ApiKey => self.key.as_ref().map_or("", |k| k.id.as_str()),
                }),
            })
            .collect()
    }
}

impl App<'_> {
    /// Reads the request. `body` is the request body (standard input under CGI); at most the
    /// announced CONTENT_LENGTH is read from it, and nothing when the request is refused first.
    pub(super) fn read<'r>(&'r self, env: &'r Env, body: &mut dyn Read) -> Request<'r> {
        let key = env.header(&self.config.api_keys.header);
        // Programs identify themselves with a key: they get JSON whatever they accept.
        let format = if key.is_some() {
            Format::Json
        } else {
            negotiate::from_accept(env.header("Accept"))
        };
        let method = request::method(env);
        let caller = Caller {
            remote_addr: env.get("REMOTE_ADDR"),
            key,
        };
        let asking = if crate::http::about::is_about(env) {
            Asking::About
        } else if env.get("QUERY_STRING") == Some(crate::app::supported::QUERY)
            && matches!(env.get("REQUEST_METHOD"), Some(b"GET" | b"HEAD"))
        {
            Asking::Hosts
        } else {
            Asking::Link(self.ask(env, method, &caller, body))
        };
        Request {
            format,
            head_only: method == Some(Method::Head),
            script_name: env.text("SCRIPT_NAME"),
            caller,
            asking,
        }
    }

    /// Who is asking and for what: the method and body checked, the page's origin allowed, the
    /// API key checked, the client's address found and the link read, in that order. Nothing
    /// is counted yet.
    fn ask<'r>(
        &'r self,
        env: &Env,
        method: Option<Method>,
        caller: &Caller<'_>,
        body: &mut dyn Read,
    ) -> Result<Asked<'r>, Problem> {
        let head = request::parse_head_for(method, env, self.config.max_body_bytes)?;
        crate::http::origin::check(
            &self.config.allowed_origins,
            env.header("Origin"),
            env.header("Referer"),
            env.header("Sec-Fetch-Site"),
        )?;
        let key = self.config.api_keys.check(caller.key)?;
        // The client's address as `http::identity::client_address_in` finds it, from the
        // REMOTE_ADDR read once.
        fn text(v: Option<&[u8]>) -> Option<&str> {
            v.and_then(|v| std::str::from_utf8(v).ok())
        }
        let policy = &self.config.client;
        let address = policy
            .client_address(
                text(caller.remote_addr),
                text(env.header(&self.config.forwarded_header)),
                policy.network_header().and_then(|h| text(env.header(h))),
            )
            .map_err(|e| {
                Problem::new(
                    400,
                    Kind::UnknownClient,
                    "The server could not tell who is asking.",
                )
                .log(format!("REMOTE_ADDR is {e:?}: the web server must set it"))
            })?;
        let body = read_body(body, head.body_len)?;
        let presented = crate::challenge::Presented::read(env, head.method == Method::Post, &body);
        let source = match head.method {
            Method::Post => body.as_slice(),
            Method::Get | Method::Head => env.get("QUERY_STRING").unwrap_or_default(),
        };
        // One `link` and no `links`, as most requests: read as one link always was.
        let single = crate::net::form::raw_values(source, "links").is_empty()
            && crate::net::form::raw_values(source, "link").len() <= 1;
        if single {
            return Ok(Asked {
                method: head.method,
                address,
                identity: self.config.client.identity(address),
                key,
                link: request::parse_link(&head, env, &body)?,
                presented,
                links: Vec::new(),
            });
        }
        let (link, links) = match crate::http::links::carried(source, self.config.max_links)? {
            Carried::Single => (request::parse_link(&head, env, &body)?, Vec::new()),
            Carried::One(link) => (
                crate::http::link::validate(&link)
                    .map(str::to_owned)
                    .map_err(|e| Problem::new(400, Kind::BadLink, e.to_string()))?,
                Vec::new(),
            ),
            Carried::Several(links) => (String::new(), links),
        };
        Ok(Asked {
            method: head.method,
            address,
            identity: self.config.client.identity(address),
            key,
            link,
            presented,
            links,
        })
    }
}

fn read_body(input: &mut dyn Read, len: u64) -> Result<Vec<u8>, Problem> {
    let mut body = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let read = input.take(len).read_to_end(&mut body);
    match read {
        Ok(n) if n as u64 == len => Ok(body),
        Ok(n) => Err(
            Problem::new(400, Kind::ShortBody, "The form arrived incomplete.")
                .log(format!("body ended after {n} of {len} bytes")),
        ),
        Err(e) => Err(
            Problem::new(400, Kind::ShortBody, "The form arrived incomplete.")
                .log(format!("reading the body failed: {e}")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_is_named_by_address_and_keys_hash() {
        let named = |addr: Option<&'static [u8]>, key: Option<&'static [u8]>| {
            Caller {
                remote_addr: addr,
                key,
            }
            .to_string()
        };
        assert_eq!(named(Some(b"192.0.2.1"), None), "192.0.2.1");
        assert_eq!(named(None, None), "-");
        let hash = crate::http::api_key::hash("k1");
        assert_eq!(
            named(Some(b"192.0.2.1"), Some(b" k1 ")),
            format!("192.0.2.1 key=sha256:{}", &hash[..16])
        );
        // A key that is not text is not named.
        assert_eq!(named(Some(b"192.0.2.1"), Some(b"\xff")), "192.0.2.1");
    }
}

//! Where the MySQL/MariaDB store lives, its tables and how long it may take, as checked from
//! the configuration.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::support::secret::Secret;
use crate::support::show;

/// How the `events` table writes time: milliseconds (ours), or as PHP limiters do, Unix seconds
/// or a `DATETIME` in the server's time zone (`NOW()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TsUnit {
    #[serde(rename = "ms")]
    Millis,
    #[serde(rename = "s")]
    Seconds,
    #[serde(rename = "datetime")]
    DateTime,
}

/// Where the MySQL/MariaDB store lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MysqlSettings {
    /// `mysql://user:password@host:port/database`; the fields below override its parts.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "url_without_password"
    )]
    pub url: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    pub counter_table: String,
    #[serde(rename = "table")]
    pub events_table: String,
    pub cache_table: String,
    pub journal_table: String,
    pub notes_table: String,
    pub events_ts: TsUnit,
    #[serde(rename = "connect_timeout_ms", serialize_with = "show::ms")]
    pub connect_timeout: Duration,
    #[serde(rename = "read_timeout_ms", serialize_with = "show::ms")]
    pub read_timeout: Duration,
    pub tls: bool,
    /// A CA bundle (PEM) trusted beside the public roots; given, TLS is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

/// The URL as written, its password (if any) replaced by the mask.
fn url_without_password<S: Serializer>(url: &Option<Secret>, s: S) -> Result<S::Ok, S::Error> {
    match url {
        None => s.serialize_none(),
        Some(url) => match crate::net::url::parse(url.expose(), &["mysql"]) {
            Ok(parsed) => s.serialize_str(&parsed.masked()),
            // Not readable as a URL (the check refuses it first): nothing of it is shown.
            Err(_) => url.serialize(s),
        },
    }
}

/// What a `mysql://USER:PASSWORD@HOST:PORT/DATABASE[?socket=PATH]` URL says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UrlParts {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub socket: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub database: Option<String>,
}

/// Reads a store URL. The error says why in words that never quote the URL (it may hold the
/// password).
pub fn url_parts(text: &str) -> Result<UrlParts, &'static str> {
    let url = crate::net::url::parse(text, &["mysql"]).map_err(|e| match e {
        crate::net::url::UrlError::Scheme => "it must start with mysql://",
        _ => "it is not a URL",
    })?;
    let mut parts = UrlParts {
        host: Some(url.host_text()),
        port: url.port(),
        user: url.username(),
        password: url.password(),
        ..UrlParts::default()
    };
    let db = url.path().trim_start_matches('/');
    if !db.is_empty() {
        let decoded = crate::net::form::percent_decode(db.as_bytes())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("its database name is not valid percent-encoded UTF-8")?;
        parts.database = Some(decoded);
    }
    for (name, value) in url.query_pairs() {
        match name.as_str() {
            "socket" => parts.socket = Some(PathBuf::from(value)),
            _ => return Err("it has a parameter other than socket (use store.tls for TLS)"),
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_their_parts() {
        let p = url_parts("mysql://u%40x:p%3Aw@db.example:3307/site%5Fdb").unwrap();
        assert_eq!(p.host.as_deref(), Some("db.example"));
        assert_eq!(p.port, Some(3307));
        assert_eq!(p.user.as_deref(), Some("u@x"));
        assert_eq!(p.password.as_deref(), Some("p:w"));
        assert_eq!(p.database.as_deref(), Some("site_db"));
        let s = url_parts("mysql://u:p@localhost/d?socket=%2Frun%2Fmysqld.sock").unwrap();
        assert_eq!(s.socket, Some(PathBuf::from("/run/mysqld.sock")));
        assert_eq!(
            url_parts("http://u:p@h/d"),
            Err("it must start with mysql://")
        );
        assert!(url_parts("mysql://u:p@h/d?ssl=1").is_err());
        assert_eq!(url_parts("mysql://h").unwrap().database, None);
    }
}

//! Where the MySQL/MariaDB store lives, its tables and how long it may take, as checked from
//! the configuration.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::secret::Secret;
use crate::show;

/// How the `events` table writes time: milliseconds (ours) or seconds (common in PHP limiters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TsUnit {
    #[serde(rename = "ms")]
    Millis,
    #[serde(rename = "s")]
    Seconds,
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
}

/// The URL as written, its password (if any) replaced by the mask.
fn url_without_password<S: Serializer>(url: &Option<Secret>, s: S) -> Result<S::Ok, S::Error> {
    match url {
        None => s.serialize_none(),
        Some(url) => match crate::http::url::parse(url.expose(), &["mysql"]) {
            Ok(parsed) => s.serialize_str(&parsed.masked()),
            // Not readable as a URL (the check refuses it first): nothing of it is shown.
            Err(_) => url.serialize(s),
        },
    }
}

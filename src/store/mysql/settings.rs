//! Where the MySQL/MariaDB store lives, its tables and how long it may take, as checked from
//! the configuration.

use std::path::PathBuf;
use std::time::Duration;

use crate::secret::Secret;

/// How the `events` table writes time: milliseconds (ours) or seconds (common in PHP limiters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsUnit {
    Millis,
    Seconds,
}

/// Where the MySQL/MariaDB store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlSettings {
    /// `mysql://user:password@host:port/database`; the fields below override its parts.
    pub url: Option<Secret>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub socket: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub database: Option<String>,
    pub counter_table: String,
    pub events_table: String,
    pub cache_table: String,
    pub events_ts: crate::store::mysql::settings::TsUnit,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub tls: bool,
}

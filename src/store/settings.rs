//! What the configuration says about the store: which one, and what every store shares
//! (failure policy, sweeping, lock waits). Each store's own settings live beside it.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::support::show;

use crate::store::mysql::settings::MysqlSettings;
use crate::store::redis::settings::RedisSettings;

/// What a store does when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Answer the request as if admitted (fail open), and log.
    Allow,
    /// Refuse with 503 and Retry-After (fail closed), and log.
    Deny,
}

/// Which store, with its own settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StoreKind {
    File { dir: PathBuf },
    Mysql(Box<MysqlSettings>),
    Redis(Box<RedisSettings>),
}

/// The store section, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreConfig {
    #[serde(flatten)]
    pub kind: StoreKind,
    pub on_error: OnError,
    /// One request in this many sweeps (0: never; use `resolve sweep` from cron).
    pub sweep_one_in: u32,
    #[serde(rename = "sweep_budget_ms", serialize_with = "show::ms")]
    pub sweep_budget: Duration,
    #[serde(rename = "sweep_grace_secs", serialize_with = "show::secs")]
    pub sweep_grace: Duration,
    pub deny_retry_after_secs: u32,
    /// File store: the longest a request waits for another process's lock on a file.
    #[serde(rename = "lock_timeout_ms", serialize_with = "show::ms")]
    pub lock_timeout: Duration,
    /// File store: the data directory's budget, files and bytes (`store::file::budget`).
    pub max_files: u64,
    pub max_bytes: u64,
}

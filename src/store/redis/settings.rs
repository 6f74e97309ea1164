//! Where the Redis store lives and how long it may take, as checked from the configuration.

use std::time::Duration;

use serde::Serialize;

use crate::support::secret::Secret;
use crate::support::show;

/// Where the Redis store lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedisSettings {
    #[serde(flatten)]
    pub target: crate::store::redis::resp::Target,
    /// An ACL user (Redis 6+); None for the default user.
    #[serde(rename = "user", skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    pub db: u32,
    #[serde(rename = "connect_timeout_ms", serialize_with = "show::ms")]
    pub connect_timeout: Duration,
    #[serde(rename = "read_timeout_ms", serialize_with = "show::ms")]
    pub read_timeout: Duration,
}

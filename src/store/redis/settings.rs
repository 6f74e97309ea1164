//! Where the Redis store lives and how long it may take, as checked from the configuration.

use std::time::Duration;

use crate::secret::Secret;

/// Where the Redis store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSettings {
    pub target: crate::store::redis::resp::Target,
    /// An ACL user (Redis 6+); None for the default user.
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub db: u32,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
}

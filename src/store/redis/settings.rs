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
    /// The seeds of a Redis Cluster (`HOST`, `PORT`), after `target`'s; empty for a single
    /// Redis.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "seeds")]
    pub cluster_nodes: Vec<(String, u16)>,
}

impl RedisSettings {
    /// Whether the store is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        !self.cluster_nodes.is_empty()
    }
}

/// The seeds as the configuration writes them.
fn seeds<S: serde::Serializer>(seeds: &[(String, u16)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(seeds.iter().map(|(host, port)| {
        if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        }
    }))
}

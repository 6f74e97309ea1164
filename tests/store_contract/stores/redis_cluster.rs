//! The Redis store on a real Redis Cluster: three masters with a replica each, made by
//! `redis-cli --cluster create`, every node with a password; the store configured by its
//! seeds (`store.cluster_nodes`).

use std::time::Duration;

use resolve::core::rule::{Algorithm, Rule};
use resolve::store::redis::RedisStore;
use resolve::store::roles::Backend;
use resolve::store::settings::StoreKind;
use serde_json::{Value, json};

use super::{Credentialed, SLACK, StoreUnderTest, Timeouts, parse_store, policy_fields};
use crate::support::redis::Resp;
use crate::support::redis_cluster::RedisCluster;
use crate::support::urlenc::encode;

/// The password of every node.
const CLUSTER_PASSWORD: &str = "contract-CLUSTERPW-77c4";

pub struct InRedisCluster {
    pub cluster: RedisCluster,
}

impl InRedisCluster {
    /// The store section: the credentials in the URL (which names no host), the seeds apart.
    pub fn section(&self, policy: &str, timeouts: Timeouts, password: &str) -> Value {
        let mut store = json!({
            "kind": "redis",
            "password": password,
            "cluster_nodes": self.cluster.seeds()[..3],
            "connect_timeout_ms": timeouts.connect_ms(),
            "read_timeout_ms": timeouts.read_ms(),
        });
        policy_fields(&mut store, policy);
        store
    }

    fn int(&self, key: &str, args: &[&str]) -> u64 {
        match self.cluster.cmd_on_key(key, args) {
            Resp::Int(n) => n.max(0) as u64,
            Resp::Bulk(Some(b)) => String::from_utf8_lossy(&b).parse().unwrap_or(0),
            Resp::Bulk(None) => 0,
            other => panic!("redis {args:?}: {other}"),
        }
    }
}

impl StoreUnderTest for InRedisCluster {
    fn start(label: &str) -> InRedisCluster {
        InRedisCluster {
            cluster: RedisCluster::start(label, CLUSTER_PASSWORD),
        }
    }

    fn name(&self) -> &'static str {
        "redis_cluster"
    }

    fn open(&self, _rules: &[Rule]) -> Box<dyn Backend> {
        let StoreKind::Redis(settings) = parse_store(self.store_json("deny", Timeouts::Short))
        else {
            unreachable!("a redis store section");
        };
        Box::new(RedisStore::new(*settings))
    }

    fn counted(&self, key: &str, algorithm: Algorithm) -> u64 {
        let Some(key) = self.cluster.stored_name(key) else {
            return 0;
        };
        let kind = self
            .cluster
            .cmd_on_key(&key, &["TYPE", &key])
            .as_text()
            .unwrap_or_default();
        match (kind.as_str(), algorithm) {
            ("hash", Algorithm::Fixed) => self.int(&key, &["HGET", &key, "c"]),
            ("zset", Algorithm::Sliding) => self.int(&key, &["ZCARD", &key]),
            _ => 0,
        }
    }

    fn holds(&self, key: &str) -> bool {
        self.cluster.stored_name(key).is_some()
    }

    fn journal_bytes(&self, totals_only: bool) -> Option<u64> {
        let mut bytes = 0;
        for (node, key) in self.cluster.keys(&[]) {
            let wanted = if totals_only {
                key.starts_with("resolve:journal:totals:")
            } else {
                key.starts_with("resolve:journal:")
            };
            if wanted {
                bytes += match self.cluster.nodes[node]
                    .cmd(&["MEMORY", "USAGE", &key, "SAMPLES", "0"])
                {
                    Resp::Int(n) => n.max(0) as u64,
                    other => panic!("MEMORY USAGE {key}: {other}"),
                };
            }
        }
        Some(bytes)
    }

    /// SIGKILL of every node: every key is lost (no persistence).
    fn kill(&mut self) {
        for node in &mut self.cluster.nodes {
            node.kill();
        }
    }

    /// Every node started again on its ports with its `nodes.conf`: the cluster forms again.
    fn restart(&mut self) {
        for node in &mut self.cluster.nodes {
            node.restart();
        }
        self.cluster.wait_settled(&[]);
    }

    fn keeps_counts_across_restart(&self) -> bool {
        false
    }

    fn store_json(&self, policy: &str, timeouts: Timeouts) -> Value {
        self.section(policy, timeouts, CLUSTER_PASSWORD)
    }

    /// Every failure names the cluster or the node that failed.
    fn place(&self) -> String {
        "redis cluster".to_owned()
    }

    fn secrets(&self) -> Vec<String> {
        vec![CLUSTER_PASSWORD.to_owned(), encode(CLUSTER_PASSWORD)]
    }

    /// Connecting, reading, and waiting for the cluster to settle all within the connect
    /// and read timeouts together, once for the decision and once for the journal.
    fn failure_bound(&self, timeouts: Timeouts) -> Duration {
        Duration::from_millis(2 * (timeouts.connect_ms() + timeouts.read_ms())) + SLACK
    }
}

impl Credentialed for InRedisCluster {
    fn with_password(&self, password: &str, policy: &str) -> Vec<(&'static str, Value)> {
        let field = self.section(policy, Timeouts::Short, password);
        let mut url = field.clone();
        url.as_object_mut().expect("an object").remove("password");
        url["url"] = json!(format!(
            "redis://:{}@{}/0",
            encode(password),
            self.cluster.seeds()[0]
        ));
        vec![("password field", field), ("password in the URL", url)]
    }

    fn complaint(&self) -> [&'static str; 2] {
        ["WRONGPASS", "(check store.password and store.username)"]
    }
}

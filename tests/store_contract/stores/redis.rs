//! The Redis store under test: a real redis-server with a password, and a delaying proxy in
//! front of it.

use std::time::Duration;

use resolve::core::rule::{Algorithm, Rule};
use resolve::store::redis::RedisStore;
use resolve::store::roles::Backend;
use resolve::store::settings::StoreKind;
use serde_json::{Value, json};

use super::{
    Credentialed, SLACK, Slowable, Slowdown, StoreUnderTest, Timeouts, parse_store, policy_fields,
    proxy_recover, proxy_slow_down, proxy_slow_within_bounds, proxy_slowdowns,
};
use crate::support::redis::Resp;
use crate::support::urlenc::encode;
use crate::support::{DelayProxy, Redis};

/// The password of every Redis under test.
const REDIS_PASSWORD: &str = "contract-REDISPW-5e1b";

pub struct InRedis {
    redis: Redis,
    proxy: DelayProxy,
}

impl InRedis {
    fn tcp(&self, port: u16, policy: &str, timeouts: Timeouts) -> Value {
        let mut store = json!({
            "kind": "redis",
            "host": "127.0.0.1",
            "port": port,
            "password": REDIS_PASSWORD,
            "connect_timeout_ms": timeouts.connect_ms(),
            "read_timeout_ms": timeouts.read_ms(),
        });
        policy_fields(&mut store, policy);
        store
    }

    fn int(&self, args: &[&str]) -> u64 {
        match self.redis.cmd(args) {
            Resp::Int(n) => n.max(0) as u64,
            Resp::Bulk(Some(b)) => String::from_utf8_lossy(&b).parse().unwrap_or(0),
            Resp::Bulk(None) => 0,
            other => panic!("redis {args:?}: {other}"),
        }
    }
}

impl StoreUnderTest for InRedis {
    fn start(label: &str) -> InRedis {
        let redis = Redis::builder(label).password(REDIS_PASSWORD).start();
        let proxy = DelayProxy::start(redis.addr());
        InRedis { redis, proxy }
    }

    fn name(&self) -> &'static str {
        "redis"
    }

    fn open(&self, _rules: &[Rule]) -> Box<dyn Backend> {
        let StoreKind::Redis(settings) = parse_store(self.store_json("deny", Timeouts::Short))
        else {
            unreachable!("a redis store section");
        };
        Box::new(RedisStore::new(*settings))
    }

    fn counted(&self, key: &str, algorithm: Algorithm) -> u64 {
        let kind = self.redis.cmd(&["TYPE", key]).as_text().unwrap_or_default();
        match (kind.as_str(), algorithm) {
            ("hash", Algorithm::Fixed) => self.int(&["HGET", key, "c"]),
            ("zset", Algorithm::Sliding) => self.int(&["ZCARD", key]),
            _ => 0,
        }
    }

    fn holds(&self, key: &str) -> bool {
        self.int(&["EXISTS", key]) == 1
    }

    /// `MEMORY USAGE` of every key of the journal (or of its totals alone).
    fn journal_bytes(&self, totals_only: bool) -> Option<u64> {
        let pattern = if totals_only {
            "resolve:journal:totals:*"
        } else {
            "resolve:journal:*"
        };
        let mut cursor = "0".to_owned();
        let mut bytes = 0;
        loop {
            let reply = self
                .redis
                .cmd(&["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"]);
            let Resp::Array(Some(parts)) = reply else {
                panic!("SCAN: {reply}");
            };
            let [next, Resp::Array(Some(keys))] = &parts[..] else {
                panic!("SCAN answered {parts:?}");
            };
            for key in keys {
                let key = key.as_text().expect("a key");
                bytes += self.int(&["MEMORY", "USAGE", &key, "SAMPLES", "0"]);
            }
            cursor = next.as_text().expect("a cursor");
            if cursor == "0" {
                return Some(bytes);
            }
        }
    }

    /// SIGKILL: every key is lost (no persistence).
    fn kill(&mut self) {
        self.redis.kill();
    }

    fn restart(&mut self) {
        self.redis.restart();
    }

    fn keeps_counts_across_restart(&self) -> bool {
        false
    }

    fn store_json(&self, policy: &str, timeouts: Timeouts) -> Value {
        self.tcp(self.redis.port(), policy, timeouts)
    }

    fn place(&self) -> String {
        format!("redis store at 127.0.0.1:{}", self.redis.port())
    }

    fn secrets(&self) -> Vec<String> {
        vec![REDIS_PASSWORD.to_owned(), encode(REDIS_PASSWORD)]
    }

    /// A request is bounded by the connect timeout and the read timeout.
    fn failure_bound(&self, timeouts: Timeouts) -> Duration {
        Duration::from_millis(timeouts.connect_ms() + timeouts.read_ms()) + SLACK
    }
}

impl Slowable for InRedis {
    fn slow_store_json(&self, policy: &str) -> Value {
        self.tcp(self.proxy.port(), policy, Timeouts::Short)
    }

    fn slow_place(&self) -> String {
        format!("redis store at 127.0.0.1:{}", self.proxy.port())
    }

    fn slow_within_bounds(&mut self, _keys: &[String]) -> Duration {
        proxy_slow_within_bounds(&self.proxy)
    }

    fn slowdowns(&self) -> Vec<Slowdown> {
        proxy_slowdowns(
            &["timed out: see store.read_timeout_ms"],
            self.failure_bound(Timeouts::Short),
        )
    }

    fn slow_down(&mut self, n: usize, _keys: &[String]) {
        proxy_slow_down(&self.proxy, n);
    }

    fn recover(&mut self) {
        proxy_recover(&self.proxy);
    }
}

impl Credentialed for InRedis {
    fn with_password(&self, password: &str, policy: &str) -> Vec<(&'static str, Value)> {
        let mut field = self.store_json(policy, Timeouts::Short);
        field["password"] = json!(password);
        let mut url = json!({
            "kind": "redis",
            "url": format!("redis://:{}@127.0.0.1:{}/0", encode(password), self.redis.port()),
        });
        policy_fields(&mut url, policy);
        vec![("password field", field), ("password in the URL", url)]
    }

    fn complaint(&self) -> [&'static str; 2] {
        ["WRONGPASS", "(check store.password and store.username)"]
    }
}

//! The effective configuration as `resolve check` prints it, secrets masked.

use serde_json::{Value, json};

use crate::config::Config;
use crate::core::rule::Rule;
use crate::store::mysql::settings::TsUnit;
use crate::store::settings::{OnError, StoreKind};

impl Config {
    /// The effective configuration as JSON, secrets masked, for `resolve check`.
    pub fn masked_json(&self) -> Value {
        let provider = match &self.provider {
            None => Value::Null,
            Some(p) => crate::provider::config::describe(p),
        };
        let mut store = match &self.store.kind {
            StoreKind::File { dir } => json!({
                "kind": "file",
                "dir": dir.display().to_string(),
                "lock_timeout_ms": self.store.lock_timeout.as_millis(),
            }),
            StoreKind::Redis(_) => Value::Null,
            StoreKind::Mysql(m) => {
                let mut v = json!({
                    "kind": "mysql",
                    "table": m.events_table,
                    "counter_table": m.counter_table,
                    "cache_table": m.cache_table,
                    "events_ts": match m.events_ts { TsUnit::Millis => "ms", TsUnit::Seconds => "s" },
                    "connect_timeout_ms": m.connect_timeout.as_millis() as u64,
                    "read_timeout_ms": m.read_timeout.as_millis() as u64,
                    "tls": m.tls,
                });
                let optional = [
                    ("url", m.url.as_ref().map(|u| json!(mask_url(u.expose())))),
                    ("host", m.host.as_ref().map(|h| json!(h))),
                    ("port", m.port.map(|p| json!(p))),
                    (
                        "socket",
                        m.socket.as_ref().map(|p| json!(p.display().to_string())),
                    ),
                    ("user", m.user.as_ref().map(|u| json!(u))),
                    ("password", m.password.as_ref().map(|_| json!("***"))),
                    ("database", m.database.as_ref().map(|d| json!(d))),
                ];
                for (name, value) in optional {
                    if let Some(value) = value {
                        v[name] = value;
                    }
                }
                v
            }
        };
        if let StoreKind::Redis(r) = &self.store.kind {
            store = json!({
                "kind": "redis",
                "db": r.db,
                "connect_timeout_ms": r.connect_timeout.as_millis() as u64,
                "read_timeout_ms": r.read_timeout.as_millis() as u64,
            });
            match &r.target {
                crate::store::redis::resp::Target::Tcp { host, port } => {
                    store["host"] = json!(host);
                    store["port"] = json!(port);
                }
                crate::store::redis::resp::Target::Unix(p) => {
                    store["socket"] = json!(p.display().to_string())
                }
            }
            if let Some(u) = &r.username {
                store["user"] = json!(u);
            }
            if r.password.is_some() {
                store["password"] = json!("***");
            }
        }
        let common = json!({
            "on_error": match self.store.on_error { OnError::Allow => "allow", OnError::Deny => "deny" },
            "sweep_one_in": self.store.sweep_one_in,
            "sweep_budget_ms": self.store.sweep_budget.as_millis() as u64,
            "sweep_grace_secs": self.store.sweep_grace.as_secs(),
            "deny_retry_after_secs": self.store.deny_retry_after_secs,
        });
        for (k, v) in common.as_object().into_iter().flatten() {
            store[k] = v.clone();
        }
        json!({
            "provider": provider,
            "store": store,
            "rules": self.rules.iter().map(rule_json).collect::<Vec<_>>(),
            "spend": self.spend.iter().map(|r| json!({
                "name": r.name.as_str(), "limit": r.limit.get(), "window_secs": r.window_secs.get(),
            })).collect::<Vec<_>>(),
            "cache": {"ttl_secs": self.cache_ttl.as_secs()},
            "client": {
                "ipv6_prefix": self.client.ipv6_prefix,
                "trusted_proxies": self.client.trusted_proxies.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
                "forwarded_header": self.forwarded_header,
            },
            "request": {"max_body_bytes": self.max_body_bytes},
            "fastcgi": {"max_requests": self.fastcgi_max_requests},
            "allowed_origins": self.allowed_origins,
            "api_keys": {
                "header": self.api_keys.header,
                "require": self.api_keys.require,
                "keys": self.api_keys.keys.iter().map(|k| json!({
                    "name": k.name,
                    "sha256": k.sha256,
                    "rules": k.rules.as_ref().map(|rs| rs.iter().map(rule_json).collect::<Vec<_>>()),
                })).collect::<Vec<_>>(),
            },
        })
    }
}

fn rule_json(r: &Rule) -> Value {
    json!({
        "name": r.name.as_str(), "key": r.key.as_str(), "algorithm": r.algorithm.as_str(),
        "limit": r.limit.get(), "window_secs": r.window_secs.get(),
    })
}

/// A URL with its password replaced by `***`.
fn mask_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

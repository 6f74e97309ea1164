//! The effective configuration as `resolve check` prints it: the checked `Config` serialised
//! in the file's own layout. Nothing is masked here: every secret is a
//! [`Secret`](crate::support::secret::Secret), which serialises as the mask wherever it sits.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::config::Config;
use crate::http::identity::ClientPolicy;

/// `client`: the address policy and the header it reads, grouped as the file groups them.
#[derive(Serialize)]
struct Client<'a> {
    #[serde(flatten)]
    policy: &'a ClientPolicy,
    forwarded_header: &'a str,
}

#[derive(Serialize)]
struct Cache {
    ttl_secs: u64,
}

#[derive(Serialize)]
struct Request {
    max_body_bytes: u64,
}

#[derive(Serialize)]
struct Fastcgi {
    max_requests: u32,
}

impl Serialize for Config {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("provider", &self.provider)?;
        map.serialize_entry("store", &self.store)?;
        map.serialize_entry("rules", &self.rules)?;
        map.serialize_entry("spend", &self.spend)?;
        let cache = Cache {
            ttl_secs: self.cache_ttl.as_secs(),
        };
        map.serialize_entry("cache", &cache)?;
        let client = Client {
            policy: &self.client,
            forwarded_header: &self.forwarded_header,
        };
        map.serialize_entry("client", &client)?;
        let request = Request {
            max_body_bytes: self.max_body_bytes,
        };
        map.serialize_entry("request", &request)?;
        let fastcgi = Fastcgi {
            max_requests: self.fastcgi_max_requests,
        };
        map.serialize_entry("fastcgi", &fastcgi)?;
        map.serialize_entry("allowed_origins", &self.allowed_origins)?;
        map.serialize_entry("api_keys", &self.api_keys)?;
        map.serialize_entry("journal", &self.journal)?;
        if !self.shadow_rules.is_empty() {
            map.serialize_entry("shadow_rules", &self.shadow_rules)?;
        }
        let texts = |set: &crate::net::addr_set::AddrSet| -> Vec<String> {
            set.ranges().iter().map(ToString::to_string).collect()
        };
        if !self.block.is_empty() {
            map.serialize_entry("block", &texts(&self.block))?;
        }
        if !self.allow.is_empty() {
            map.serialize_entry("allow", &texts(&self.allow))?;
        }
        if let Some(a) = &self.auto_block {
            map.serialize_entry("auto_block", a)?;
        }
        if !self.page.is_empty() {
            map.serialize_entry("page", &self.page)?;
        }
        if let Some(admin) = &self.admin {
            map.serialize_entry("admin", admin)?;
        }
        map.end()
    }
}

impl Config {
    /// The effective configuration as JSON, every secret masked.
    pub fn masked_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn shown(text: &str) -> String {
        let c = Config::from_json(text, Path::new("/home/u/resolve")).unwrap();
        serde_json::to_string_pretty(&c).unwrap()
    }

    #[test]
    fn every_secret_is_masked_where_it_sits() {
        let out = shown(
            r#"{"provider": {"preset": "realdebrid", "token": "tok-3f9a8b7c6d"},
                "store": {"kind": "mysql", "url": "mysql://u:pw-77aa11bb@db.example:3306/site",
                          "password": "pw-2-cc33dd"}}"#,
        );
        for secret in ["tok-3f9a8b7c6d", "pw-77aa11bb", "pw-2-cc33dd"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains(r#""token": "***""#), "{out}");
        assert!(out.contains(r#""password": "***""#), "{out}");
        assert!(out.contains("mysql://u:***@db.example:3306/site"), "{out}");
        let out = shown(r#"{"store": {"kind": "redis", "url": "redis://:rd-99ee88@h:1/0"}}"#);
        assert!(!out.contains("rd-99ee88"), "{out}");
        assert!(out.contains(r#""password": "***""#), "{out}");
    }

    #[test]
    fn a_short_token_masks_itself_not_every_matching_letter() {
        let out = shown(r#"{"provider": {"preset": "realdebrid", "token": "t"}}"#);
        assert!(
            out.contains("https://api.real-debrid.com/rest/1.0"),
            "{out}"
        );
        assert!(out.contains(r#""token": "***""#), "{out}");
    }

    #[test]
    fn the_file_layout_is_kept() {
        let v: serde_json::Value = serde_json::from_str(&shown(
            r#"{"store": {"dir": "data", "on_error": "deny"}, "cache": {"ttl_secs": 60},
                "client": {"forwarded_header": "CF-Connecting-IP"}}"#,
        ))
        .unwrap();
        assert_eq!(v["store"]["kind"], "file");
        assert_eq!(v["store"]["dir"], "/home/u/resolve/data");
        assert_eq!(v["store"]["on_error"], "deny");
        assert_eq!(v["cache"]["ttl_secs"], 60);
        assert_eq!(v["client"]["forwarded_header"], "CF-Connecting-IP");
        assert_eq!(v["client"]["ipv6_prefix"], 64);
        assert_eq!(v["rules"][0]["key"], "ip");
        assert_eq!(v["rules"][0]["algorithm"], "fixed");
        assert_eq!(v["provider"], serde_json::Value::Null);
    }
}

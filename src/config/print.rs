//! The effective configuration as `resolve check` prints it: the checked `Config` written in
//! the file's own form, so that what is printed reads back as the same configuration (secrets
//! aside). Nothing is masked here: every secret is a
//! [`Secret`](crate::support::secret::Secret), which serialises as the mask wherever it sits.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::config::Config;
use crate::core::rule::{Rule, Unit};
use crate::http::identity::ClientPolicy;
use crate::store::settings::{StoreConfig, StoreKind};

/// `client`, as the file writes it: networks trusted by name (`"cloudflare"`) stand in
/// `trusted_proxies` beside the addresses and ranges.
struct Client<'a> {
    policy: &'a ClientPolicy,
    forwarded_header: &'a str,
}

impl Serialize for Client<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let trusted: Vec<String> = (self.policy.trusted_networks.iter())
            .map(|n| n.name().to_owned())
            .chain(self.policy.trusted_proxies.iter().map(ToString::to_string))
            .collect();
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("ipv6_prefix", &self.policy.ipv6_prefix)?;
        map.serialize_entry("trusted_proxies", &trusted)?;
        map.serialize_entry("forwarded_header", self.forwarded_header)?;
        map.end()
    }
}

/// A rule of `rules`, with `"mode": "shadow"` when it only reports.
struct RuleEntry<'a> {
    rule: &'a Rule,
    shadow: bool,
}

impl Serialize for RuleEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.rule;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &r.name)?;
        map.serialize_entry("key", &r.key)?;
        map.serialize_entry("algorithm", &r.algorithm)?;
        if r.unit != Unit::Requests {
            map.serialize_entry("unit", &r.unit)?;
        }
        map.serialize_entry("limit", &r.configured_limit())?;
        map.serialize_entry("window_secs", &r.window_secs)?;
        map.serialize_entry("key_template", &r.key_template)?;
        if self.shadow {
            map.serialize_entry("mode", "shadow")?;
        }
        map.end()
    }
}

/// A site-wide limit (`spend`, the provider's `rate_limits`): its name, limit and window, and
/// for a provider's rate the steps (from 1) whose calls it counts, when not all.
struct SiteRule<'a>(&'a Rule, Option<Vec<usize>>);

impl Serialize for SiteRule<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.0.name)?;
        if self.0.unit != Unit::Requests {
            map.serialize_entry("unit", &self.0.unit)?;
        }
        map.serialize_entry("limit", &self.0.configured_limit())?;
        map.serialize_entry("window_secs", &self.0.window_secs)?;
        if let Some(steps) = &self.1 {
            map.serialize_entry("steps", steps)?;
        }
        map.end()
    }
}

fn site_rules(rules: &[Rule]) -> Vec<SiteRule<'_>> {
    rules.iter().map(|r| SiteRule(r, None)).collect()
}

/// `provider`: its checked description, with the published rate limits it carries (from its
/// preset or its own `rate_limits`), which the checked configuration keeps among `spend`.
struct Provider<'a> {
    config: &'a Config,
}

impl Serialize for Provider<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.config;
        let Some(spec) = &c.provider else {
            return s.serialize_none();
        };
        let mut v = serde_json::to_value(spec).map_err(serde::ser::Error::custom)?;
        without_nulls(&mut v);
        let steps = match spec {
            crate::provider::described::ProviderSpec::Http(h) => h.rate_steps.clone(),
            crate::provider::described::ProviderSpec::Echo => Vec::new(),
        };
        let rates: Vec<SiteRule> = (c.provider_rates.iter().enumerate())
            .map(|(i, r)| {
                let counted = steps.get(i).cloned().flatten();
                SiteRule(r, counted.map(|s| s.iter().map(|n| n + 1).collect()))
            })
            .collect();
        if let Some(map) = v.as_object_mut()
            && !rates.is_empty()
        {
            let rates = serde_json::to_value(rates).map_err(serde::ser::Error::custom)?;
            map.insert("rate_limits".to_owned(), rates);
        }
        v.serialize(s)
    }
}

/// `store`: `lock_timeout_ms`, `max_files` and `max_bytes` are the file store's alone, and
/// refused beside another kind.
struct Store<'a>(&'a StoreConfig);

impl Serialize for Store<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = serde_json::to_value(self.0).map_err(serde::ser::Error::custom)?;
        if !matches!(self.0.kind, StoreKind::File { .. })
            && let Some(map) = v.as_object_mut()
        {
            for field in ["lock_timeout_ms", "max_files", "max_bytes"] {
                map.remove(field);
            }
        }
        v.serialize(s)
    }
}

/// Drops the provider's and its steps' fields that hold nothing (`"preset": null`): the file
/// leaves them out, and some are refused as null. A value compared with (`"equals": null`) is
/// kept.
fn without_nulls(v: &mut serde_json::Value) {
    let Some(provider) = v.as_object_mut() else {
        return;
    };
    provider.retain(|_, v| !v.is_null());
    if let Some(steps) = provider.get_mut("steps").and_then(|s| s.as_array_mut()) {
        for step in steps.iter_mut().filter_map(|s| s.as_object_mut()) {
            step.retain(|_, v| !v.is_null());
        }
    }
}

#[derive(Serialize)]
struct Cache {
    ttl_secs: u64,
}

#[derive(Serialize)]
struct Request {
    max_body_bytes: u64,
    max_links: u32,
}

#[derive(Serialize)]
struct Fastcgi {
    max_requests: u32,
}

impl Serialize for Config {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("provider", &Provider { config: self })?;
        map.serialize_entry("store", &Store(&self.store))?;
        let rules: Vec<RuleEntry> = (self.rules.iter())
            .map(|rule| RuleEntry {
                rule,
                shadow: false,
            })
            .chain(
                self.shadow_rules
                    .iter()
                    .map(|rule| RuleEntry { rule, shadow: true }),
            )
            .collect();
        map.serialize_entry("rules", &rules)?;
        map.serialize_entry("spend", &site_rules(self.budget()))?;
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
            max_links: self.max_links,
        };
        map.serialize_entry("request", &request)?;
        if let Some(max) = self.max_file_bytes {
            map.serialize_entry("max_file_bytes", &max)?;
        }
        let fastcgi = Fastcgi {
            max_requests: self.fastcgi_max_requests,
        };
        map.serialize_entry("fastcgi", &fastcgi)?;
        map.serialize_entry("allowed_origins", &self.allowed_origins)?;
        map.serialize_entry("api_keys", &self.api_keys)?;
        map.serialize_entry("journal", &self.journal)?;
        if let Some(share) = self.tighten_spend_above {
            map.serialize_entry(
                "account",
                &serde_json::json!({"tighten_spend_above": share}),
            )?;
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
        if let Some(c) = &self.challenge {
            map.serialize_entry("challenge", &challenge(c))?;
        }
        map.end()
    }
}

/// The `challenge` section as written, the secret masked by its own type.
fn challenge(c: &crate::challenge::Settings) -> serde_json::Value {
    serde_json::json!({
        "site_key": c.site_key,
        "secret": c.secret,
        "when": c.when.word(),
        "verify_url": c.verify_url,
        "script_url": c.script_url,
        "action": c.action,
        "hostnames": c.hostnames,
        "remember_secs": c.remember_secs,
        "extra": c.extra.limit.get(),
        "extra_window_secs": c.extra.window_secs.get(),
        "busy_share": c.busy_share,
        "on_error": match c.on_error {
            crate::challenge::OnError::Deny => "deny",
            crate::challenge::OnError::Allow => "allow",
        },
        "timeout_ms": c.timeout_ms,
    })
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

#[cfg(test)]
mod round_trip;

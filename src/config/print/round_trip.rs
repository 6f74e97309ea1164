//! What `resolve check` (and `serve`) print as the effective configuration reads back as the
//! same configuration: every section, each store and provider form, secrets aside (they are
//! printed as the mask, and put back here by where they stand before reading the text again).

use std::path::Path;

use serde_json::Value;

use crate::config::Config;

const BASE: &str = "/home/u/resolve";

/// A valid Argon2id hash at the cost `hash-password` uses (made once; it takes a moment).
fn password_hash() -> String {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| crate::support::password::hash("a long test password", &[7; 16]).unwrap())
        .clone()
}

/// Parses `text`, prints it, checks that no secret is in the print (`hidden`), puts each
/// secret's field back as written (`secrets`: JSON Pointer and value) and reads the print
/// again.
fn round_trip(text: &str, secrets: &[(&str, &str)], hidden: &[&str]) {
    let base = Path::new(BASE);
    let config = Config::from_json(text, base).unwrap_or_else(|e| panic!("{text}: {e}"));
    let printed = config.masked_json();
    let shown = printed.to_string();
    for secret in hidden {
        assert!(!shown.contains(secret), "{secret} is printed: {shown}");
    }
    let mut restored = printed.clone();
    for (pointer, secret) in secrets {
        let slot = restored
            .pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer} is not printed: {shown}"));
        assert!(
            slot.as_str().is_some_and(|s| s.contains("***")),
            "{pointer} is not masked: {slot}"
        );
        *slot = Value::String((*secret).to_owned());
    }
    let again = Config::from_json(&restored.to_string(), base)
        .unwrap_or_else(|e| panic!("the printed form does not read back: {e}\n{shown}"));
    assert_eq!(again, config, "read back differently from\n{shown}");
    assert_eq!(
        again.masked_json(),
        printed,
        "printed differently the second time"
    );
}

#[test]
fn no_file_at_all() {
    round_trip("{}", &[], &[]);
}

#[test]
fn every_preset_with_its_rate_limits_and_a_budget() {
    for preset in crate::provider::presets::NAMES {
        round_trip(
            &format!(
                r#"{{"provider": {{"preset": "{preset}", "token": "tok-5e6f7a8b9c"}},
                    "spend": [{{"name": "day", "limit": 100, "window_secs": 86400}},
                              {{"name": "month", "limit": 1500, "window_secs": 2592000}}]}}"#
            ),
            &[("/provider/token", "tok-5e6f7a8b9c")],
            &["tok-5e6f7a8b9c"],
        );
    }
}

#[test]
fn a_preset_with_the_owners_changes() {
    round_trip(
        r#"{"provider": {"preset": "realdebrid", "token": "tok-1a2b3c4d5e", "remote": true,
                         "timeout_ms": 20000, "deadline_ms": 30000,
                         "rate_limits": [{"name": "provider-minute", "limit": 100, "window_secs": 60}],
                         "errors": {"auth": [8, "9"], "quota": ["18"]}}}"#,
        &[("/provider/token", "tok-1a2b3c4d5e")],
        &["tok-1a2b3c4d5e"],
    );
}

#[test]
fn the_echo_provider() {
    round_trip(r#"{"provider": {"kind": "echo"}}"#, &[], &[]);
}

#[test]
fn a_custom_provider_in_one_call() {
    round_trip(
        r#"{"provider": {"kind": "http", "url": "https://api.example.com/unlock", "method": "POST",
                         "token": "tok-0f0e0d0c0b", "auth": {"header": "Authorization", "prefix": "Bearer "},
                         "link": {"form": "link"}, "download": "/download", "filename": "/filename",
                         "success": {"pointer": "/error", "equals": null},
                         "error_message": "/error", "error_code": "/error_code"}}"#,
        &[("/provider/token", "tok-0f0e0d0c0b")],
        &["tok-0f0e0d0c0b"],
    );
}

#[test]
fn a_custom_provider_in_steps_with_polling() {
    round_trip(
        r#"{"provider": {"kind": "http", "base_url": "https://api.example.com/v2",
                         "token": "tok-9a8b7c6d5e",
                         "steps": [
                           {"method": "POST", "url": "{base}/jobs", "form": {"link": "{link}"},
                            "headers": {"Authorization": "Bearer {token}"},
                            "extract": {"job": "/id", "download": ["/now/url", "/url"]}},
                           {"method": "GET", "url": "{base}/jobs/{job}", "when": "job",
                            "query": {"key": "{token}"},
                            "poll": {"interval_ms": 1500, "until": {"pointer": "/state", "equals": "done"},
                                     "fail": {"pointer": "/state", "equals": "failed"}},
                            "extract": {"download": "/url", "filename": "/name"}}],
                         "errors": {"dead_link": ["GONE"], "rate_limit": [429]},
                         "error_messages": {"quota": ["fair use limit"]},
                         "statuses": {"unavailable": [503]},
                         "advice": {"auth": "put a new key in provider.token"},
                         "rate_limits": [{"name": "provider-second", "limit": 5, "window_secs": 1}],
                         "connect_timeout_ms": 3000, "timeout_ms": 10000, "deadline_ms": 30000}}"#,
        &[("/provider/token", "tok-9a8b7c6d5e")],
        &["tok-9a8b7c6d5e"],
    );
}

#[test]
fn rules_of_every_kind_algorithm_and_mode() {
    round_trip(
        r#"{"store": {"kind": "redis", "host": "127.0.0.1", "port": 6380},
            "rules": [
              {"name": "ip", "key": "ip", "limit": 30, "window_secs": 60},
              {"name": "ip-day", "key": "ip", "algorithm": "sliding", "limit": 300, "window_secs": 86400},
              {"name": "per-key", "key": "api_key", "limit": 100, "window_secs": 3600},
              {"name": "site", "key": "global", "limit": 1000, "window_secs": 60},
              {"name": "legacy", "key": "ip", "algorithm": "sliding", "limit": 10, "window_secs": 60,
               "key_template": "resolve:{ip}"},
              {"name": "trial", "key": "ip", "limit": 5, "window_secs": 60, "mode": "shadow"},
              {"name": "ip-bytes", "key": "ip", "unit": "bytes", "limit": 20000000000, "window_secs": 86400},
              {"name": "site-bytes", "key": "global", "unit": "bytes", "limit": 1048576, "window_secs": 3600}],
            "max_file_bytes": 10000000000,
            "spend": [{"name": "day", "limit": 500, "window_secs": 86400},
                      {"name": "day-bytes", "unit": "bytes", "limit": 500000000000, "window_secs": 86400}]}"#,
        &[],
        &[],
    );
}

#[test]
fn the_file_store_with_every_setting() {
    round_trip(
        r#"{"store": {"kind": "file", "dir": "data", "on_error": "deny", "sweep_one_in": 50,
                      "sweep_budget_ms": 3, "sweep_grace_secs": 120, "deny_retry_after_secs": 10,
                      "lock_timeout_ms": 500, "max_files": 5000, "max_bytes": 33554432}}"#,
        &[],
        &[],
    );
}

#[test]
fn the_mysql_store_by_url_and_by_fields() {
    round_trip(
        r#"{"store": {"kind": "mysql", "url": "mysql://site:pw-77aa11bb@db.example:3307/limits",
                      "table": "events", "counter_table": "counters", "cache_table": "cache",
                      "journal_table": "journal", "notes_table": "notes", "events_ts": "datetime",
                      "connect_timeout_ms": 800, "read_timeout_ms": 1500, "tls": true,
                      "on_error": "deny"}}"#,
        &[(
            "/store/url",
            "mysql://site:pw-77aa11bb@db.example:3307/limits",
        )],
        &["pw-77aa11bb"],
    );
    round_trip(
        r#"{"store": {"kind": "mysql", "host": "127.0.0.1", "port": 3306, "user": "site",
                      "password": "pw-2-cc33dd", "database": "limits"}}"#,
        &[("/store/password", "pw-2-cc33dd")],
        &["pw-2-cc33dd"],
    );
    round_trip(
        r#"{"store": {"kind": "mysql", "socket": "/run/mysqld/mysqld.sock", "user": "site",
                      "database": "limits"}}"#,
        &[],
        &[],
    );
}

#[test]
fn the_redis_store_by_url_and_by_socket() {
    round_trip(
        r#"{"store": {"kind": "redis", "url": "redis://:rd-99ee88ff@cache.example:6390/3",
                      "connect_timeout_ms": 400, "read_timeout_ms": 700}}"#,
        &[("/store/password", "rd-99ee88ff")],
        &["rd-99ee88ff"],
    );
    round_trip(
        r#"{"store": {"kind": "redis", "url": "rediss://app:rd-tls-1a2b@cache.example:6380/1",
                      "ca_file": "provider-ca.pem"}}"#,
        &[("/store/password", "rd-tls-1a2b")],
        &["rd-tls-1a2b"],
    );
    round_trip(
        r#"{"store": {"kind": "mysql", "host": "db.example", "user": "site",
                      "password": "pw-3-ee44ff", "database": "limits",
                      "ca_file": "/etc/ssl/provider-ca.pem"}}"#,
        &[("/store/password", "pw-3-ee44ff")],
        &["pw-3-ee44ff"],
    );
    round_trip(
        r#"{"store": {"kind": "redis", "socket": "/home/u/redis.sock", "db": 2}}"#,
        &[],
        &[],
    );
}

#[test]
fn the_client_section_with_a_network_by_name_and_ranges() {
    round_trip(
        r#"{"client": {"ipv6_prefix": 56, "forwarded_header": "CF-Connecting-IP",
                       "trusted_proxies": ["cloudflare", "10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]}}"#,
        &[],
        &[],
    );
}

#[test]
fn blocks_allows_and_automatic_blocks() {
    round_trip(
        r#"{"block": ["203.0.113.7", "198.51.100.0/24", "2001:db8:1::/48"],
            "allow": ["192.0.2.1", "::1"],
            "auto_block": {"refusals": 20, "window_secs": 600, "block_secs": 3600}}"#,
        &[],
        &[],
    );
}

#[test]
fn api_keys_with_their_own_rules() {
    round_trip(
        r#"{"api_keys": {"header": "X-Site-Key", "require": true,
                         "keys": [
                           {"name": "partner", "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                            "rules": [{"name": "partner-minute", "key": "api_key", "limit": 300, "window_secs": 60}]},
                           {"name": "tool", "sha256": "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"}]}}"#,
        &[],
        &[],
    );
}

#[test]
fn the_owners_page_dashboard_and_the_rest() {
    let hash = password_hash();
    round_trip(
        &format!(
            r#"{{"page": {{"site_name": "Example Links", "contact": "owner@example.com",
                         "terms_url": "https://example.com/terms"}},
                "admin": {{"password_hash": "{hash}"}},
                "allowed_origins": ["https://example.com", "https://www.example.com"],
                "cache": {{"ttl_secs": 600}}, "request": {{"max_body_bytes": 4096}},
                "fastcgi": {{"max_requests": 500}}, "journal": false}}"#
        ),
        &[("/admin/password_hash", &hash)],
        &[&hash],
    );
}

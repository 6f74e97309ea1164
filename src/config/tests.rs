//! The configuration's checks: what each section accepts, and what it refuses with which fix.
//!
//! Long because every section is checked here end to end, from the text an owner writes to the
//! settings the program runs with: one place to read what each field accepts.

use super::*;
use crate::store::settings::{OnError, StoreKind};

/// The configuration `text` checked, for a site in `/home/u/resolve`.
pub(crate) fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_json(text, Path::new("/home/u/resolve"))
}

#[test]
fn no_file_means_safe_defaults() {
    let c = Config::defaults(Path::new("/home/u/resolve"));
    assert_eq!(c.provider, None);
    assert_eq!(c.rules, vec![default_rule()]);
    assert_eq!(c.rules[0].limit.get(), 30);
    assert_eq!(c.rules[0].window_secs.get(), 60);
    assert_eq!(
        c.store.kind,
        StoreKind::File {
            dir: "/home/u/resolve/ratelimit".into()
        }
    );
    assert_eq!(c.store.on_error, OnError::Allow);
    assert_eq!(c.client.ipv6_prefix, 64);
    assert_eq!(c.max_body_bytes, 8192);
    assert_eq!(c.max_links, 20);
    assert_eq!(parse("{}").unwrap(), c);
}

#[test]
fn a_full_http_provider() {
    let c = parse(
        r#"{"provider": {"kind": "http", "url": "https://api.example/unrestrict",
            "token": "s3cret", "download": "/download", "filename": "/filename",
            "success": {"pointer": "/status", "equals": "success"}},
            "store": {"dir": "/var/data", "on_error": "deny"},
            "rules": [{"name": "ip", "key": "ip", "limit": 5, "window_secs": 10},
                      {"name": "site", "key": "global", "limit": 100, "window_secs": 86400}],
            "client": {"trusted_proxies": ["10.0.0.0/8"], "forwarded_header": "CF-Connecting-IP"}}"#,
    )
    .unwrap();
    let Some(ProviderSpec::Http(h)) = &c.provider else {
        panic!("{c:?}")
    };
    // The one-call shorthand becomes one step: POST, Bearer token, link in a form field.
    let step = &h.steps[0];
    assert_eq!(step.method, crate::provider::spec::HttpMethod::Post);
    assert_eq!(step.headers[0].0, "Authorization");
    assert_eq!(step.headers[0].1.0, "Bearer {token}");
    assert_eq!(step.form[0].0, "link");
    assert_eq!(step.form[0].1.0, "{link}");
    assert_eq!(
        step.extract[0],
        ("download".to_owned(), vec!["/download".to_owned()])
    );
    assert_eq!(
        c.store.kind,
        StoreKind::File {
            dir: "/var/data".into()
        }
    );
    assert_eq!(c.rules.len(), 2);
    assert_eq!(c.secrets(), vec!["s3cret".to_owned()]);
    let shown = c.masked_json().to_string();
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("\"***\""));
}

#[test]
fn relative_data_dirs_are_beside_the_file() {
    let c = parse(r#"{"store": {"dir": "data"}}"#).unwrap();
    assert_eq!(
        c.store.kind,
        StoreKind::File {
            dir: "/home/u/resolve/data".into()
        }
    );
}

#[test]
fn mistakes_name_the_field_and_the_fix() {
    let cases = [
        (
            r#"{"rules": [{"name": "ip", "key": "ip", "limit": 0, "window_secs": 60}]}"#,
            "rules[0].limit",
        ),
        (
            r#"{"rules": [{"name": "ip", "key": "ip", "limit": 5, "window_secs": 0}]}"#,
            "rules[0].window_secs",
        ),
        (
            r#"{"rules": [{"name": "IP!", "key": "ip", "limit": 5, "window_secs": 1}]}"#,
            "rules[0].name",
        ),
        (
            r#"{"rules": [{"name": "a", "key": "user", "limit": 5, "window_secs": 1}]}"#,
            "rules[0].key",
        ),
        (
            r#"{"rules": [{"name": "a", "key": "ip", "limit": 5, "window_secs": 1},
                          {"name": "a", "key": "ip", "limit": 5, "window_secs": 1}]}"#,
            "rules[1].name",
        ),
        (r#"{"client": {"ipv6_prefix": 0}}"#, "client.ipv6_prefix"),
        (
            r#"{"api_keys": {"header": "Authorization"}}"#,
            "api_keys.header",
        ),
        (
            r#"{"api_keys": {"header": "X_Api_Key"}}"#,
            "api_keys.header",
        ),
        (
            r#"{"api_keys": {"keys": [{"name": "a", "sha256": "my-secret-key"}]}}"#,
            "api_keys.keys[0].sha256",
        ),
        (
            r#"{"api_keys": {"keys": [{"name": "A!", "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}}"#,
            "api_keys.keys[0].name",
        ),
        (
            r#"{"api_keys": {"keys": [{"name": "a", "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "rules": [{"name": "r", "key": "ip", "limit": 1, "window_secs": 1}]}]}}"#,
            "api_keys.keys[0].rules[0].key",
        ),
        (
            r#"{"api_keys": {"keys": [{"name": "a", "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, {"name": "a", "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}}"#,
            "api_keys.keys[1].name",
        ),
        (
            r#"{"rules": [{"name": "a", "key": "ip", "algorithm": "leaky", "limit": 5, "window_secs": 1}]}"#,
            "rules[0].algorithm",
        ),
        (
            r#"{"rules": [{"name": "a", "key": "ip", "algorithm": "sliding", "limit": 5, "window_secs": 1}]}"#,
            "rules[0].algorithm",
        ),
        (
            r#"{"client": {"trusted_proxies": ["10.0.0.0/33"]}}"#,
            "client.trusted_proxies[0]",
        ),
        (
            r#"{"client": {"forwarded_header": "X Forwarded"}}"#,
            "client.forwarded_header",
        ),
        (r#"{"store": {"on_error": "maybe"}}"#, "store.on_error"),
        (r#"{"store": {"kind": "memcached"}}"#, "store.kind"),
        (
            r#"{"request": {"max_body_bytes": 0}}"#,
            "request.max_body_bytes",
        ),
        (r#"{"request": {"max_links": 0}}"#, "request.max_links"),
        (r#"{"request": {"max_links": 101}}"#, "request.max_links"),
        (
            r#"{"fastcgi": {"max_requests": 0}}"#,
            "fastcgi.max_requests",
        ),
        (
            r#"{"store": {"lock_timeout_ms": 0}}"#,
            "store.lock_timeout_ms",
        ),
        (
            r#"{"store": {"kind": "mysql", "host": "h", "user": "u", "database": "d", "cache_table": "a-b"}}"#,
            "store.cache_table",
        ),
        (
            r#"{"store": {"kind": "mysql", "host": "h", "user": "u", "database": "d", "journal_table": ""}}"#,
            "store.journal_table",
        ),
        (
            r#"{"store": {"kind": "mysql", "host": "h", "user": "u", "database": "d", "notes_table": "rate_cache"}}"#,
            "store.counter_table",
        ),
        (
            r#"{"store": {"kind": "file", "notes_table": "n"}}"#,
            "store.notes_table",
        ),
        (
            r#"{"store": {"kind": "redis", "lock_timeout_ms": 100}}"#,
            "store.lock_timeout_ms",
        ),
        (r#"{"store": {"max_files": 1999}}"#, "store.max_files"),
        (r#"{"store": {"max_bytes": 1048576}}"#, "store.max_bytes"),
        (
            r#"{"store": {"kind": "redis", "max_files": 5000}}"#,
            "store.max_files",
        ),
        (r#"{"provider": {"kind": "magic"}}"#, "provider.kind"),
        (
            r#"{"provider": {"kind": "http", "download": "/d"}}"#,
            "provider.url",
        ),
        (
            r#"{"provider": {"kind": "http", "url": "http://api.example/x", "download": "/d"}}"#,
            "provider.url",
        ),
        (
            r#"{"provider": {"kind": "http", "url": "https://a.example/x"}}"#,
            "provider.download",
        ),
        (
            r#"{"provider": {"kind": "http", "url": "https://a.example/x", "download": "data.link"}}"#,
            "provider.download",
        ),
        (
            r#"{"provider": {"kind": "http", "url": "https://a.example/x", "download": "/d", "auth": {"query": "apikey"}}}"#,
            "provider.token",
        ),
        (
            r#"{"provider": {"kind": "http", "url": "https://a.example/x", "download": "/d", "method": "GET", "link": {"form": "link"}}}"#,
            "provider.link.form",
        ),
        (
            r#"{"provider": {"kind": "http", "url": "https://a.example/x", "download": "/d", "timeout_ms": 120000}}"#,
            "provider.timeout_ms",
        ),
    ];
    for (text, field) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
        assert!(e.message.len() > 10, "{e}");
    }
}

#[test]
fn typos_and_bad_json_are_reported_with_a_position() {
    let e = parse(r#"{"rules": [{"name": "ip", "key": "ip", "limt": 5, "window_secs": 1}]}"#)
        .unwrap_err();
    assert!(e.message.contains("limt"), "{e}");
    assert!(e.field.starts_with("line 1"), "{e}");
    let e = parse("{\n  \"store\": {\"dir\": \"x\",}\n}").unwrap_err();
    assert!(e.field.starts_with("line 2"), "{e}");
}

#[test]
fn errors_never_quote_a_value() {
    for (text, field) in [
        (
            r#"{"store": {"kind": "mysql", "password": 20240917}}"#,
            "20240917",
        ),
        (
            r#"{"provider": {"kind": "http", "token": 987654321}}"#,
            "987654321",
        ),
        (r#"{"store": {"kind": "redis", "url": 31337}}"#, "31337"),
        (
            r#"{"provider": {"kind": "http", "token": "a\"b/c", "auth": "a\"b/c"}}"#,
            "b/c",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(!e.contains(field), "{text}: {e}");
        assert!(
            e.contains("invalid type") || e.contains("***"),
            "{text}: {e}"
        );
    }
    assert_eq!(
        without_quoted_value("invalid type: integer `20240917`, expected a string at line 1"),
        "invalid type: integer, expected a string at line 1"
    );
    assert_eq!(
        without_quoted_value("unknown field `tokn`, expected one of `a`, `b`"),
        "unknown field `tokn`, expected one of `a`, `b`"
    );
}

#[test]
fn errors_about_a_misplaced_secret_do_not_quote_it() {
    let e =
        parse(r#"{"provider": {"kind": "http", "token": "hunter22", "timeout_ms": "hunter22"}}"#)
            .unwrap_err();
    assert!(e.message.contains("invalid type"), "{e}");
    assert!(!e.to_string().contains("hunter22"), "{e}");
}

#[test]
fn redis_urls() {
    let redis = |store: &str| {
        parse(&format!(r#"{{"store": {store}}}"#)).map(|c| match c.store.kind {
            StoreKind::Redis(r) => *r,
            other => panic!("{other:?}"),
        })
    };
    let r = redis(r#"{"kind": "redis", "url": "redis://:p%40ss@127.0.0.1:6380/2"}"#).unwrap();
    assert_eq!(
        r.target,
        crate::store::redis::resp::Target::Tcp {
            host: "127.0.0.1".into(),
            port: 6380
        }
    );
    assert_eq!(
        (r.username, r.password.unwrap().expose(), r.db),
        (None, "p@ss", 2)
    );
    let r = redis(r#"{"kind": "redis", "url": "unix://app:pw@/run/redis.sock?db=3"}"#).unwrap();
    assert_eq!(
        r.target,
        crate::store::redis::resp::Target::Unix {
            socket: "/run/redis.sock".into()
        }
    );
    assert_eq!((r.username.as_deref(), r.db), (Some("app"), 3));
    let r = redis(r#"{"kind": "redis", "url": "redis://[::1]"}"#).unwrap();
    assert_eq!(
        r.target,
        crate::store::redis::resp::Target::Tcp {
            host: "::1".into(),
            port: 6379
        }
    );
    let r = redis(r#"{"kind": "redis", "url": "rediss://u:p@cache.example:6380/1"}"#).unwrap();
    assert_eq!(
        r.target,
        crate::store::redis::resp::Target::Tls {
            host: "cache.example".into(),
            port: 6380,
            ca_file: None,
        }
    );
    assert_eq!((r.username.as_deref(), r.db), (Some("u"), 1));
    let r = redis(r#"{"kind": "redis", "host": "cache.example", "ca_file": "ca.pem"}"#).unwrap();
    let crate::store::redis::resp::Target::Tls { ca_file, .. } = &r.target else {
        panic!("{:?}", r.target)
    };
    assert!(ca_file.as_ref().unwrap().ends_with("ca.pem"));
    let r = redis(r#"{"kind": "redis", "host": "cache.example", "tls": true}"#).unwrap();
    assert!(matches!(
        r.target,
        crate::store::redis::resp::Target::Tls { ca_file: None, .. }
    ));
    let r = redis(r#"{"kind": "redis", "url": "rediss://h:1/0", "host": "other"}"#).unwrap();
    assert!(
        matches!(&r.target, crate::store::redis::resp::Target::Tls { host, .. } if host == "other")
    );
    let r = redis(r#"{"kind": "redis", "host": "localhost", "password": "x"}"#).unwrap();
    assert_eq!(
        r.target,
        crate::store::redis::resp::Target::Tcp {
            host: "localhost".into(),
            port: 6379
        }
    );
    for (bad, field) in [
        (r#"{"kind": "redis"}"#, "store"),
        (
            r#"{"kind": "redis", "url": "redis+tls://h:1/0"}"#,
            "store.url",
        ),
        (
            r#"{"kind": "redis", "url": "redis://h:1/0", "ca_file": "ca.pem"}"#,
            "store.ca_file",
        ),
        (
            r#"{"kind": "redis", "socket": "/run/r.sock", "ca_file": "ca.pem"}"#,
            "store.ca_file",
        ),
        (
            r#"{"kind": "redis", "host": "h", "ca_file": ""}"#,
            "store.ca_file",
        ),
        (
            r#"{"kind": "redis", "url": "rediss://h:1/0", "tls": false}"#,
            "store.tls",
        ),
        (
            r#"{"kind": "redis", "socket": "/run/r.sock", "tls": true}"#,
            "store.tls",
        ),
        (
            r#"{"kind": "redis", "url": "redis://h:port/0"}"#,
            "store.url",
        ),
        (
            r#"{"kind": "redis", "url": "unix://relative.sock"}"#,
            "store.url",
        ),
        (
            r#"{"kind": "redis", "url": "redis://h/0?timeout=1"}"#,
            "store.url",
        ),
        (r#"{"kind": "redis", "host": "h", "db": 99}"#, "store.db"),
        (
            r#"{"kind": "redis", "host": "h", "user": "u"}"#,
            "store.password",
        ),
        (r#"{"kind": "redis", "host": "h", "dir": "d"}"#, "store.dir"),
        (r#"{"kind": "file", "host": "h"}"#, "store.host"),
    ] {
        assert_eq!(redis(bad).unwrap_err().field, field, "{bad}");
    }
    let c = parse(r#"{"store": {"kind": "redis", "url": "redis://:sekrit@h:1/0"}}"#).unwrap();
    assert_eq!(c.secrets(), vec!["sekrit".to_owned()]);
    assert!(!c.masked_json().to_string().contains("sekrit"));
}

#[test]
fn redis_cluster_seeds() {
    let redis = |store: &str| {
        parse(&format!(r#"{{"store": {store}}}"#)).map(|c| match c.store.kind {
            StoreKind::Redis(r) => *r,
            other => panic!("{other:?}"),
        })
    };
    let r = redis(
        r#"{"kind": "redis", "cluster_nodes": ["10.0.0.1:7000", "[::1]:7001"], "user": "u", "password": "p"}"#,
    )
    .unwrap();
    assert!(r.is_cluster());
    assert_eq!(
        r.cluster_nodes,
        [("10.0.0.1".to_owned(), 7000), ("::1".to_owned(), 7001)]
    );
    // The first seed stands for the target where no URL names one.
    assert_eq!(
        r.target,
        crate::store::redis::resp::Target::Tcp {
            host: "10.0.0.1".into(),
            port: 7000
        }
    );
    // Over TLS: a rediss:// URL, or `tls` beside the seeds, makes every node's target TLS.
    for store in [
        r#"{"kind": "redis", "url": "rediss://u:p@10.0.0.9:7005", "cluster_nodes": ["10.0.0.1:7000"]}"#,
        r#"{"kind": "redis", "tls": true, "cluster_nodes": ["10.0.0.9:7005"], "user": "u", "password": "p"}"#,
    ] {
        let r = redis(store).unwrap();
        assert!(r.is_cluster(), "{store}");
        assert_eq!(
            r.target,
            crate::store::redis::resp::Target::Tls {
                host: "10.0.0.9".into(),
                port: 7005,
                ca_file: None
            },
            "{store}"
        );
    }
    let r = redis(
        r#"{"kind": "redis", "url": "redis://u:p%40ss@10.0.0.9:7005", "cluster_nodes": ["10.0.0.1:7000"]}"#,
    )
    .unwrap();
    assert_eq!(r.password.as_ref().map(|p| p.expose()), Some("p@ss"));
    let shown = serde_json::to_string(&r).unwrap();
    assert!(
        shown.contains(r#""cluster_nodes":["10.0.0.1:7000"]"#),
        "{shown}"
    );
    for (bad, field, fix) in [
        (
            r#"{"kind": "redis", "cluster_nodes": []}"#,
            "store.cluster_nodes",
            "at least one",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["h"]}"#,
            "store.cluster_nodes",
            "HOST:PORT",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["h:0"]}"#,
            "store.cluster_nodes",
            "1 to 65535",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": [":7000"]}"#,
            "store.cluster_nodes",
            "HOST:PORT",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["a:b:7000"]}"#,
            "store.cluster_nodes",
            "[ADDRESS]:PORT",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["h:1"], "host": "h"}"#,
            "store.host",
            "cluster_nodes",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["h:1"], "socket": "/s"}"#,
            "store.socket",
            "cluster_nodes",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["h:1"], "db": 2}"#,
            "store.db",
            "only database 0",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["h:1"], "url": "redis://h:1/3"}"#,
            "store.url",
            "only database 0",
        ),
        (
            r#"{"kind": "redis", "cluster_nodes": ["h:1"], "url": "unix:///s.sock"}"#,
            "store.url",
            "over TCP",
        ),
        (
            r#"{"kind": "mysql", "cluster_nodes": ["h:1"]}"#,
            "store.cluster_nodes",
            "does not apply",
        ),
    ] {
        let e = redis(bad).unwrap_err();
        assert_eq!(e.field, field, "{bad}");
        assert!(e.to_string().contains(fix), "{bad}: {e}");
    }
    let many: Vec<String> = (1..=17).map(|p| format!("\"h:{p}\"")).collect();
    let e = redis(&format!(
        r#"{{"kind": "redis", "cluster_nodes": [{}]}}"#,
        many.join(",")
    ))
    .unwrap_err();
    assert!(e.to_string().contains("16 seeds are enough"), "{e}");
}

#[test]
fn plain_http_only_on_this_machine() {
    for url in [
        "http://127.0.0.1:9000/x",
        "http://localhost/x",
        "http://[::1]:80/x",
    ] {
        let text =
            format!(r#"{{"provider": {{"kind": "http", "url": "{url}", "download": "/d"}}}}"#);
        assert!(parse(&text).is_ok(), "{url}");
    }
}

#[test]
fn a_mistake_says_where_it_is_written() {
    let e = parse("{\n  \"store\": {\"dir\": \"d\"},\n  \"rules\": [{\"name\": \"ip\", \"key\": \"ip\",\n    \"limit\": 0, \"window_secs\": 60}]\n}")
        .unwrap_err();
    assert_eq!(e.field, "rules[0].limit");
    assert_eq!(e.at, Some((4, 5)));
    assert!(
        e.to_string()
            .starts_with("rules[0].limit (line 4, column 5): "),
        "{e}"
    );
}

#[test]
fn several_providers_are_listed_in_order_and_one_provider_reads_as_before() {
    let listed = r#"{"providers": [
        {"preset": "realdebrid", "token": "A", "spend": [{"name": "rd-day", "limit": 100, "window_secs": 86400}]},
        {"preset": "alldebrid", "token": "B"}],
        "spend": [{"name": "day", "limit": 500, "window_secs": 86400}]}"#;
    for c in [
        parse(listed).unwrap(),
        Config::for_one_request(listed, Path::new("/home/u/resolve")).unwrap(),
    ] {
        let names: Vec<&str> = c.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["realdebrid", "alldebrid"]);
        assert_eq!(c.provider.as_ref(), Some(&c.services[0].spec));
        // The first service's rates lead `spend`, as with `provider`; its own spend is apart.
        let spend: Vec<&str> = c.spend.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(spend, ["provider-minute", "day"]);
        assert_eq!(c.provider_rate_limits, 1);
        assert_eq!(c.services[0].spend[0].name.as_str(), "rd-day");
        let mut secrets = c.secrets();
        secrets.sort();
        assert_eq!(secrets, ["A", "B"]);
    }
    let one = parse(r#"{"provider": {"preset": "realdebrid", "token": "A"}}"#).unwrap();
    assert!(one.services.is_empty());
    assert!(one.provider.is_some());
}

#[test]
fn provider_and_providers_together_and_shared_names_are_refused() {
    let e = parse(
        r#"{"provider": {"preset": "realdebrid", "token": "A"},
            "providers": [{"preset": "alldebrid", "token": "B"}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.field, "providers");
    assert!(e.message.contains("not both"), "{e}");
    let e = parse(
        r#"{"providers": [
            {"preset": "realdebrid", "token": "A", "spend": [{"name": "day", "limit": 9, "window_secs": 60}]},
            {"preset": "alldebrid", "token": "B"}],
            "spend": [{"name": "day", "limit": 500, "window_secs": 86400}]}"#,
    )
    .unwrap_err();
    assert!(e.message.contains("\"day\" is used twice"), "{e}");
    let e = parse(
        r#"{"providers": [{"preset": "alldebrid", "token": "A"}, {"preset": "alldebrid", "token": "B"}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.field, "providers[1].name");
    // Two accounts of one service, named apart, count their rates apart.
    let c = parse(
        r#"{"providers": [{"preset": "alldebrid", "token": "A"}, {"preset": "alldebrid", "token": "B", "name": "ad-2"}]}"#,
    )
    .unwrap();
    assert_eq!(c.services[1].rates[0].name.as_str(), "ad-2-second");
}

#[test]
fn spend_tightens_past_fair_use_only_when_asked_and_within_a_share() {
    assert_eq!(parse("{}").unwrap().tighten_spend_above, None);
    let c = parse(r#"{"account": {"tighten_spend_above": 0.8}}"#).unwrap();
    assert_eq!(c.tighten_spend_above, Some(0.8));
    assert_eq!(c.masked_json()["account"]["tighten_spend_above"], 0.8);
    assert_eq!(
        parse(&c.masked_json().to_string())
            .unwrap()
            .tighten_spend_above,
        Some(0.8)
    );
    for bad in ["1.5", "0", "1", "-0.2"] {
        let e = parse(&format!(
            r#"{{"account": {{"tighten_spend_above": {bad}}}}}"#
        ))
        .unwrap_err();
        assert_eq!(e.field, "account.tighten_spend_above", "{bad}");
    }
    assert!(parse(r#"{"account": {"tighten": 0.8}}"#).is_err());
}

#[test]
fn an_account_section_names_a_fact_and_its_units() {
    let with = |account: &str| {
        parse(&format!(
            r#"{{"provider": {{"preset": "realdebrid", "token": "t", "account": {account}}}}}"#
        ))
    };
    assert!(with("null").is_ok());
    let e = with(r#"{"url": "{base}/user"}"#).unwrap_err();
    assert_eq!(e.field, "provider.account");
    let e =
        with(r#"{"url": "{base}/user", "fair_use": {"pointer": "/f", "unit": "gb"}}"#).unwrap_err();
    assert_eq!(e.field, "provider.account.fair_use.unit");
    let e = with(r#"{"url": "{base}/user", "premium_until": "until"}"#).unwrap_err();
    assert_eq!(e.field, "provider.account.premium_until");
    let e = with(r#"{"url": "{base}/{link}", "premium_until": "/u"}"#).unwrap_err();
    assert_eq!(e.field, "provider.account.url");
}

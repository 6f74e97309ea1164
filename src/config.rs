//! The configuration file: its JSON form, and the checked `Config` the program runs with. Every
//! mistake is reported with the field and what to write instead, before any request is served.

pub mod admin;
pub mod api_keys;
pub mod controls;
pub mod editor;
pub mod error;
pub mod locate;
pub mod page;
pub mod position;
pub mod print;
pub mod provider;
pub mod raw;
pub mod redact;
pub mod rules;
pub mod secrets;
pub mod starter;
pub mod store;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::config::controls::AutoBlock;
pub use crate::config::error::ConfigError;
use crate::config::error::err;
use crate::config::raw::RawConfig;
use crate::config::redact::{secret_strings, without_quoted_value};
pub use crate::config::rules::default_key_template;
use crate::core::rule::{Algorithm, KeyKind, Rule, RuleName};
use crate::http::api_key::KeyPolicy;
use crate::http::identity::ClientPolicy;
use crate::net::addr_set::AddrSet;
use crate::provider::spec::ProviderSpec;
use crate::store::settings::StoreConfig;
use crate::support::defaults;

/// The checked configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// None until the owner names one: every request then gets 503 "not configured".
    pub provider: Option<ProviderSpec>,
    pub store: StoreConfig,
    pub rules: Vec<Rule>,
    /// Site-wide limits on paid calls: the provider's published rate and the owner's budget
    /// (`spend`). Checked with `rules` before a paid call, and only then.
    pub spend: Vec<Rule>,
    /// How many of `spend`, from the start, are the provider's published rate limits; the rest
    /// are the owner's budget (see [`Config::budget`]).
    pub provider_rate_limits: usize,
    /// The provider's rates as its description declares them, before they were made to hold in
    /// every window for this store (what `resolve check` prints).
    pub provider_rates: Vec<Rule>,
    /// How long a resolved link is answered again without a new paid call (0: never).
    pub cache_ttl: Duration,
    pub client: ClientPolicy,
    /// Request header that carries the client address from a trusted proxy.
    pub forwarded_header: String,
    /// API keys: where they arrive, whether they are required, which are accepted.
    pub api_keys: KeyPolicy,
    pub max_body_bytes: u64,
    /// Sites whose pages may use the endpoint (`scheme://host[:port]`); empty: any.
    pub allowed_origins: Vec<String>,
    /// Requests one FastCGI process answers before it exits.
    pub fastcgi_max_requests: u32,
    /// The footer the owner shows visitors (site name, contact, terms link).
    pub page: crate::http::footer::Page,
    /// The owner's dashboard at `/admin`: None (off) unless a password hash is set.
    pub admin: Option<admin::Admin>,
    /// Where the program keeps its own small files whatever the store: the file store's
    /// directory, else `ratelimit/` beside the configuration. Outside the web root.
    pub data_dir: PathBuf,
    /// Whether requests are counted in the usage journal (`"journal": false` turns it off).
    pub journal: bool,
    /// Rules in shadow mode: counted, and what they would refuse reported, refusing nothing.
    pub shadow_rules: Vec<Rule>,
    /// Clients refused with 403 before anything is counted (`block`).
    pub block: AddrSet,
    /// Clients exempt from the `ip` rules (never from spend, API key or global rules).
    pub allow: AddrSet,
    /// Block a client refused this many times within a window, for a while.
    pub auto_block: Option<AutoBlock>,
    /// The file it was read from (set when a file is loaded): where the dashboard's setup and
    /// settings write. None for the defaults and for text checked on its own.
    pub file: Option<PathBuf>,
}

/// The rule that applies when the configuration names none.
pub fn default_rule() -> Rule {
    Rule {
        name: RuleName::new(defaults::RULE_NAME).expect("valid default name"),
        key: KeyKind::Ip,
        algorithm: Algorithm::Fixed,
        limit: NonZeroU32::new(defaults::RULE_LIMIT).expect("nonzero default"),
        window_secs: NonZeroU32::new(defaults::RULE_WINDOW_SECS).expect("nonzero default"),
        key_template: default_key_template(KeyKind::Ip),
    }
}

impl Config {
    /// The configuration with no file: safe defaults and no provider. `base` holds the data
    /// directory.
    pub fn defaults(base: &Path) -> Config {
        Config::from_raw(RawConfig::default(), base).expect("defaults are valid")
    }

    /// Parses and checks a configuration file's text. Relative paths are taken from `base`,
    /// the file's directory.
    pub fn from_json(text: &str, base: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| {
            // A name closed with a curly quote reads as an unknown field: every failure is
            // looked at for an editor's mistake.
            if let Some(named) = editor::mistake(text, e.line(), e.column()) {
                return named;
            }
            // serde quotes the offending value, which may be a secret in the wrong place (or a
            // password written as a number): the value is cut out, and what secrets the text
            // holds are masked in every form as well.
            let message = without_quoted_value(&e.to_string());
            let message = crate::support::secret::mask(
                &message,
                &crate::support::secret::all_forms(&secret_strings(text)),
            )
            .into_owned();
            err(
                format!("line {} column {}", e.line(), e.column()),
                format!("{message}; the file must be one JSON object (see README: Configuration)"),
            )
        })?;
        Config::from_raw(raw, base).map_err(|mut e| {
            e.at = position::of_field(text, &e.field);
            e
        })
    }

    /// The owner's budget: the `spend` limits they set, without the provider's rate limits.
    pub fn budget(&self) -> &[Rule] {
        &self.spend[self.provider_rate_limits.min(self.spend.len())..]
    }

    /// True when a paid provider is configured (not none, not the echo provider).
    pub fn pays(&self) -> bool {
        matches!(self.provider, Some(ProviderSpec::Http(_)))
    }

    fn from_raw(raw: RawConfig, base: &Path) -> Result<Config, ConfigError> {
        let (provider, rate_rules) = match raw.provider {
            None => (None, Vec::new()),
            Some(section) => {
                let (p, r) = crate::config::provider::parse(section)?;
                (Some(p), r)
            }
        };
        let provider_rate_limits = rate_rules.len();
        let provider_rates = rate_rules.clone();
        let mut spend = rate_rules;
        if let Some(list) = raw.spend {
            let raw_rules = crate::config::provider::site_rules::raw_site_rules(list, "spend")?;
            spend.extend(crate::config::provider::site_rules::site_rules(
                &raw_rules, "spend",
            )?);
        }
        let store = store::store(raw.store, base)?;
        // The provider's published rates hold in every window, not only in windows that start
        // at a first call.
        let sliding = !matches!(store.kind, crate::store::settings::StoreKind::File { .. });
        for r in &mut spend[..provider_rate_limits] {
            *r = crate::config::provider::site_rules::never_over(r, sliding);
        }
        let (rules, shadow_rules) = match raw.rules {
            None => (vec![default_rule()], Vec::new()),
            Some(list) => rules::site_rules(list, &spend)?,
        };
        rules::check_algorithms(&rules, &store.kind)?;
        rules::check_algorithms(&shadow_rules, &store.kind)?;
        for (i, r) in spend.iter().enumerate() {
            if rules.iter().any(|o| o.name == r.name) || spend[..i].iter().any(|o| o.name == r.name)
            {
                return Err(err(
                    "spend",
                    format!(
                        "the rule name {:?} is used twice (rules, spend and the provider's rate_limits share names)",
                        r.name.as_str()
                    ),
                ));
            }
        }
        let cache_ttl = Duration::from_secs(
            raw.cache
                .and_then(|c| c.ttl_secs)
                .unwrap_or(defaults::CACHE_TTL_SECS),
        );
        if cache_ttl > Duration::from_secs(7 * 24 * 3600) {
            return Err(err(
                "cache.ttl_secs",
                "must be at most 604800 (a week); 0 turns the cache off",
            ));
        }
        let api_keys = api_keys::api_keys(raw.api_keys, &store.kind)?;
        let mut allowed_origins = Vec::new();
        for (i, o) in raw.allowed_origins.unwrap_or_default().iter().enumerate() {
            allowed_origins.push(crate::http::origin::origin_of(o).ok_or_else(|| {
                err(
                    format!("allowed_origins[{i}]"),
                    format!("{o:?} is not a site: write it as the browser does, e.g. \"https://www.example.com\""),
                )
            })?);
        }
        let (client, forwarded_header) = controls::client(raw.client)?;
        let max_body_bytes = raw
            .request
            .and_then(|r| r.max_body_bytes)
            .unwrap_or(defaults::MAX_BODY_BYTES);
        if !(1..=1024 * 1024).contains(&max_body_bytes) {
            return Err(err(
                "request.max_body_bytes",
                "must be 1 to 1048576; a form with one link needs less than 3000",
            ));
        }
        let fastcgi_max_requests = u32::try_from(
            raw.fastcgi
                .and_then(|f| f.max_requests)
                .unwrap_or(defaults::FASTCGI_MAX_REQUESTS.into()),
        )
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            err(
                "fastcgi.max_requests",
                "must be 1 to 4294967295; 10000 (the default) renews each process now and then",
            )
        })?;
        let page = page::page(raw.page)?;
        let admin = admin::admin(raw.admin, &rules, &spend)?;
        let block = controls::addr_list(raw.block, "block")?;
        let allow = controls::addr_list(raw.allow, "allow")?;
        let auto_block = raw.auto_block.map(controls::auto_block).transpose()?;
        let data_dir = match &store.kind {
            crate::store::settings::StoreKind::File { dir } => dir.clone(),
            _ => base.join(defaults::DATA_DIR_NAME),
        };
        Ok(Config {
            provider,
            store,
            rules,
            spend,
            provider_rate_limits,
            provider_rates,
            cache_ttl,
            client,
            forwarded_header,
            api_keys,
            max_body_bytes,
            allowed_origins,
            fastcgi_max_requests,
            page,
            admin,
            data_dir,
            journal: raw.journal.unwrap_or(defaults::JOURNAL),
            shadow_rules,
            block,
            allow,
            auto_block,
            file: None,
        })
    }
}

#[cfg(test)]
mod tests {
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
        let e = parse(
            r#"{"provider": {"kind": "http", "token": "hunter22", "timeout_ms": "hunter22"}}"#,
        )
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
            (r#"{"kind": "redis", "url": "rediss://h:1/0"}"#, "store.url"),
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
}

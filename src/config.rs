//! The configuration file: its JSON form, and the checked `Config` the program runs with. Every
//! mistake is reported with the field and what to write instead, before any request is served.

pub mod locate;

use std::fmt;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::core::rule::{Algorithm, KeyKind, Rule, RuleName};
use crate::defaults;
use crate::http::api_key::{KeyPolicy, KnownKey};
use crate::http::identity::{Cidr, ClientPolicy};
use crate::provider::spec::ProviderSpec;
use crate::secret::Secret;
use crate::store::mysql::settings::{MysqlSettings, TsUnit};
use crate::store::redis::settings::RedisSettings;
use crate::store::settings::{OnError, StoreConfig, StoreKind};

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
}

/// A configuration mistake: where, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    provider: Option<Value>,
    spend: Option<Value>,
    store: Option<RawStore>,
    rules: Option<Vec<RawRule>>,
    client: Option<RawClient>,
    request: Option<RawRequest>,
    api_keys: Option<RawApiKeys>,
    cache: Option<RawCache>,
    allowed_origins: Option<Vec<String>>,
    fastcgi: Option<RawFastcgi>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFastcgi {
    max_requests: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCache {
    ttl_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApiKeys {
    header: Option<String>,
    require: Option<bool>,
    keys: Option<Vec<RawKey>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    name: String,
    sha256: String,
    rules: Option<Vec<RawRule>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawStore {
    kind: Option<String>,
    dir: Option<String>,
    url: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    socket: Option<String>,
    user: Option<String>,
    password: Option<String>,
    database: Option<String>,
    table: Option<String>,
    counter_table: Option<String>,
    cache_table: Option<String>,
    events_ts: Option<String>,
    connect_timeout_ms: Option<u64>,
    read_timeout_ms: Option<u64>,
    tls: Option<bool>,
    db: Option<u32>,
    on_error: Option<String>,
    sweep_one_in: Option<u32>,
    sweep_budget_ms: Option<u64>,
    sweep_grace_secs: Option<u64>,
    deny_retry_after_secs: Option<u32>,
    lock_timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: String,
    key: String,
    algorithm: Option<String>,
    limit: u64,
    window_secs: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    ipv6_prefix: Option<u8>,
    trusted_proxies: Option<Vec<String>>,
    forwarded_header: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    max_body_bytes: Option<u64>,
}

/// The rule that applies when the configuration names none.
pub fn default_rule() -> Rule {
    Rule {
        name: RuleName::new(defaults::RULE_NAME).expect("valid default name"),
        key: KeyKind::Ip,
        algorithm: Algorithm::Fixed,
        limit: NonZeroU32::new(defaults::RULE_LIMIT).expect("nonzero default"),
        window_secs: NonZeroU32::new(defaults::RULE_WINDOW_SECS).expect("nonzero default"),
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
            // serde quotes the offending value, which may be a secret in the wrong place (or a
            // password written as a number): the value is cut out, and what secrets the text
            // holds are masked in every form as well.
            let message = without_quoted_value(&e.to_string());
            let message =
                crate::secret::mask(&message, &crate::secret::all_forms(&secret_strings(text)))
                    .into_owned();
            err(
                format!("line {} column {}", e.line(), e.column()),
                format!("{message}; the file must be one JSON object (see README: Configuration)"),
            )
        })?;
        Config::from_raw(raw, base)
    }

    fn from_raw(raw: RawConfig, base: &Path) -> Result<Config, ConfigError> {
        let (provider, rate_rules) = match raw.provider {
            None => (None, Vec::new()),
            Some(section) => {
                let (p, r) = crate::provider::config::parse(section)?;
                (Some(p), r)
            }
        };
        let mut spend = rate_rules;
        if let Some(list) = raw.spend {
            let raw_rules = crate::provider::config::raw_site_rules(list, "spend")?;
            spend.extend(crate::provider::config::site_rules(&raw_rules, "spend")?);
        }
        let store = store(raw.store, base)?;
        let rules = match raw.rules {
            None => vec![default_rule()],
            Some(list) => rules(list)?,
        };
        check_algorithms(&rules, &store.kind)?;
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
        let api_keys = api_keys(raw.api_keys, &store.kind)?;
        let mut allowed_origins = Vec::new();
        for (i, o) in raw.allowed_origins.unwrap_or_default().iter().enumerate() {
            allowed_origins.push(crate::http::origin::origin_of(o).ok_or_else(|| {
                err(
                    format!("allowed_origins[{i}]"),
                    format!("{o:?} is not a site: write it as the browser does, e.g. \"https://www.example.com\""),
                )
            })?);
        }
        let client = raw.client.unwrap_or(RawClient {
            ipv6_prefix: None,
            trusted_proxies: None,
            forwarded_header: None,
        });
        let ipv6_prefix = client.ipv6_prefix.unwrap_or(defaults::IPV6_PREFIX);
        if !(1..=128).contains(&ipv6_prefix) {
            return Err(err(
                "client.ipv6_prefix",
                "must be 1 to 128; 64 groups each subscriber's addresses (the default)",
            ));
        }
        let mut trusted_proxies = Vec::new();
        for (i, s) in client
            .trusted_proxies
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            trusted_proxies.push(Cidr::parse(s).ok_or_else(|| {
                err(
                    format!("client.trusted_proxies[{i}]"),
                    format!("{s:?} is not an address or range: write e.g. \"10.0.0.0/8\" or \"2001:db8::/32\""),
                )
            })?);
        }
        let forwarded_header = client
            .forwarded_header
            .unwrap_or_else(|| defaults::FORWARDED_HEADER.to_owned());
        if !is_header_name(&forwarded_header) || forwarded_header.contains('_') {
            return Err(err(
                "client.forwarded_header",
                "must be a header name of letters, digits and '-', e.g. \"X-Forwarded-For\" or \"CF-Connecting-IP\"",
            ));
        }
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
        Ok(Config {
            provider,
            store,
            rules,
            spend,
            cache_ttl,
            client: ClientPolicy {
                ipv6_prefix,
                trusted_proxies,
            },
            forwarded_header,
            api_keys,
            max_body_bytes,
            allowed_origins,
            fastcgi_max_requests,
        })
    }

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

    /// Every secret in the configuration, so logs can mask them wherever they appear.
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets = self.provider_secrets();
        if let StoreKind::Redis(r) = &self.store.kind {
            secrets.extend(r.password.iter().map(|p| p.expose().to_owned()));
        }
        if let StoreKind::Mysql(m) = &self.store.kind {
            secrets.extend(m.password.iter().map(|p| p.expose().to_owned()));
            if let Some(url) = &m.url
                && let Ok(opts) = mysql::Opts::from_url(url.expose())
                && let Some(pass) = opts.get_pass()
            {
                secrets.push(pass.to_owned());
            }
        }
        secrets.retain(|s| !s.is_empty());
        secrets
    }

    fn provider_secrets(&self) -> Vec<String> {
        match &self.provider {
            Some(ProviderSpec::Http(h)) => h
                .token
                .iter()
                .filter(|t| !t.expose().is_empty())
                .map(|t| t.expose().to_owned())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A serde message without the value it quotes: "invalid type: integer `20240917`, expected a
/// string" becomes "invalid type: integer, expected a string". Other messages (syntax errors,
/// unknown or missing fields) quote only the file's grammar or field names and stay as they are.
pub(crate) fn without_quoted_value(message: &str) -> String {
    for lead in ["invalid type: ", "invalid value: ", "invalid length "] {
        let Some(at) = message.find(lead) else {
            continue;
        };
        let rest = &message[at + lead.len()..];
        let Some(quote) = rest.find(['`', '"']) else {
            continue;
        };
        let Some(end) = rest.rfind(", expected") else {
            continue;
        };
        if quote < end {
            let kind = rest[..quote].trim_end();
            return format!("{}{lead}{kind}{}", &message[..at], &rest[end..]);
        }
    }
    message.to_owned()
}

/// Every string under a key that holds secrets (`token`, `password`, `url`), anywhere in a
/// configuration's JSON, so error messages about a malformed file can mask them.
fn secret_strings(text: &str) -> Vec<String> {
    serde_json::from_str::<Value>(text)
        .map(|v| secret_values(&v))
        .unwrap_or_default()
}

/// Every string under a `token`, `password` or `url` key in `v`.
pub(crate) fn secret_values(v: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match v {
                        Value::String(s)
                            if matches!(k.as_str(), "token" | "password" | "url")
                                && !s.is_empty() =>
                        {
                            out.push(s.clone());
                        }
                        other => walk(other, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

fn rule_json(r: &Rule) -> Value {
    json!({
        "name": r.name.as_str(), "key": r.key.as_str(), "algorithm": r.algorithm.as_str(),
        "limit": r.limit.get(), "window_secs": r.window_secs.get(),
    })
}

fn api_keys(raw: Option<RawApiKeys>, store: &StoreKind) -> Result<KeyPolicy, ConfigError> {
    let raw = raw.unwrap_or(RawApiKeys {
        header: None,
        require: None,
        keys: None,
    });
    let header = raw
        .header
        .unwrap_or_else(|| defaults::API_KEY_HEADER.to_owned());
    if header.eq_ignore_ascii_case("Authorization")
        || header.eq_ignore_ascii_case("Proxy-Authorization")
    {
        return Err(err(
            "api_keys.header",
            "Apache does not pass Authorization to CGI programs (without CGIPassAuth): use a header such as \"X-API-Key\"",
        ));
    }
    if !is_header_name(&header) || header.contains('_') {
        return Err(err(
            "api_keys.header",
            "must be letters, digits and '-' (Apache drops headers with '_'), e.g. \"X-API-Key\"",
        ));
    }
    let mut keys: Vec<KnownKey> = Vec::new();
    for (i, k) in raw.keys.unwrap_or_default().into_iter().enumerate() {
        let at = |f: &str| format!("api_keys.keys[{i}].{f}");
        if RuleName::new(&k.name).is_none() {
            return Err(err(at("name"), "must be 1 to 32 of a-z, 0-9, '_' and '-'"));
        }
        if keys.iter().any(|o| o.name == k.name) {
            return Err(err(
                at("name"),
                format!("{:?} is used by another key", k.name),
            ));
        }
        let sha256 = k.sha256.to_ascii_lowercase();
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(err(
                at("sha256"),
                "must be the key's SHA-256 in hex (64 characters): `resolve hash-key` prints it; never write the key itself",
            ));
        }
        if keys.iter().any(|o| o.sha256 == sha256) {
            return Err(err(at("sha256"), "the same key is listed twice"));
        }
        let own = match k.rules {
            None => None,
            Some(list) => {
                let parsed = rules(list)
                    .map_err(|e| err(format!("{}.{}", at("rules"), e.field), e.message))?;
                if let Some(j) = parsed.iter().position(|r| r.key != KeyKind::ApiKey) {
                    return Err(err(
                        format!("{}[{j}].key", at("rules")),
                        "a key's own rules count that key: use \"api_key\"",
                    ));
                }
                check_algorithms(&parsed, store)
                    .map_err(|e| err(format!("{}.{}", at("rules"), e.field), e.message))?;
                Some(parsed)
            }
        };
        keys.push(KnownKey {
            name: k.name,
            sha256,
            rules: own,
        });
    }
    Ok(KeyPolicy {
        header,
        require: raw.require.unwrap_or(false),
        keys,
    })
}

/// Sliding windows need a store that keeps one record per request.
fn check_algorithms(rules: &[Rule], store: &StoreKind) -> Result<(), ConfigError> {
    if matches!(store, StoreKind::File { .. })
        && let Some(i) = rules.iter().position(|r| r.algorithm == Algorithm::Sliding)
    {
        return Err(err(
            format!("rules[{i}].algorithm"),
            "the file store keeps fixed windows only: use \"fixed\", or a mysql or redis store for \"sliding\"",
        ));
    }
    Ok(())
}

fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn store(raw: Option<RawStore>, base: &Path) -> Result<StoreConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let kind_name = raw.kind.as_deref().unwrap_or("file");
    let allowed: &[&str] = match kind_name {
        "file" => &["dir", "lock_timeout_ms"],
        "mysql" => &[
            "url",
            "host",
            "port",
            "socket",
            "user",
            "password",
            "database",
            "table",
            "counter_table",
            "cache_table",
            "events_ts",
            "connect_timeout_ms",
            "read_timeout_ms",
            "tls",
        ],
        "redis" => &[
            "url",
            "host",
            "port",
            "socket",
            "user",
            "password",
            "db",
            "connect_timeout_ms",
            "read_timeout_ms",
        ],
        other => {
            return Err(err(
                "store.kind",
                format!("{other:?} is not a store: use \"file\", \"mysql\" or \"redis\""),
            ));
        }
    };
    let set = [
        ("dir", raw.dir.is_some()),
        ("url", raw.url.is_some()),
        ("host", raw.host.is_some()),
        ("port", raw.port.is_some()),
        ("socket", raw.socket.is_some()),
        ("user", raw.user.is_some()),
        ("password", raw.password.is_some()),
        ("database", raw.database.is_some()),
        ("db", raw.db.is_some()),
        ("table", raw.table.is_some()),
        ("counter_table", raw.counter_table.is_some()),
        ("cache_table", raw.cache_table.is_some()),
        ("events_ts", raw.events_ts.is_some()),
        ("connect_timeout_ms", raw.connect_timeout_ms.is_some()),
        ("read_timeout_ms", raw.read_timeout_ms.is_some()),
        ("tls", raw.tls.is_some()),
        ("lock_timeout_ms", raw.lock_timeout_ms.is_some()),
    ];
    if let Some((field, _)) = set.iter().find(|(f, on)| *on && !allowed.contains(f)) {
        return Err(err(
            format!("store.{field}"),
            format!("does not apply to the {kind_name} store: remove it (or change \"kind\")"),
        ));
    }
    let kind = match kind_name {
        "mysql" => StoreKind::Mysql(Box::new(mysql_settings(&raw)?)),
        "redis" => StoreKind::Redis(Box::new(redis_settings(&raw)?)),
        _ => {
            let dir = match &raw.dir {
                Some(d) if d.is_empty() => {
                    return Err(err("store.dir", "is empty: name the data directory"));
                }
                Some(d) => base.join(d),
                None => base.join(defaults::DATA_DIR_NAME),
            };
            StoreKind::File { dir }
        }
    };
    let on_error = match raw.on_error.as_deref().unwrap_or("allow") {
        "allow" => OnError::Allow,
        "deny" => OnError::Deny,
        other => {
            return Err(err(
                "store.on_error",
                format!(
                    "{other:?}: use \"allow\" (answer anyway when the store fails) or \"deny\" (answer 503)"
                ),
            ));
        }
    };
    let sweep_budget_ms = raw.sweep_budget_ms.unwrap_or(defaults::SWEEP_BUDGET_MS);
    if sweep_budget_ms > 1000 {
        return Err(err(
            "store.sweep_budget_ms",
            "must be at most 1000: a request should not wait on housekeeping",
        ));
    }
    let deny_retry_after_secs = raw
        .deny_retry_after_secs
        .unwrap_or(defaults::DENY_RETRY_AFTER_SECS);
    if deny_retry_after_secs == 0 {
        return Err(err("store.deny_retry_after_secs", "must be at least 1"));
    }
    let lock_timeout_ms = raw
        .lock_timeout_ms
        .unwrap_or(defaults::FILE_LOCK_TIMEOUT_MS.into());
    if !(1..=60_000).contains(&lock_timeout_ms) {
        return Err(err(
            "store.lock_timeout_ms",
            "must be 1 to 60000; requests hold a lock for microseconds, so the default 2000 \
             only ends the wait on a stuck process",
        ));
    }
    Ok(StoreConfig {
        kind,
        on_error,
        sweep_one_in: raw.sweep_one_in.unwrap_or(defaults::SWEEP_ONE_IN),
        sweep_budget: Duration::from_millis(sweep_budget_ms),
        sweep_grace: Duration::from_secs(
            raw.sweep_grace_secs.unwrap_or(defaults::SWEEP_GRACE_SECS),
        ),
        deny_retry_after_secs,
        lock_timeout: Duration::from_millis(lock_timeout_ms),
    })
}

fn table_name(field: &str, name: &str) -> Result<String, ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(name.to_owned())
    } else {
        Err(err(field, "must be 1 to 64 letters, digits or '_'"))
    }
}

fn redis_settings(raw: &RawStore) -> Result<RedisSettings, ConfigError> {
    // The URL first; the separate fields, where given, override its parts (as for MySQL).
    let mut username = None;
    let mut password = None;
    let mut db = 0;
    let mut target = None;
    if let Some(url) = &raw.url {
        let bad = |why: &str| {
            err(
                "store.url",
                format!(
                    "{why}: write redis://[USER:PASSWORD@]HOST:PORT/DB or unix://[USER:PASSWORD@]/path/to/redis.sock?db=N"
                ),
            )
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("it is not a URL"))?;
        if scheme == "rediss" {
            return Err(bad(
                "TLS to Redis is not supported; use a local port or the Unix socket",
            ));
        }
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((u, r)) => (Some(u), r),
            None => (None, rest),
        };
        if let Some(info) = userinfo {
            let (user, pass) = match info.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (info, None),
            };
            let decode = |s: &str| {
                crate::http::form::percent_decode(s.as_bytes())
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| bad("its user or password is badly %-encoded"))
            };
            if !user.is_empty() {
                username = Some(decode(user)?);
            }
            if let Some(p) = pass.filter(|p| !p.is_empty()) {
                password = Some(decode(p)?);
            }
        }
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        if let Some(q) = query {
            for pair in q.split('&') {
                match pair.split_once('=') {
                    Some(("db", n)) => db = n.parse().map_err(|_| bad("db must be a number"))?,
                    _ => return Err(bad(&format!("unknown parameter {pair:?}"))),
                }
            }
        }
        target = Some(match scheme {
            "redis" => {
                let (hostport, dbpart) = match path.split_once('/') {
                    Some((h, d)) => (h, d),
                    None => (path, ""),
                };
                if !dbpart.is_empty() {
                    db = dbpart
                        .parse()
                        .map_err(|_| bad("the path must be a database number"))?;
                }
                let bracketed = hostport.starts_with('[') && hostport.ends_with(']');
                let (host, port) = match hostport.rsplit_once(':') {
                    Some((h, p)) if !bracketed => {
                        (h, p.parse().map_err(|_| bad("the port is not a number"))?)
                    }
                    _ => (hostport, defaults::REDIS_PORT),
                };
                let host = host.trim_start_matches('[').trim_end_matches(']');
                if host.is_empty() {
                    return Err(bad("it names no host"));
                }
                crate::store::redis::resp::Target::Tcp {
                    host: host.to_owned(),
                    port,
                }
            }
            "unix" => {
                if !path.starts_with('/') {
                    return Err(bad("the socket path must be absolute"));
                }
                crate::store::redis::resp::Target::Unix(PathBuf::from(path))
            }
            _ => return Err(bad("it must start with redis:// or unix://")),
        });
    }
    username = raw.user.clone().or(username);
    password = raw.password.clone().or(password);
    db = raw.db.unwrap_or(db);
    if let Some(sock) = &raw.socket {
        target = Some(crate::store::redis::resp::Target::Unix(PathBuf::from(sock)));
    } else if let Some(host) = &raw.host {
        target = Some(crate::store::redis::resp::Target::Tcp {
            host: host.clone(),
            port: raw.port.unwrap_or(defaults::REDIS_PORT),
        });
    }
    let target = target.ok_or_else(|| {
        err(
            "store",
            "a redis store needs \"url\", \"host\" or \"socket\" (e.g. \"url\": \"redis://127.0.0.1:6379/0\")",
        )
    })?;
    if username.is_some() && password.is_none() {
        return Err(err(
            "store.password",
            "missing: an ACL user needs its password",
        ));
    }
    if db > 15 {
        return Err(err("store.db", "must be 0 to 15 on a default Redis"));
    }
    let connect_ms = raw
        .connect_timeout_ms
        .unwrap_or(defaults::REDIS_CONNECT_TIMEOUT_MS);
    let read_ms = raw
        .read_timeout_ms
        .unwrap_or(defaults::REDIS_READ_TIMEOUT_MS);
    if !(1..=10_000).contains(&connect_ms) {
        return Err(err(
            "store.connect_timeout_ms",
            "must be 1 to 10000 (milliseconds)",
        ));
    }
    if !(1..=20_000).contains(&read_ms) {
        return Err(err(
            "store.read_timeout_ms",
            "must be 1 to 20000 (milliseconds)",
        ));
    }
    Ok(RedisSettings {
        target,
        username,
        password: password.map(Secret::new),
        db,
        connect_timeout: Duration::from_millis(connect_ms),
        read_timeout: Duration::from_millis(read_ms),
    })
}

fn mysql_settings(raw: &RawStore) -> Result<MysqlSettings, ConfigError> {
    if let Some(url) = &raw.url
        && let Err(e) = mysql::Opts::from_url(url)
    {
        // The message of a URL error can quote the URL, password included: say less.
        let why = match e {
            mysql::UrlError::UnsupportedScheme(_) => "it must start with mysql://",
            mysql::UrlError::BadUrl | mysql::UrlError::ParseError(_) => "it is not a URL",
            _ => "it has an unknown or invalid parameter",
        };
        return Err(err(
            "store.url",
            format!("{why}; write mysql://USER:PASSWORD@HOST:PORT/DATABASE"),
        ));
    }
    let url_has = |part: &str| {
        raw.url
            .as_deref()
            .and_then(|u| mysql::Opts::from_url(u).ok())
            .is_some_and(|o| match part {
                "user" => o.get_user().is_some(),
                "database" => o.get_db_name().is_some(),
                _ => false,
            })
    };
    if raw.url.is_none() && raw.host.is_none() && raw.socket.is_none() {
        return Err(err(
            "store",
            "a mysql store needs \"url\", \"host\" or \"socket\" (e.g. \"socket\": \"/var/lib/mysql/mysql.sock\")",
        ));
    }
    if raw.user.is_none() && !url_has("user") {
        return Err(err("store.user", "missing: the database user"));
    }
    if raw.database.is_none() && !url_has("database") {
        return Err(err(
            "store.database",
            "missing: the database that holds the tables",
        ));
    }
    let counter_table = table_name(
        "store.counter_table",
        raw.counter_table
            .as_deref()
            .unwrap_or(defaults::MYSQL_COUNTER_TABLE),
    )?;
    let events_table = table_name(
        "store.table",
        raw.table.as_deref().unwrap_or(defaults::MYSQL_EVENTS_TABLE),
    )?;
    let cache_table = table_name(
        "store.cache_table",
        raw.cache_table
            .as_deref()
            .unwrap_or(defaults::MYSQL_CACHE_TABLE),
    )?;
    if counter_table == events_table || cache_table == events_table || cache_table == counter_table
    {
        return Err(err(
            "store.counter_table",
            "store.table, store.counter_table and store.cache_table must differ",
        ));
    }
    let events_ts = match raw.events_ts.as_deref().unwrap_or("ms") {
        "ms" => TsUnit::Millis,
        "s" => TsUnit::Seconds,
        other => {
            return Err(err(
                "store.events_ts",
                format!(
                    "{other:?}: use \"ms\" (milliseconds, the default) or \"s\" (Unix seconds, as many PHP limiters write)"
                ),
            ));
        }
    };
    let connect_ms = raw
        .connect_timeout_ms
        .unwrap_or(defaults::MYSQL_CONNECT_TIMEOUT_MS);
    let read_ms = raw
        .read_timeout_ms
        .unwrap_or(defaults::MYSQL_READ_TIMEOUT_MS);
    if !(1..=10_000).contains(&connect_ms) {
        return Err(err(
            "store.connect_timeout_ms",
            "must be 1 to 10000 (milliseconds)",
        ));
    }
    if !(1..=20_000).contains(&read_ms) {
        return Err(err(
            "store.read_timeout_ms",
            "must be 1 to 20000 (milliseconds)",
        ));
    }
    Ok(MysqlSettings {
        url: raw.url.clone().map(Secret::new),
        host: raw.host.clone(),
        port: raw.port,
        socket: raw.socket.as_ref().map(PathBuf::from),
        user: raw.user.clone(),
        password: raw.password.clone().map(Secret::new),
        database: raw.database.clone(),
        counter_table,
        events_table,
        cache_table,
        events_ts,
        connect_timeout: Duration::from_millis(connect_ms),
        read_timeout: Duration::from_millis(read_ms),
        tls: raw.tls.unwrap_or(false),
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

/// Longest window a rule may have: a year.
const MAX_WINDOW_SECS: u64 = 366 * 24 * 3600;

fn rules(list: Vec<RawRule>) -> Result<Vec<Rule>, ConfigError> {
    if list.len() > 16 {
        return Err(err("rules", "at most 16 rules"));
    }
    let mut out: Vec<Rule> = Vec::new();
    for (i, r) in list.into_iter().enumerate() {
        let at = |f: &str| format!("rules[{i}].{f}");
        let name = RuleName::new(&r.name).ok_or_else(|| {
            err(
                at("name"),
                "must be 1 to 32 of a-z, 0-9, '_' and '-', e.g. \"ip\" or \"per-day\"",
            )
        })?;
        if out.iter().any(|o| o.name == name) {
            return Err(err(
                at("name"),
                format!("{name:?} is used by another rule: names must differ"),
            ));
        }
        let key = KeyKind::parse(&r.key).ok_or_else(|| {
            err(at("key"), format!("{:?}: use \"ip\" (per client address), \"api_key\" (per API key) or \"global\" (one count for the whole site)", r.key))
        })?;
        let algorithm = match r.algorithm.as_deref() {
            None => Algorithm::Fixed,
            Some(a) => Algorithm::parse(a).ok_or_else(|| {
                err(at("algorithm"), format!("{a:?}: use \"fixed\" (a window from the first request) or \"sliding\" (any window ending now)"))
            })?,
        };
        let limit = u32::try_from(r.limit)
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or_else(|| err(at("limit"), "must be 1 to 4294967295 requests per window"))?;
        let window = u32::try_from(r.window_secs)
            .ok()
            .filter(|w| u64::from(*w) <= MAX_WINDOW_SECS)
            .and_then(NonZeroU32::new)
            .ok_or_else(|| err(at("window_secs"), "must be 1 to 31622400 seconds (a year)"))?;
        out.push(Rule {
            name,
            key,
            algorithm,
            limit,
            window_secs: window,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
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
                r#"{"store": {"kind": "redis", "lock_timeout_ms": 100}}"#,
                "store.lock_timeout_ms",
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
            crate::store::redis::resp::Target::Unix("/run/redis.sock".into())
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
}

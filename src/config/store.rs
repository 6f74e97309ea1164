//! The `store` section: which store, where it lives, and the policies every store shares.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::error::{ConfigError, err};
use crate::config::raw::RawStore;
use crate::net::url::{self, UrlError};
use crate::store::mysql::settings::{MysqlSettings, TsUnit, url_parts};
use crate::store::redis::resp::Target;
use crate::store::redis::settings::RedisSettings;
use crate::store::settings::{OnError, StoreConfig, StoreKind};
use crate::support::defaults;
use crate::support::secret::Secret;

/// How to reach a database server: the fields the MySQL and Redis stores share.
const SERVER_FIELDS: [&str; 8] = [
    "url",
    "host",
    "port",
    "socket",
    "user",
    "password",
    "connect_timeout_ms",
    "read_timeout_ms",
];

pub(crate) fn store(raw: Option<Box<RawStore>>, base: &Path) -> Result<StoreConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let kind_name = raw.kind.as_deref().unwrap_or("file");
    // The kind's own fields, and whether a database server's apply too.
    let (own, server): (&[&str], bool) = match kind_name {
        "file" => (&["dir", "lock_timeout_ms", "max_files", "max_bytes"], false),
        "mysql" => (
            &[
                "database",
                "table",
                "counter_table",
                "cache_table",
                "journal_table",
                "notes_table",
                "events_ts",
                "tls",
                "ca_file",
            ],
            true,
        ),
        "redis" => (&["db", "tls", "ca_file", "cluster_nodes"], true),
        other => {
            return Err(err(
                "store.kind",
                format!("{other:?} is not a store: use \"file\", \"mysql\" or \"redis\""),
            ));
        }
    };
    let allowed = |field: &str| own.contains(&field) || (server && SERVER_FIELDS.contains(&field));
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
        ("cluster_nodes", raw.cluster_nodes.is_some()),
        ("table", raw.table.is_some()),
        ("counter_table", raw.counter_table.is_some()),
        ("cache_table", raw.cache_table.is_some()),
        ("journal_table", raw.journal_table.is_some()),
        ("notes_table", raw.notes_table.is_some()),
        ("events_ts", raw.events_ts.is_some()),
        ("connect_timeout_ms", raw.connect_timeout_ms.is_some()),
        ("read_timeout_ms", raw.read_timeout_ms.is_some()),
        ("tls", raw.tls.is_some()),
        ("ca_file", raw.ca_file.is_some()),
        ("lock_timeout_ms", raw.lock_timeout_ms.is_some()),
        ("max_files", raw.max_files.is_some()),
        ("max_bytes", raw.max_bytes.is_some()),
    ];
    if let Some((field, _)) = set.iter().find(|(f, on)| *on && !allowed(f)) {
        return Err(err(
            format!("store.{field}"),
            format!("does not apply to the {kind_name} store: remove it (or change \"kind\")"),
        ));
    }
    let kind = match kind_name {
        "mysql" => StoreKind::Mysql(Box::new(mysql_settings(&raw, base)?)),
        "redis" => StoreKind::Redis(Box::new(redis_settings(&raw, base)?)),
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
    // The data directory's budget (the file store's): each at least what the journal takes.
    let max_files = at_least(
        "store.max_files",
        raw.max_files.unwrap_or(defaults::FILE_STORE_MAX_FILES),
        defaults::FILE_STORE_MIN_MAX_FILES,
        || {
            format!(
                "the usage journal and the directories alone may take {} files",
                defaults::FILE_STORE_JOURNAL_FILES
            )
        },
    )?;
    let max_bytes = at_least(
        "store.max_bytes",
        raw.max_bytes.unwrap_or(defaults::FILE_STORE_MAX_BYTES),
        defaults::FILE_STORE_MIN_MAX_BYTES,
        || {
            format!(
                "16 MiB; the usage journal alone may take {} bytes",
                defaults::FILE_STORE_JOURNAL_BYTES
            )
        },
    )?;
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
        max_files,
        max_bytes,
    })
}

/// `value`, or the error of `field` when it is below `min` (`why` says why the least, written
/// only then).
fn at_least(
    field: &str,
    value: u64,
    min: u64,
    why: impl FnOnce() -> String,
) -> Result<u64, ConfigError> {
    if value < min {
        return Err(err(field, format!("must be at least {min} ({})", why())));
    }
    Ok(value)
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

/// A database server's connect and read timeouts (milliseconds), the defaults given.
fn server_timeouts(
    raw: &RawStore,
    connect_default: u64,
    read_default: u64,
) -> Result<(u64, u64), ConfigError> {
    let connect_ms = raw.connect_timeout_ms.unwrap_or(connect_default);
    let read_ms = raw.read_timeout_ms.unwrap_or(read_default);
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
    Ok((connect_ms, read_ms))
}

/// What a Redis URL says: where the server is, the user, the password and the database.
fn redis_url(url: &str) -> Result<(Target, Option<String>, Option<String>, u32), ConfigError> {
    let bad = |why: &str| {
        err(
            "store.url",
            format!(
                "{why}: write redis://[USER:PASSWORD@]HOST:PORT/DB, rediss://… for TLS, or unix://[USER:PASSWORD@]/path/to/redis.sock?db=N"
            ),
        )
    };
    let is_socket = url
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("unix://"));
    let parsed = if is_socket {
        url::parse_socket(url, "unix")
    } else {
        url::parse(url, &["redis", "rediss"])
    }
    .map_err(|e| match e {
        UrlError::Scheme => bad("it must start with redis://, rediss:// or unix://"),
        UrlError::NoHost if is_socket => bad("the socket path must be absolute"),
        e => bad(&e.to_string()),
    })?;
    let mut db = 0;
    for (name, value) in parsed.query_pairs() {
        match name.as_str() {
            "db" => db = value.parse().map_err(|_| bad("db must be a number"))?,
            _ => return Err(bad(&format!("unknown parameter {name:?}"))),
        }
    }
    let target = if is_socket {
        Target::Unix {
            socket: PathBuf::from(parsed.path()),
        }
    } else {
        match parsed.path().trim_start_matches('/') {
            "" => {}
            n => {
                db = n
                    .parse()
                    .map_err(|_| bad("the path must be a database number"))?
            }
        }
        let host = parsed.host_text();
        let port = parsed.port().unwrap_or(defaults::REDIS_PORT);
        if parsed.scheme() == "rediss" {
            Target::Tls {
                host,
                port,
                ca_file: None,
            }
        } else {
            Target::Tcp { host, port }
        }
    };
    Ok((target, parsed.username(), parsed.password(), db))
}

/// One seed of `store.cluster_nodes`: `HOST:PORT` (`[ADDRESS]:PORT` for IPv6).
fn cluster_seed(text: &str) -> Result<(String, u16), ConfigError> {
    let bad = |why: &str| {
        err(
            "store.cluster_nodes",
            format!(
                "{text:?} {why}: write each node as \"HOST:PORT\" (\"[ADDRESS]:PORT\" for IPv6), e.g. [\"10.0.0.1:7000\", \"10.0.0.2:7000\"]"
            ),
        )
    };
    let (host, port) = text.rsplit_once(':').ok_or_else(|| bad("has no port"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty()
        || host.contains(['/', '@', ' ', '[', ']'])
        || (host.contains(':') && host.parse::<std::net::Ipv6Addr>().is_err())
    {
        return Err(bad("is not a host and port"));
    }
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| bad("has no port from 1 to 65535"))?;
    Ok((host.to_owned(), port))
}

/// The seeds of a Redis Cluster, checked: the URL or the fields give the credentials only.
fn cluster_seeds(raw: &RawStore, nodes: &[String]) -> Result<Vec<(String, u16)>, ConfigError> {
    if nodes.is_empty() {
        return Err(err(
            "store.cluster_nodes",
            "is empty: name at least one node of the cluster as \"HOST:PORT\" (better two or three), or remove it for a single Redis",
        ));
    }
    if nodes.len() > defaults::REDIS_CLUSTER_MAX_SEEDS {
        return Err(err(
            "store.cluster_nodes",
            format!(
                "names {} nodes: {} seeds are enough, the others are found from them",
                nodes.len(),
                defaults::REDIS_CLUSTER_MAX_SEEDS
            ),
        ));
    }
    for (field, set) in [
        ("host", raw.host.is_some()),
        ("port", raw.port.is_some()),
        ("socket", raw.socket.is_some()),
    ] {
        if set {
            return Err(err(
                format!("store.{field}"),
                "does not apply with store.cluster_nodes: list every seed there as \"HOST:PORT\" and remove it",
            ));
        }
    }
    if raw.db.is_some_and(|db| db != 0) {
        return Err(err(
            "store.db",
            "a Redis Cluster has only database 0: remove store.db",
        ));
    }
    nodes.iter().map(|n| cluster_seed(n)).collect()
}

fn redis_settings(raw: &RawStore, base: &Path) -> Result<RedisSettings, ConfigError> {
    let cluster = match &raw.cluster_nodes {
        Some(nodes) => Some(cluster_seeds(raw, nodes)?),
        None => None,
    };
    // The URL first; the separate fields, where given, override its parts (as for MySQL).
    let mut username = None;
    let mut password = None;
    let mut db = 0;
    let mut target = None;
    if let Some(url) = &raw.url {
        let from_url = redis_url(url)?;
        target = Some(from_url.0);
        username = from_url.1;
        password = from_url.2;
        db = from_url.3;
    }
    username = raw.user.clone().or(username);
    password = raw.password.clone().or(password);
    db = raw.db.unwrap_or(db);
    let url_tls = matches!(target, Some(Target::Tls { .. }));
    if let Some(sock) = &raw.socket {
        target = Some(Target::Unix {
            socket: PathBuf::from(sock),
        });
    } else if let Some(host) = &raw.host {
        target = Some(Target::Tcp {
            host: host.clone(),
            port: raw.port.unwrap_or(defaults::REDIS_PORT),
        });
    }
    // Over TLS when the URL says rediss://, `tls` is true, or a CA file is given with `host`.
    let ca = ca_file(raw, base)?;
    let tls = raw
        .tls
        .unwrap_or(url_tls || (ca.is_some() && raw.url.is_none()));
    if raw.tls == Some(false) && url_tls {
        return Err(err(
            "store.tls",
            "is false for a rediss:// URL: remove store.tls, or write redis:// for a plain connection",
        ));
    }
    if ca.is_some() && !tls {
        return Err(err(
            "store.ca_file",
            "is set for a plain connection: write the URL as rediss://… to use TLS, or remove store.ca_file",
        ));
    }
    target = match target {
        Some(Target::Tcp { host, port } | Target::Tls { host, port, .. }) if tls => {
            Some(Target::Tls {
                host,
                port,
                ca_file: ca.clone(),
            })
        }
        Some(Target::Tls { host, port, .. }) => Some(Target::Tcp { host, port }),
        Some(Target::Unix { .. }) if tls => {
            return Err(err(
                if ca.is_some() {
                    "store.ca_file"
                } else {
                    "store.tls"
                },
                "does not apply to a Unix socket, which has no TLS: remove it, or connect by host",
            ));
        }
        other => other,
    };
    if let Some(seeds) = &cluster {
        match &target {
            Some(Target::Unix { .. }) => {
                return Err(err(
                    "store.url",
                    "a Redis Cluster is reached over TCP: write redis://[USER:PASSWORD@]HOST:PORT, or give the credentials in store.user and store.password",
                ));
            }
            Some(_) if db != 0 => {
                return Err(err(
                    "store.url",
                    "a Redis Cluster has only database 0: end the URL with /0 or with the port",
                ));
            }
            // The URL's host is one seed more, the first.
            Some(_) => {}
            None => {
                let (host, port) = (seeds[0].0.clone(), seeds[0].1);
                target = Some(if tls {
                    Target::Tls {
                        host,
                        port,
                        ca_file: ca,
                    }
                } else {
                    Target::Tcp { host, port }
                });
            }
        }
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
    let (connect_ms, read_ms) = server_timeouts(
        raw,
        defaults::REDIS_CONNECT_TIMEOUT_MS,
        defaults::REDIS_READ_TIMEOUT_MS,
    )?;
    Ok(RedisSettings {
        target,
        username,
        password: password.map(Secret::new),
        db,
        connect_timeout: Duration::from_millis(connect_ms),
        read_timeout: Duration::from_millis(read_ms),
        cluster_nodes: cluster.unwrap_or_default(),
    })
}

/// `store.ca_file`, relative to the configuration's directory; read only when connecting (and
/// by `resolve check`).
fn ca_file(raw: &RawStore, base: &Path) -> Result<Option<PathBuf>, ConfigError> {
    match raw.ca_file.as_deref() {
        None => Ok(None),
        Some("") => Err(err(
            "store.ca_file",
            "is empty: name the CA bundle (PEM) that signed the server's certificate, or remove it",
        )),
        Some(path) => Ok(Some(base.join(path))),
    }
}

fn mysql_settings(raw: &RawStore, base: &Path) -> Result<MysqlSettings, ConfigError> {
    let from_url = match &raw.url {
        Some(url) => Some(url_parts(url).map_err(|why| {
            err(
                "store.url",
                format!("{why}; write mysql://USER:PASSWORD@HOST:PORT/DATABASE"),
            )
        })?),
        None => None,
    };
    let url_has = |part: &str| {
        from_url.as_ref().is_some_and(|o| match part {
            "user" => o.user.is_some(),
            "database" => o.database.is_some(),
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
    let named = |field: &str, given: &Option<String>, default: &str| {
        table_name(field, given.as_deref().unwrap_or(default))
    };
    let counter_table = named(
        "store.counter_table",
        &raw.counter_table,
        defaults::MYSQL_COUNTER_TABLE,
    )?;
    let events_table = named("store.table", &raw.table, defaults::MYSQL_EVENTS_TABLE)?;
    let cache_table = named(
        "store.cache_table",
        &raw.cache_table,
        defaults::MYSQL_CACHE_TABLE,
    )?;
    let journal_table = named(
        "store.journal_table",
        &raw.journal_table,
        defaults::MYSQL_JOURNAL_TABLE,
    )?;
    let notes_table = named(
        "store.notes_table",
        &raw.notes_table,
        defaults::MYSQL_NOTES_TABLE,
    )?;
    let names = [
        &counter_table,
        &events_table,
        &cache_table,
        &journal_table,
        &notes_table,
    ];
    if (1..names.len()).any(|i| names[..i].contains(&names[i])) {
        return Err(err(
            "store.counter_table",
            "store.table, store.counter_table, store.cache_table, store.journal_table and \
             store.notes_table must differ",
        ));
    }
    let events_ts = match raw.events_ts.as_deref().unwrap_or("ms") {
        "ms" => TsUnit::Millis,
        "s" => TsUnit::Seconds,
        "datetime" => TsUnit::DateTime,
        other => {
            return Err(err(
                "store.events_ts",
                format!(
                    "{other:?}: use \"ms\" (milliseconds, the default), \"s\" (Unix seconds, as UNIX_TIMESTAMP() writes) or \"datetime\" (a DATETIME column written with NOW())"
                ),
            ));
        }
    };
    let ca_file = ca_file(raw, base)?;
    if ca_file.is_some() && raw.tls == Some(false) {
        return Err(err(
            "store.ca_file",
            "is set while store.tls is false: remove store.tls (a CA file turns TLS on) or the CA file",
        ));
    }
    if ca_file.is_some()
        && (raw.socket.is_some() || from_url.as_ref().is_some_and(|u| u.socket.is_some()))
    {
        return Err(err(
            "store.ca_file",
            "does not apply to a Unix socket, which has no TLS: remove it, or connect by host",
        ));
    }
    let (connect_ms, read_ms) = server_timeouts(
        raw,
        defaults::MYSQL_CONNECT_TIMEOUT_MS,
        defaults::MYSQL_READ_TIMEOUT_MS,
    )?;
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
        journal_table,
        notes_table,
        events_ts,
        connect_timeout: Duration::from_millis(connect_ms),
        read_timeout: Duration::from_millis(read_ms),
        tls: raw.tls.unwrap_or(ca_file.is_some()),
        ca_file,
    })
}

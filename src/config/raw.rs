//! The configuration file's JSON form, as serde reads it: every field optional, unknown fields
//! refused. `Config::from_json` checks it into the `Config` the program runs with.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// The top-level fields of the file, as [`RawConfig`] names them.
pub const FIELDS: [&str; 20] = [
    "provider",
    "providers",
    "spend",
    "store",
    "rules",
    "client",
    "request",
    "api_keys",
    "cache",
    "allowed_origins",
    "fastcgi",
    "page",
    "admin",
    "journal",
    "block",
    "allow",
    "auto_block",
    "account",
    "max_file_bytes",
    "challenge",
];

/// True when `text`, a `config.json` found somewhere, is this program's configuration and not
/// another program's file of that name: an object of this program's fields only, or, where it
/// is not JSON (a file broken by an edit), one that names a provider.
pub fn looks_like_ours(text: &str) -> bool {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => {
            !fields.is_empty() && fields.keys().all(|k| FIELDS.contains(&k.as_str()))
        }
        Ok(_) => false,
        Err(_) => text.contains("\"provider\""),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub(crate) provider: Option<Value>,
    pub(crate) providers: Option<Value>,
    /// Its text, read into rules by `provider::site_rules::raw_site_rules_in`.
    pub(crate) spend: Option<Box<RawValue>>,
    /// Boxed, as `challenge`: the largest sections, kept off the stack frames that read the file.
    pub(crate) store: Option<Box<RawStore>>,
    pub(crate) rules: Option<Vec<RawRule>>,
    pub(crate) client: Option<RawClient>,
    pub(crate) request: Option<RawRequest>,
    pub(crate) api_keys: Option<RawApiKeys>,
    pub(crate) cache: Option<RawCache>,
    pub(crate) allowed_origins: Option<Vec<String>>,
    pub(crate) fastcgi: Option<RawFastcgi>,
    pub(crate) page: Option<RawPage>,
    pub(crate) admin: Option<RawAdmin>,
    pub(crate) journal: Option<bool>,
    pub(crate) block: Option<Vec<String>>,
    pub(crate) allow: Option<Vec<String>>,
    pub(crate) auto_block: Option<RawAutoBlock>,
    pub(crate) max_file_bytes: Option<u64>,
    pub(crate) account: Option<RawAccountSettings>,
    pub(crate) challenge: Option<Box<RawChallenge>>,
}

/// `account`: what the provider account's reading may change.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAccountSettings {
    pub(crate) tighten_spend_above: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAdmin {
    pub(crate) password_hash: Option<String>,
}

/// A field's value as written, `null` included (serde reads a `null` as absent otherwise).
fn written<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `challenge`: the challenge asked before a paid call (see `config::challenge`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChallenge {
    pub(crate) site_key: Option<String>,
    pub(crate) secret: Option<String>,
    pub(crate) when: Option<String>,
    pub(crate) verify_url: Option<String>,
    pub(crate) script_url: Option<String>,
    /// `null` written is kept as `Some(Null)`: no action checked.
    #[serde(default, deserialize_with = "written")]
    pub(crate) action: Option<Value>,
    pub(crate) hostnames: Option<Vec<String>>,
    pub(crate) remember_secs: Option<u64>,
    pub(crate) extra: Option<u64>,
    pub(crate) extra_window_secs: Option<u64>,
    pub(crate) busy_share: Option<f64>,
    pub(crate) on_error: Option<String>,
    pub(crate) timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAutoBlock {
    pub(crate) refusals: u64,
    pub(crate) window_secs: u64,
    pub(crate) block_secs: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPage {
    pub(crate) site_name: Option<String>,
    pub(crate) contact: Option<String>,
    pub(crate) terms_url: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFastcgi {
    pub(crate) max_requests: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCache {
    pub(crate) ttl_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApiKeys {
    pub(crate) header: Option<String>,
    pub(crate) require: Option<bool>,
    pub(crate) keys: Option<Vec<RawKey>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKey {
    pub(crate) name: String,
    pub(crate) sha256: String,
    pub(crate) rules: Option<Vec<RawRule>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStore {
    pub(crate) kind: Option<String>,
    pub(crate) dir: Option<String>,
    pub(crate) url: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) port: Option<u16>,
    pub(crate) socket: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) database: Option<String>,
    pub(crate) table: Option<String>,
    pub(crate) counter_table: Option<String>,
    pub(crate) cache_table: Option<String>,
    pub(crate) journal_table: Option<String>,
    pub(crate) notes_table: Option<String>,
    pub(crate) events_ts: Option<String>,
    pub(crate) connect_timeout_ms: Option<u64>,
    pub(crate) read_timeout_ms: Option<u64>,
    pub(crate) tls: Option<bool>,
    pub(crate) ca_file: Option<String>,
    pub(crate) db: Option<u32>,
    pub(crate) cluster_nodes: Option<Vec<String>>,
    pub(crate) on_error: Option<String>,
    pub(crate) sweep_one_in: Option<u32>,
    pub(crate) sweep_budget_ms: Option<u64>,
    pub(crate) sweep_grace_secs: Option<u64>,
    pub(crate) deny_retry_after_secs: Option<u32>,
    pub(crate) lock_timeout_ms: Option<u64>,
    pub(crate) max_files: Option<u64>,
    pub(crate) max_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) algorithm: Option<String>,
    pub(crate) unit: Option<String>,
    pub(crate) limit: u64,
    pub(crate) window_secs: u64,
    pub(crate) mode: Option<String>,
    pub(crate) key_template: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClient {
    pub(crate) ipv6_prefix: Option<u8>,
    pub(crate) trusted_proxies: Option<Vec<String>>,
    pub(crate) forwarded_header: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRequest {
    pub(crate) max_body_bytes: Option<u64>,
    pub(crate) max_links: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_are_the_files_and_a_file_of_them_is_ours() {
        for field in FIELDS {
            let one = format!("{{\"{field}\": null}}");
            assert!(serde_json::from_str::<RawConfig>(&one).is_ok(), "{field}");
            assert!(looks_like_ours(&one), "{field}");
        }
        assert!(serde_json::from_str::<RawConfig>("{\"name\": null}").is_err());
        assert!(looks_like_ours(crate::config::starter::TEXT));
        assert!(looks_like_ours("{\"provider\": {\"kind\": \"echo\"},"));
        for other in ["{}", "[]", "{\"name\": \"app\", \"rules\": []}", "not json"] {
            assert!(!looks_like_ours(other), "{other}");
        }
    }
}

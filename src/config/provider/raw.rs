//! The `provider` section's JSON form, as serde reads it; `provider::config` checks it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::config::provider::site_rules::RawSiteRule;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProvider {
    pub(crate) kind: Option<String>,
    /// Read before merging; kept so that the field is known.
    #[serde(rename = "preset")]
    pub(crate) _preset: Option<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) steps: Option<Vec<RawStep>>,
    pub(crate) errors: Option<BTreeMap<String, Vec<Value>>>,
    pub(crate) error_messages: Option<BTreeMap<String, Vec<String>>>,
    pub(crate) statuses: Option<BTreeMap<String, Vec<u16>>>,
    pub(crate) generic_codes: Option<Vec<Value>>,
    pub(crate) advice: Option<BTreeMap<String, String>>,
    /// Real-Debrid's remote traffic: `true` adds `remote_form` to the first call's form.
    pub(crate) remote: Option<bool>,
    pub(crate) hosts: Option<RawHosts>,
    pub(crate) link_check: Option<RawLinkCheck>,
    pub(crate) account: Option<RawAccount>,
    pub(crate) remote_form: Option<BTreeMap<String, String>>,
    pub(crate) rate_limits: Option<Vec<RawSiteRule>>,
    pub(crate) connect_timeout_ms: Option<u64>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) deadline_ms: Option<u64>,
    // The one-call shorthand.
    pub(crate) url: Option<String>,
    pub(crate) method: Option<String>,
    pub(crate) auth: Option<RawPlace>,
    pub(crate) link: Option<RawPlace>,
    pub(crate) download: Option<String>,
    pub(crate) filename: Option<String>,
    pub(crate) success: Option<RawTest>,
    pub(crate) error_message: Option<String>,
    pub(crate) error_code: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPlace {
    pub(crate) header: Option<String>,
    pub(crate) prefix: Option<String>,
    pub(crate) query: Option<String>,
    pub(crate) form: Option<String>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTest {
    pub(crate) pointer: String,
    pub(crate) equals: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPoll {
    pub(crate) interval_ms: u64,
    pub(crate) until: RawTest,
    pub(crate) fail: Option<RawTest>,
    pub(crate) progress: Option<RawProgress>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProgress {
    pub(crate) pointer: String,
    pub(crate) unit: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHosts {
    pub(crate) url: String,
    pub(crate) lists: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLinkCheck {
    pub(crate) url: String,
    pub(crate) field: String,
    pub(crate) dead_statuses: Vec<u16>,
    pub(crate) size: Option<String>,
}

/// `account`: where the owner's account is read, and where its answer keeps each fact.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAccount {
    pub(crate) url: String,
    pub(crate) headers: Option<BTreeMap<String, String>>,
    pub(crate) success: Option<RawTest>,
    pub(crate) premium: Option<RawTest>,
    pub(crate) premium_until: Option<String>,
    pub(crate) premium_seconds_left: Option<String>,
    pub(crate) fair_use: Option<RawProgress>,
    pub(crate) host_quotas: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFiles {
    pub(crate) list: String,
    pub(crate) download: String,
    pub(crate) filename: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBest {
    pub(crate) list: String,
    pub(crate) by: String,
    pub(crate) take: String,
    #[serde(rename = "as")]
    pub(crate) name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStep {
    pub(crate) method: Option<String>,
    pub(crate) url: String,
    pub(crate) headers: Option<BTreeMap<String, String>>,
    pub(crate) query: Option<BTreeMap<String, String>>,
    pub(crate) form: Option<BTreeMap<String, String>>,
    pub(crate) when: Option<String>,
    pub(crate) unless: Option<String>,
    pub(crate) success: Option<RawTest>,
    pub(crate) error_code: Option<String>,
    pub(crate) error_message: Option<String>,
    pub(crate) extract: Option<BTreeMap<String, Value>>,
    pub(crate) files: Option<RawFiles>,
    pub(crate) best: Option<RawBest>,
    pub(crate) poll: Option<RawPoll>,
}

//! Configuration files for the binary under test.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::temp::TempDir;

/// The token the tests configure; it must never leave the binary except towards the provider.
pub const TOKEN: &str = "tok-SECRET-123";

pub fn rule(name: &str, key: &str, limit: u64, window_secs: u64) -> Value {
    json!({"name": name, "key": key, "limit": limit, "window_secs": window_secs})
}

/// The provider section for the stand-in at `provider_url` (POST form, Bearer token).
pub fn http_provider(provider_url: &str) -> Value {
    json!({
        "kind": "http",
        "url": provider_url,
        "method": "POST",
        "token": TOKEN,
        "auth": {"header": "Authorization", "prefix": "Bearer "},
        "link": {"form": "link"},
        "download": "/download",
        "filename": "/filename"
    })
}

/// A full config: HTTP provider, file store in `data_dir`, these rules.
pub fn http_file_config(provider_url: &str, data_dir: &Path, rules: Vec<Value>) -> Value {
    json!({
        "provider": http_provider(provider_url),
        "store": {"kind": "file", "dir": data_dir},
        "rules": rules
    })
}

/// Write `config` as `config.json` in `dir` and return its path.
pub fn write(dir: &TempDir, config: &Value) -> PathBuf {
    dir.write(
        "config.json",
        serde_json::to_vec_pretty(config).expect("serialize config"),
    )
}

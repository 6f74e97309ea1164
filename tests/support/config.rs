//! Configuration files for the binary under test.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::provider::Provider;
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

/// A full config: the stand-in `provider` at /unrestrict, this store section, these rules.
pub fn site_config(provider: &Provider, store: Value, rules: Vec<Value>) -> Value {
    json!({
        "provider": http_provider(&provider.url("/unrestrict")),
        "store": store,
        "rules": rules,
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

/// Write `config` as `config.json` in `dir`, replacing any earlier one in one step (a program
/// reading it meanwhile sees the old file or the new one), and return its path.
pub fn write(dir: &TempDir, config: &Value) -> PathBuf {
    write_as(dir, "config.json", config)
}

/// The same under another name.
pub fn write_as(dir: &TempDir, name: &str, config: &Value) -> PathBuf {
    write_text_as(
        dir,
        name,
        &serde_json::to_string_pretty(config).expect("serialize config"),
    )
}

/// `config.json` with any text (a configuration with a mistake, say), in one step.
pub fn write_text(dir: &TempDir, text: &str) -> PathBuf {
    write_text_as(dir, "config.json", text)
}

fn write_text_as(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let fresh = dir.write(&format!("{name}.new"), text);
    let path = dir.join(name);
    std::fs::rename(&fresh, &path).expect("rename the configuration into place");
    path
}

/// Adds the top-level fields of `extra` to `config`, replacing those it has.
pub fn merge(config: &mut Value, extra: Value) {
    if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
        config.extend(extra);
    }
}

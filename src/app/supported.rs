//! `GET /cgi-bin/resolve?hosts=1`: the file hosts the site's services support, from the host
//! lists already kept in the store (each fetched at most once a day before a paid call, see
//! `app::hosts`), and the visitor's rules, so that the page can list the hosts and say what is
//! left in words. Only the store's cache is read: no list is fetched here, nothing is counted,
//! no provider is asked, no secret is told. Cacheable for a few minutes.

use std::collections::BTreeSet;

use crate::app::App;
use crate::app::hosts::{KEY, Kept};
use crate::core::key::Reserved;
use crate::core::rule::{KeyKind, Unit};
use crate::http::response::Response;
use crate::provider::described::ProviderSpec;

/// The query string that asks for it, exactly (GET or HEAD; read in `app::request`).
pub const QUERY: &[u8] = b"hosts=1";
/// How long browsers may keep the answer once a list is kept (seconds); without one it is not
/// kept at all.
pub const MAX_AGE_SECS: u32 = 300;

impl App<'_> {
    /// `{"hosts": [...], "fetched_at": ISO time or null, "rules": [...]}`: every domain a kept
    /// list names (sorted, each once; empty when no service publishes one or none is kept
    /// yet), when the oldest of those lists was fetched, and each per-visitor rule (`name`,
    /// `unit`, `limit` in that unit, bytes for a rule of bytes, `window_secs`).
    pub(super) fn supported(&self) -> Response {
        let mut hosts = BTreeSet::new();
        let mut fetched: Option<u64> = None;
        let listed = |spec: Option<&ProviderSpec>| matches!(spec, Some(ProviderSpec::Http(h)) if h.hosts.is_some());
        let mut keys = Vec::new();
        if self.config.services.len() > 1 {
            for (i, service) in self.config.services.iter().enumerate() {
                if listed(Some(&service.spec)) {
                    keys.push(if i == 0 {
                        KEY.key()
                    } else {
                        Reserved::ServiceHostList(&service.name).key()
                    });
                }
            }
        } else if listed(self.config.provider.as_ref()) {
            keys.push(KEY.key());
        }
        for key in keys {
            let kept = self.store.cache.cache_get(&key).ok().flatten();
            if let Some(Kept {
                fetched_at_ms,
                domains: Some(domains),
            }) = kept.and_then(|b| Kept::decode(&b))
            {
                hosts.extend(domains);
                fetched = Some(fetched.map_or(fetched_at_ms, |f| f.min(fetched_at_ms)));
            }
        }
        let rules: Vec<serde_json::Value> = self
            .config
            .rules
            .iter()
            .filter(|r| r.key == KeyKind::Ip)
            .map(|r| {
                let limit = match r.unit {
                    Unit::Requests => u64::from(r.limit.get()),
                    Unit::Bytes => u64::from(r.limit.get()) * Unit::KIB,
                };
                serde_json::json!({
                    "name": r.name.as_str(), "unit": r.unit.as_str(), "limit": limit,
                    "window_secs": r.window_secs.get(),
                })
            })
            .collect();
        let body = serde_json::json!({
            "hosts": hosts,
            "fetched_at": fetched.map(crate::core::calendar::iso),
            "rules": rules,
        });
        let mut response = Response::new(200, "application/json", format!("{body}\n"));
        // No list kept yet: asked again next time, not kept by the browser for minutes.
        if fetched.is_some() {
            for (name, value) in &mut response.headers {
                if *name == "Cache-Control" {
                    *value = format!("public, max-age={MAX_AGE_SECS}");
                }
            }
        }
        response
    }
}

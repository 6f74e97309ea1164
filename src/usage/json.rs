//! The gathered figures in the documented JSON form (docs/usage.md): `resolve stats --json`.

use crate::core::calendar;
use crate::core::journal::{ClientFigures, Figures, HOUR_MS};
use crate::usage::stats::{Stats, Stretch, TOP_CLIENTS};

impl Stats {
    /// The documented JSON form (docs/usage.md): its fields only ever gain siblings.
    pub fn json(&self) -> serde_json::Value {
        let f = &self.figures;
        let clients = |list: Vec<ClientFigures>| -> Vec<serde_json::Value> {
            list.into_iter()
                .map(|c| {
                    serde_json::json!({
                        "client": c.client, "admitted": c.admitted, "refused": c.refused
                    })
                })
                .collect()
        };
        let per_hour: Vec<serde_json::Value> = f
            .paid_per_hour
            .iter()
            .enumerate()
            .map(|(i, paid)| {
                serde_json::json!({
                    "hour": calendar::iso((u64::from(f.from_hour) + i as u64) * HOUR_MS),
                    "paid_calls": paid,
                })
            })
            .collect();
        let mut out = serde_json::json!({
            "from": calendar::iso(u64::from(f.from_hour) * HOUR_MS),
            "to": calendar::iso(u64::from(f.to_hour) * HOUR_MS),
            "paid_calls_saved": f.cache_hits,
            "store_failures": f.store_failures,
            "blocked": f.blocked,
            "auto_blocks": f.auto_blocks,
            "signin_failed": f.signin_failed,
            "signin_refused": f.signin_refused,
            "would_refuse": f.would_refuse,
            "untrusted_networks": f.untrusted_networks,
            "spend": self.spend,
            "top_clients": clients(f.top_refused(TOP_CLIENTS)),
            "top_admitted": clients(f.top_admitted(TOP_CLIENTS)),
            "top_bytes": f.top_bytes(TOP_CLIENTS).into_iter().map(|c| serde_json::json!({
                "client": c.client, "bytes": c.bytes, "admitted": c.admitted,
            })).collect::<Vec<_>>(),
            "paid_per_hour": per_hour,
            "per_hour": self.per(Stretch::Hour).iter().map(|f| stretch_json(Stretch::Hour, f)).collect::<Vec<_>>(),
            "per_day": self.per(Stretch::Day).iter().map(|f| stretch_json(Stretch::Day, f)).collect::<Vec<_>>(),
            "per_month": self.per(Stretch::Month).iter().map(|f| stretch_json(Stretch::Month, f)).collect::<Vec<_>>(),
            "action_needed": self.notes.iter().map(|n| serde_json::json!({
                "at": calendar::iso(n.at_ms), "text": n.text,
            })).collect::<Vec<_>>(),
        });
        merge(&mut out, counts_json(f));
        out["folding"] = match &self.folding {
            None => serde_json::Value::Null,
            Some(now) => serde_json::json!({
                "entries": now.store.entries,
                "entries_before_folding": now.store.cap,
                "max_files": now.store.max_files,
                "max_bytes": now.store.max_bytes,
                "shared_keys": now.store.folded_keys,
                "shared_keys_per_rule": now.store.buckets,
                "networks": now.networks.iter()
                .map(|(network, clients)| serde_json::json!({
                    "network": network, "clients": clients,
                }))
                .collect::<Vec<_>>(),
                "text": self.folding_line(),
            }),
        };
        let reading = |r: &crate::provider::account::Reading, name: Option<&str>| {
            let mut v = r.to_json();
            if let crate::provider::account::Reading::Read { facts, .. } = r {
                v["days_left"] = facts.days_left(self.now_ms).into();
            }
            let warnings = r.warnings(self.now_ms).into_iter();
            v["warnings"] = match name {
                Some(n) => warnings
                    .map(|w| crate::app::account::named(&w, n))
                    .collect::<Vec<_>>(),
                None => warnings.collect(),
            }
            .into();
            v
        };
        out["account"] = self
            .account
            .as_ref()
            .map_or(serde_json::Value::Null, |r| reading(r, None));
        // With several services, each one's reading by its name.
        out["accounts"] = self
            .accounts
            .iter()
            .map(|(name, r)| (name.clone(), reading(r, Some(name))))
            .collect::<serde_json::Map<_, _>>()
            .into();
        out
    }
}

/// One hour's, day's or month's figures in the JSON form: its name, the hours of it the period
/// holds, and the period's counts.
fn stretch_json(stretch: Stretch, f: &Figures) -> serde_json::Value {
    let (field, name) = stretch.label(f.from_hour);
    let mut out = counts_json(f);
    out["hours"] = (f.to_hour - f.from_hour).into();
    out[field] = name.into();
    out
}

/// The counts every period's figures show in the JSON form, the whole period's and each
/// hour's, day's or month's alike.
fn counts_json(f: &Figures) -> serde_json::Value {
    serde_json::json!({
        "requests": f.requests,
        "admitted": f.admitted,
        "paid_calls": f.paid_calls,
        "bytes": f.bytes,
        "cache_hits": f.cache_hits,
        "refunds": f.refunds,
        "refused": f.refused,
        "refused_total": f.refused_total(),
        "spend_refused": f.spend_refused,
        "provider_failures": f.provider_failures,
        "bad_requests": f.bad_requests,
        "services": f.services.iter().map(|(name, s)| (name.clone(), serde_json::json!({
            "calls": s.calls,
            "bytes": s.bytes,
            "failures": s.failures,
        }))).collect::<serde_json::Map<_, _>>(),
    })
}

/// Adds the fields of `more` (an object) to `out` (an object).
fn merge(out: &mut serde_json::Value, more: serde_json::Value) {
    if let (Some(out), serde_json::Value::Object(more)) = (out.as_object_mut(), more) {
        out.extend(more);
    }
}

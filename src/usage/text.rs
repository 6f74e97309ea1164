//! The gathered figures as text for a terminal or a mail: `resolve stats`.

use crate::app::sizes::in_words;
use crate::core::calendar;
use crate::core::journal::HOUR_MS;
use crate::usage::stats::{Stats, Stretch, TOP_CLIENTS, window_words};

impl Stats {
    /// The figures as text for a terminal or a mail.
    pub fn text(&self) -> String {
        let f = &self.figures;
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line(format!(
            "From {} to {} (UTC)",
            calendar::iso(u64::from(f.from_hour) * HOUR_MS),
            calendar::iso(u64::from(f.to_hour) * HOUR_MS)
        ));
        line(String::new());
        line(format!("Paid calls:        {}", f.paid_calls));
        if f.bytes > 0 {
            line(format!(
                "Bytes served:      {} ({}, the files' sizes as the provider gave them)",
                f.bytes,
                in_words(f.bytes, false)
            ));
        }
        line(format!(
            "Cache hits:        {} (paid calls saved)",
            f.cache_hits
        ));
        line(format!(
            "Refunds:           {} (calls that never reached the provider)",
            f.refunds
        ));
        line(format!("Requests:          {}", f.requests));
        line(format!("Admitted:          {}", f.admitted));
        line(format!(
            "Refused (429):     {}{}",
            f.refused_total(),
            by(&f.refused)
        ));
        let spend_refused: u64 = f.spend_refused.values().sum();
        line(format!(
            "Spend refusals:    {spend_refused}{}",
            by(&f.spend_refused)
        ));
        let bad: u64 = f.bad_requests.values().sum();
        line(format!("Bad requests:      {bad}{}", by(&f.bad_requests)));
        let failures: u64 = f.provider_failures.values().sum();
        line(format!(
            "Provider failures: {failures}{}",
            by(&f.provider_failures)
        ));
        // With several services: each one's calls (those that reached it), bytes and failures.
        for (name, service) in &f.services {
            line(format!(
                "  {name}: {} call{}{}{}",
                service.calls,
                if service.calls == 1 { "" } else { "s" },
                match service.bytes {
                    0 => String::new(),
                    n => format!(", {n} bytes ({})", in_words(n, false)),
                },
                match service.failures.values().sum::<u64>() {
                    0 => String::new(),
                    n => format!(", {n} failed{}", by(&service.failures)),
                }
            ));
        }
        if f.store_failures > 0 {
            line(format!("Store failures:    {}", f.store_failures));
        }
        if f.blocked > 0 || f.auto_blocks > 0 {
            line(format!(
                "Blocked (403):     {} ({} client{} blocked automatically)",
                f.blocked,
                f.auto_blocks,
                if f.auto_blocks == 1 { "" } else { "s" }
            ));
        }
        if f.signin_failed > 0 || f.signin_refused > 0 {
            line(format!(
                "Dashboard sign-ins: {} wrong password{}, {} refused past a budget",
                f.signin_failed,
                if f.signin_failed == 1 { "" } else { "s" },
                f.signin_refused
            ));
        }
        if !f.would_refuse.is_empty() {
            let n: u64 = f.would_refuse.values().sum();
            line(format!(
                "Shadow rules:      {n} would have been refused{}",
                by(&f.would_refuse)
            ));
        }
        for (name, n) in &f.untrusted_networks {
            line(format!(
                "Untrusted {name}:  {n} requests came from {name}'s edges, which are not in \
                 client.trusted_proxies: add \"{name}\" there (`resolve check`)"
            ));
        }
        // Longer periods, day by day (and month by month when they hold several).
        let mut stretches = Vec::new();
        if self.hours > 48 {
            stretches.push(("Per day (UTC):", Stretch::Day));
        }
        if self.hours > 62 * 24 {
            stretches.push(("Per month (UTC):", Stretch::Month));
        }
        for (title, stretch) in stretches {
            line(String::new());
            line(format!(
                "{title:<16}{:>12}{:>12}{:>12}{:>12}{:>12}",
                "paid calls", "cache hits", "requests", "admitted", "refused"
            ));
            for f in self.per(stretch) {
                line(format!(
                    "  {:<14}{:>12}{:>12}{:>12}{:>12}{:>12}",
                    stretch.label(f.from_hour).1,
                    f.paid_calls,
                    f.cache_hits,
                    f.requests,
                    f.admitted,
                    f.refused_total()
                ));
            }
        }
        // Bytes served, day by day, when files of known size were served.
        if f.bytes > 0 && self.hours > 24 {
            line(String::new());
            line("Bytes per day (UTC):".into());
            for d in self.per(Stretch::Day) {
                line(format!(
                    "  {:<14}{:>16} {}",
                    Stretch::Day.label(d.from_hour).1,
                    d.bytes,
                    in_words(d.bytes, false)
                ));
            }
        }
        line(String::new());
        if self.spend.is_empty() {
            line("Spend limits: none set (\"spend\" in the configuration)".into());
        } else {
            line("Spend limits (now):".into());
            for s in &self.spend {
                line(format!(
                    "  {}: {} of {} per {} used, {} left",
                    s.name,
                    s.words(s.used, false),
                    s.words(s.limit, true),
                    window_words(s.window_secs),
                    s.words(s.left, false)
                ));
            }
        }
        for (title, list) in [
            ("Top clients by refusals:", f.top_refused(TOP_CLIENTS)),
            (
                "Top clients by admitted requests:",
                f.top_admitted(TOP_CLIENTS),
            ),
        ] {
            line(String::new());
            line(title.into());
            if list.is_empty() {
                line("  none".into());
            }
            for c in list {
                line(format!(
                    "  {:<40} {:>8} admitted {:>8} refused",
                    c.client, c.admitted, c.refused
                ));
            }
        }
        let by_bytes = f.top_bytes(TOP_CLIENTS);
        if !by_bytes.is_empty() {
            line(String::new());
            line("Top clients by bytes served:".into());
            for c in by_bytes {
                line(format!(
                    "  {:<40} {:>16} {}",
                    c.client,
                    c.bytes,
                    in_words(c.bytes, false)
                ));
            }
        }
        line(String::new());
        line("Last ACTION NEEDED events:".into());
        let folding = self.folding_line();
        if let Some(text) = &folding {
            line(format!("  now                   {text}"));
        }
        if self.notes.is_empty() && folding.is_none() {
            line("  none".into());
        }
        for n in self.notes.iter().take(10) {
            line(format!("  {}  {}", calendar::iso(n.at_ms), n.text));
        }
        out
    }
}

/// ` (ip 4, burst 1)`, or nothing when the map is empty.
fn by(map: &std::collections::BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!(" ({})", parts.join(", "))
}

/// Fails unless each of `lines` is a whole line of `text`.
#[cfg(test)]
pub fn assert_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.lines().any(|l| l == *line), "{line:?} in\n{text}");
    }
}

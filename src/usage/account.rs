//! The dashboard's "Account" card: the last reading of the owner's provider account (premium
//! until, days left, fair use as a bar and a percent, host quotas, when it was read), its
//! warnings, or a clear line when it could not be read.

use std::fmt::Write;

use crate::core::calendar;
use crate::provider::account::{Reading, WARN_FAIR_USE};
use crate::support::html::escape;
use crate::usage::stats::Stats;

/// `2026-12-05 08:00 UTC` for a time in milliseconds.
fn when(ms: u64) -> String {
    let at = calendar::iso(ms);
    format!("{} UTC", at[..16].replace('T', " "))
}

/// The card, or nothing while no reading is kept (no account section, or not read yet). With
/// several services, each one's reading under its name.
pub fn card(stats: &Stats) -> String {
    let readings = stats.readings();
    if readings.is_empty() {
        return String::new();
    }
    let mut out =
        String::from("<section aria-labelledby=\"account\">\n<h2 id=\"account\">Account</h2>\n");
    for (name, reading) in readings {
        if let Some(name) = name {
            let _ = writeln!(out, "<h3>{}</h3>", escape(name));
        }
        one(&mut out, reading, stats.now_ms, name);
    }
    out.push_str("</section>\n");
    out
}

/// One reading: its facts and warnings (naming the service `name`, with several), or why it
/// could not be read.
fn one(out: &mut String, reading: &Reading, now: u64, name: Option<&str>) {
    let facts = match reading {
        Reading::Failed { at_ms, reason } => {
            let _ = writeln!(
                out,
                "<div class=\"result\"><div class=\"card error\"><p>The provider account could \
                 not be read on <time datetime=\"{}\">{}</time>: {}. It is tried again an hour \
                 later at the earliest.</p></div></div>",
                escape(&calendar::iso(*at_ms)),
                escape(&when(*at_ms)),
                escape(reason)
            );
            return;
        }
        Reading::Read { facts, .. } => facts,
    };
    let warnings = reading.warnings(now);
    if !warnings.is_empty() {
        out.push_str("<div class=\"result\"><div class=\"card error\">");
        for w in &warnings {
            let w = name.map_or_else(|| w.clone(), |n| crate::app::account::named(w, n));
            let _ = write!(out, "<p>{}</p>", escape(&w));
        }
        out.push_str("</div></div>\n");
    }
    out.push_str("<dl class=\"figures account\">\n");
    match (facts.premium, facts.premium_until_ms) {
        (Some(false), _) => out.push_str("<div><dt>Premium</dt><dd>No</dd></div>\n"),
        (_, Some(until)) => {
            let _ = writeln!(
                out,
                "<div><dt>Premium until</dt><dd><time datetime=\"{}\">{}</time></dd></div>\n\
                 <div><dt>Days left</dt><dd>{}</dd></div>",
                escape(&calendar::iso(until)),
                escape(&calendar::date(until)),
                facts.days_left(now).unwrap_or(0).max(0)
            );
        }
        (Some(true), None) => out.push_str("<div><dt>Premium</dt><dd>Yes</dd></div>\n"),
        (None, None) => {}
    }
    if let Some(used) = facts.fair_use_used {
        let percent = (used * 100.0).round();
        let _ = writeln!(
            out,
            "<div><dt>Fair use spent</dt><dd>{percent:.0}%<meter aria-label=\"Fair use spent\" min=\"0\" max=\"100\" \
             low=\"{warn:.0}\" high=\"{warn:.0}\" optimum=\"0\" value=\"{percent:.0}\">\
             {percent:.0}%</meter></dd></div>",
            warn = WARN_FAIR_USE * 100.0
        );
    }
    out.push_str("</dl>\n");
    if !facts.host_quotas.is_empty() {
        out.push_str(
            "<table>\n<caption>Host quotas left</caption>\n<thead><tr>\
             <th scope=\"col\">Host</th><th scope=\"col\" class=\"n\">Left</th></tr></thead>\n\
             <tbody>\n",
        );
        for (host, left) in &facts.host_quotas {
            let _ = writeln!(
                out,
                "<tr><td class=\"addr\">{}</td><td class=\"n\">{}</td></tr>",
                escape(host),
                escape(left)
            );
        }
        out.push_str("</tbody>\n</table>\n");
    }
    let _ = writeln!(
        out,
        "<p class=\"muted\">Read from the provider on <time datetime=\"{}\">{}</time>; read \
         again a day later, after an admitted request or <code>resolve report</code>.</p>",
        escape(&calendar::iso(reading.at_ms())),
        escape(&when(reading.at_ms()))
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::journal::Figures;
    use crate::provider::account::AccountFacts;

    const NOW: u64 = 1_796_457_600_000;

    fn stats(account: Option<Reading>) -> Stats {
        Stats {
            hours: 24,
            now_ms: NOW,
            figures: Figures::from_rows(&[], 0, 24),
            totals: Vec::new(),
            spend: Vec::new(),
            notes: Vec::new(),
            folding: None,
            account,
            accounts: Vec::new(),
        }
    }

    #[test]
    fn no_reading_no_card() {
        assert_eq!(card(&stats(None)), "");
    }

    #[test]
    fn a_reading_shows_its_facts_and_warnings() {
        let html = card(&stats(Some(Reading::Read {
            at_ms: NOW - 3_600_000,
            facts: AccountFacts {
                premium: Some(true),
                premium_until_ms: Some(NOW + 6 * 86_400_000 + 1),
                fair_use_used: Some(0.86),
                host_quotas: vec![("rapid<gator>.net".into(), "5".into())],
            },
        })));
        for part in [
            "<h2 id=\"account\">Account</h2>",
            "<dt>Premium until</dt><dd><time datetime=\"2026-12-11T08:00:00Z\">2026-12-11</time>",
            "<dt>Days left</dt><dd>6</dd>",
            "<dt>Fair use spent</dt><dd>86%<meter aria-label=\"Fair use spent\"",
            "value=\"86\"",
            "<td class=\"addr\">rapid&lt;gator&gt;.net</td><td class=\"n\">5</td>",
            ">2026-12-05 07:00 UTC</time>",
            "<div class=\"card error\"><p>ACTION NEEDED: the provider account&#39;s premium ends in 6 days",
            "fair use is 86% spent",
        ] {
            assert!(html.contains(part), "{part}\n{html}");
        }
    }

    #[test]
    fn the_json_form_has_the_reading_its_days_left_and_warnings() {
        assert_eq!(stats(None).json()["account"], serde_json::Value::Null);
        let s = stats(Some(Reading::Read {
            at_ms: NOW,
            facts: AccountFacts {
                premium: Some(true),
                premium_until_ms: Some(NOW + 3 * 86_400_000),
                fair_use_used: Some(0.5),
                host_quotas: Vec::new(),
            },
        }));
        let v = &s.json()["account"];
        assert_eq!(v["read_at"], "2026-12-05T08:00:00Z");
        assert_eq!(v["premium_until"], "2026-12-08T08:00:00Z");
        assert_eq!(v["days_left"], 3);
        assert_eq!(v["fair_use_used"], 0.5);
        assert_eq!(v["warnings"].as_array().map(Vec::len), Some(1), "{v}");
    }

    #[test]
    fn with_several_services_each_account_is_shown_under_its_name() {
        let mut s = stats(None);
        s.accounts = vec![
            (
                "realdebrid".into(),
                Reading::Read {
                    at_ms: NOW,
                    facts: AccountFacts {
                        premium: Some(false),
                        premium_until_ms: None,
                        fair_use_used: None,
                        host_quotas: Vec::new(),
                    },
                },
            ),
            (
                "alldebrid".into(),
                Reading::Failed {
                    at_ms: NOW,
                    reason: "the account call answered HTTP 401".into(),
                },
            ),
        ];
        let html = card(&s);
        for part in [
            "<h3>realdebrid</h3>",
            "ACTION NEEDED: the realdebrid account is not premium",
            "<h3>alldebrid</h3>",
            "answered HTTP 401",
        ] {
            assert!(html.contains(part), "{part}\n{html}");
        }
        assert_eq!(html.matches("<section").count(), 1, "{html}");
        let v = s.json();
        assert_eq!(
            v["accounts"]["realdebrid"]["warnings"][0]
                .as_str()
                .map(|w| w.starts_with("ACTION NEEDED: the realdebrid account is not premium")),
            Some(true),
            "{v:#}"
        );
        assert!(v["accounts"]["alldebrid"]["failed"].is_string(), "{v:#}");
    }

    #[test]
    fn a_failed_reading_says_so_plainly() {
        let html = card(&stats(Some(Reading::Failed {
            at_ms: NOW,
            reason: "the account call answered HTTP 401".into(),
        })));
        assert!(
            html.contains(
                "could not be read on <time datetime=\"2026-12-05T08:00:00Z\">2026-12-05 08:00 UTC</time>: the account call answered HTTP 401."
            ),
            "{html}"
        );
        assert!(!html.contains("<dl"), "{html}");
    }
}

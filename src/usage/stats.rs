//! `resolve stats`: the journal's figures over a period, the spend limits' use and the last
//! `ACTION NEEDED` notes, gathered from the store once; `text`, `json` and `html` show them.

use serde::Serialize;

use crate::config::Config;
use crate::core::calendar;
use crate::core::journal::{self, Figures, HOUR_MS, Note, Row};
use crate::provider::account::Reading;
use crate::store::roles::Store;
use crate::store::{Check, StoreError};
use crate::usage::folding::FoldingNow;

/// Clients listed by refusals, and by admitted requests.
pub const TOP_CLIENTS: usize = 10;

/// The periods `--since` takes.
pub const PERIODS: &[(&str, u32)] = &[("24h", 24), ("7d", 7 * 24), ("30d", 30 * 24)];

/// `--since` given text that is not a period (the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAPeriod(pub String);

impl std::fmt::Display for NotAPeriod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--since {:?} is not a period: write 24h, 7d or 30d (or a number of hours or days, \
             up to {} days)",
            self.0,
            journal::KEEP_HOURS / 24
        )
    }
}

impl std::error::Error for NotAPeriod {}

/// The hours of `--since TEXT`: `24h`, `7d` or `30d`, or any `Nh` / `Nd` up to what the
/// journal keeps.
pub fn parse_since(text: &str) -> Result<u32, NotAPeriod> {
    let err = || NotAPeriod(text.to_owned());
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let n: u32 = number.parse().map_err(|_| err())?;
    let hours = match unit {
        "h" => n,
        "d" => n.checked_mul(24).ok_or_else(err)?,
        _ => return Err(err()),
    };
    if hours == 0 || hours > journal::KEEP_HOURS {
        return Err(err());
    }
    Ok(hours)
}

/// One spend limit and how much of it is used now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpendUse {
    pub name: String,
    /// What it counts: requests, or bytes (its counts then in kibibytes); in the JSON only
    /// for a limit of bytes, as the configuration writes it.
    #[serde(skip_serializing_if = "is_requests")]
    pub unit: crate::core::rule::Unit,
    pub limit: u32,
    pub window_secs: u32,
    pub used: u32,
    pub left: u32,
}

impl Stats {
    /// The account readings to show: each service's by its name with several, else the one
    /// provider's, unnamed.
    pub fn readings(&self) -> Vec<(Option<&str>, &Reading)> {
        if self.accounts.is_empty() {
            self.account.iter().map(|r| (None, r)).collect()
        } else {
            self.accounts
                .iter()
                .map(|(name, r)| (Some(name.as_str()), r))
                .collect()
        }
    }
}

fn is_requests(unit: &crate::core::rule::Unit) -> bool {
    *unit == crate::core::rule::Unit::Requests
}

impl SpendUse {
    /// A count of this limit in words: a number of requests, or bytes in decimal units
    /// (`20 GB`) for a limit of bytes, whose counts are kibibytes (`up`: rounded up, as the
    /// limit itself reads).
    pub fn words(&self, count: u32, up: bool) -> String {
        match self.unit {
            crate::core::rule::Unit::Requests => count.to_string(),
            crate::core::rule::Unit::Bytes => {
                crate::app::sizes::in_words(u64::from(count) * crate::core::rule::Unit::KIB, up)
            }
        }
    }
}

/// Everything `stats` shows.
#[derive(Debug, Clone)]
pub struct Stats {
    /// The period, in hours, ending with the current hour.
    pub hours: u32,
    pub now_ms: u64,
    pub figures: Figures,
    /// The period's totals as the journal returned them, hour by hour: what the figures per
    /// hour, day and month are cut from.
    pub totals: Vec<Row>,
    pub spend: Vec<SpendUse>,
    pub notes: Vec<Note>,
    /// New visitors counted by shared keys now, the store being full (the file store's).
    pub folding: Option<FoldingNow>,
    /// The last reading of the owner's provider account, if one is kept.
    pub account: Option<Reading>,
    /// With several services, each one's last reading by its name (empty with one).
    pub accounts: Vec<(String, Reading)>,
}

impl Stats {
    /// Reads the journal's last `hours` hours (the current one included), the spend counters
    /// and the notes from `store`.
    pub fn gather(
        config: &Config,
        store: &Store,
        now_ms: u64,
        hours: u32,
    ) -> Result<Stats, StoreError> {
        let to = journal::hour_of(now_ms).saturating_add(1);
        Stats::gather_hours(config, store, now_ms, to.saturating_sub(hours), to)
    }

    /// The same for the hours `from..to`; the spend limits' use is the use now.
    pub fn gather_hours(
        config: &Config,
        store: &Store,
        now_ms: u64,
        from: u32,
        to: u32,
    ) -> Result<Stats, StoreError> {
        let hours = to.saturating_sub(from);
        let rows = store.journal.journal_rows(from, to)?;
        let budget = config.budget();
        let checks: Vec<Check<'_>> = budget
            .iter()
            .map(|rule| Check {
                rule,
                key: rule.key_for(""),
            })
            .collect();
        let used = if checks.is_empty() {
            Vec::new()
        } else {
            store.counters.used(&checks)?
        };
        let spend = budget
            .iter()
            .zip(used)
            .map(|(rule, used)| SpendUse {
                name: rule.name.as_str().to_owned(),
                unit: rule.unit,
                limit: rule.limit.get(),
                window_secs: rule.window_secs.get(),
                used,
                left: rule.limit.get().saturating_sub(used),
            })
            .collect();
        let figures = Figures::from_rows(&rows, from, to);
        let mut totals = rows;
        totals.retain(|row| matches!(row, Row::Total { .. }));
        Ok(Stats {
            hours,
            now_ms,
            figures,
            totals,
            spend,
            notes: store.notes.journal_notes()?,
            folding: crate::usage::folding::gather(store, now_ms)?,
            account: crate::app::account::kept(&config.data_dir),
            accounts: crate::app::account::kept_by_service(config),
        })
    }

    /// The `ACTION NEEDED` line while new visitors are counted by shared keys; None otherwise.
    pub fn folding_line(&self) -> Option<String> {
        self.folding.as_ref().map(FoldingNow::line)
    }

    /// The notes made within the period.
    pub fn notes_in_period(&self) -> Vec<&Note> {
        let from_ms = u64::from(self.figures.from_hour) * HOUR_MS;
        let to_ms = u64::from(self.figures.to_hour) * HOUR_MS;
        self.notes
            .iter()
            .filter(|n| (from_ms..to_ms).contains(&n.at_ms))
            .collect()
    }

    /// The period's figures per UTC hour, day or month (`Stretch`), oldest first, the first
    /// and the last as far as the period reaches.
    pub fn per(&self, stretch: Stretch) -> Vec<Figures> {
        let (from, to) = (self.figures.from_hour, self.figures.to_hour);
        match stretch {
            Stretch::Hour => Figures::split(&self.totals, from, to, |h| h),
            Stretch::Day => Figures::split(&self.totals, from, to, journal::day_start),
            Stretch::Month => Figures::split(&self.totals, from, to, journal::month_start),
        }
    }
}

/// A stretch of the calendar the figures are cut into (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stretch {
    Hour,
    Day,
    Month,
}

impl Stretch {
    /// The field that names it in the JSON form, and its name: `"day": "2026-12-01"`.
    pub fn label(self, hour: u32) -> (&'static str, String) {
        let at = u64::from(hour) * HOUR_MS;
        match self {
            Stretch::Hour => ("hour", calendar::iso(at)),
            Stretch::Day => ("day", calendar::date(at)),
            Stretch::Month => ("month", calendar::date(at)[..7].to_owned()),
        }
    }
}

/// A window in words: `day`, `30 days`, `hour`, `90 seconds`.
pub fn window_words(secs: u32) -> String {
    let (n, unit) = match secs {
        s if s % 86_400 == 0 => (s / 86_400, "day"),
        s if s % 3_600 == 0 => (s / 3_600, "hour"),
        s if s % 60 == 0 => (s / 60, "minute"),
        s => (s, "second"),
    };
    if n == 1 {
        unit.to_owned()
    } else {
        format!("{n} {unit}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::journal::ClientCount;

    /// The figures of a day holding these totals.
    fn with_totals(totals: &[(&str, u64)]) -> Stats {
        let day = 20_000 * 24;
        let rows: Vec<Row> = totals
            .iter()
            .map(|&(name, count)| Row::Total {
                hour: day + 1,
                name: name.into(),
                count,
            })
            .collect();
        Stats {
            hours: 24,
            now_ms: u64::from(day + 24) * HOUR_MS,
            figures: Figures::from_rows(&rows, day, day + 24),
            totals: rows,
            spend: vec![],
            notes: vec![],
            folding: None,
            account: None,
            accounts: Vec::new(),
        }
    }

    #[test]
    fn the_text_shows_blocks_automatic_blocks_and_what_shadow_rules_would_refuse() {
        let text = with_totals(&[
            ("blocked", 12),
            ("auto_blocked", 2),
            ("would_refuse:tight", 40),
            ("would_refuse:night", 3),
        ])
        .text();
        crate::usage::text::assert_lines(
            &text,
            &[
                "Blocked (403):     12 (2 clients blocked automatically)",
                "Shadow rules:      43 would have been refused (night 3, tight 40)",
            ],
        );
        let one = with_totals(&[("blocked", 1), ("auto_blocked", 1)]).text();
        assert!(
            one.contains("Blocked (403):     1 (1 client blocked automatically)\n"),
            "{one}"
        );
        let quiet = with_totals(&[("paid", 3)]).text();
        assert!(
            !quiet.contains("Blocked") && !quiet.contains("Shadow"),
            "{quiet}"
        );
    }

    #[test]
    fn bytes_per_day_and_the_clients_served_most() {
        let dec_1 = 1_796_083_200 / 3600;
        let client = |hour: u32, who: &str, n: u64| Row::Client {
            hour,
            client: who.into(),
            count: ClientCount::Bytes,
            n,
        };
        let s = stats(
            3 * 24,
            vec![
                total(dec_1 + 1, "bytes", 2_000_000_000),
                total(dec_1 + 25, "bytes", 12_400_000_000),
                client(dec_1 + 1, "203.0.113.7", 2_000_000_000),
                client(dec_1 + 25, "203.0.113.8", 12_000_000_000),
                client(dec_1 + 25, "203.0.113.7", 400_000_000),
            ],
        );
        let json = s.json();
        assert_eq!(json["bytes"], 14_400_000_000u64);
        let days: Vec<u64> = (json["per_day"].as_array().unwrap().iter())
            .map(|d| d["bytes"].as_u64().unwrap())
            .collect();
        assert_eq!(days, [0, 2_000_000_000, 12_400_000_000, 0]);
        assert_eq!(
            json["top_bytes"],
            serde_json::json!([
                {"client": "203.0.113.8", "bytes": 12_000_000_000u64, "admitted": 0},
                {"client": "203.0.113.7", "bytes": 2_400_000_000u64, "admitted": 0},
            ])
        );
        let text = s.text();
        crate::usage::text::assert_lines(
            &text,
            &[
                "Bytes served:      14400000000 (14.4 GB, the files' sizes as the provider gave them)",
                "  2026-12-02         12400000000 12.4 GB",
                "  203.0.113.8                                   12000000000 12 GB",
            ],
        );
        assert!(text.contains("Top clients by bytes served:"), "{text}");
        // None served: no bytes shown.
        let quiet = with_totals(&[("paid", 3)]).text();
        assert!(!quiet.contains("Bytes"), "{quiet}");
    }

    #[test]
    fn windows_in_words() {
        assert_eq!(window_words(86_400), "day");
        assert_eq!(window_words(30 * 86_400), "30 days");
        assert_eq!(window_words(3_600), "hour");
        assert_eq!(window_words(120), "2 minutes");
        assert_eq!(window_words(90), "90 seconds");
    }

    fn total(hour: u32, name: &str, count: u64) -> Row {
        Row::Total {
            hour,
            name: name.into(),
            count,
        }
    }

    /// The last `hours` hours to 2026-12-03 06:00 UTC, with these rows.
    fn stats(hours: u32, rows: Vec<Row>) -> Stats {
        let to = 1_796_083_200 / 3600 + 2 * 24 + 6;
        let from = to - hours;
        Stats {
            hours,
            now_ms: u64::from(to) * HOUR_MS - 1,
            figures: Figures::from_rows(&rows, from, to),
            totals: rows,
            spend: Vec::new(),
            notes: Vec::new(),
            folding: None,
            account: None,
            accounts: Vec::new(),
        }
    }

    #[test]
    fn figures_per_hour_day_and_month() {
        let dec_1 = 1_796_083_200 / 3600;
        let s = stats(
            7 * 24,
            vec![
                total(dec_1 - 20, "paid", 2),
                total(dec_1 - 20, "refused:ip", 1),
                total(dec_1 + 1, "paid", 3),
                total(dec_1 + 2, "provider_failure:timeout", 1),
                total(dec_1 + 24, "cache_hits", 4),
                total(dec_1 + 24, "bad:bad_link", 1),
            ],
        );
        let json = s.json();
        let days = json["per_day"].as_array().unwrap();
        assert_eq!(days.len(), 8, "Nov 26 06:00 to Dec 3 06:00");
        assert_eq!(days[0]["day"], "2026-11-26");
        assert_eq!(days[0]["hours"], 18);
        assert_eq!(
            days[4],
            serde_json::json!({
                "day": "2026-11-30", "hours": 24, "requests": 0, "admitted": 0,
                "paid_calls": 2, "bytes": 0, "cache_hits": 0, "refunds": 0, "refused": {"ip": 1},
                "refused_total": 1, "spend_refused": {}, "provider_failures": {},
                "bad_requests": {}, "services": {},
            })
        );
        assert_eq!(days[5]["paid_calls"], 3);
        assert_eq!(
            days[5]["provider_failures"],
            serde_json::json!({"timeout": 1})
        );
        assert_eq!(days[6]["cache_hits"], 4);
        assert_eq!(days[6]["bad_requests"], serde_json::json!({"bad_link": 1}));
        assert_eq!(days[7]["day"], "2026-12-03");
        assert_eq!(days[7]["hours"], 6);
        let months = json["per_month"].as_array().unwrap();
        let months: Vec<(&str, u64, u64)> = months
            .iter()
            .map(|m| {
                (
                    m["month"].as_str().unwrap(),
                    m["hours"].as_u64().unwrap(),
                    m["paid_calls"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(months, [("2026-11", 114, 2), ("2026-12", 54, 3)]);
        let hours = json["per_hour"].as_array().unwrap();
        assert_eq!(hours.len(), 168);
        assert_eq!(hours[0]["hour"], "2026-11-26T06:00:00Z");
        assert_eq!(hours[114 + 1]["hour"], "2026-12-01T01:00:00Z");
        assert_eq!(hours[114 + 1]["paid_calls"], 3);
        let per_hour_paid: u64 = hours
            .iter()
            .map(|h| h["paid_calls"].as_u64().unwrap())
            .sum();
        assert_eq!(per_hour_paid, json["paid_calls"].as_u64().unwrap());

        // In words: day by day past two days, month by month past two months.
        let text = s.text();
        assert!(text.contains("Per day (UTC):"), "{text}");
        assert!(
            text.contains(
                "  2026-11-30               2           0           0           0           1\n"
            ),
            "{text}"
        );
        assert!(!text.contains("Per month"), "{text}");
        assert!(!stats(24, Vec::new()).text().contains("Per day"));
        let year = stats(400 * 24, Vec::new());
        assert_eq!(
            year.json()["per_month"].as_array().unwrap().len(),
            15,
            "Oct 2025 to Dec 2026"
        );
        assert!(year.text().contains("  2026-11        "), "{}", year.text());
    }

    #[test]
    fn periods_parse() {
        assert_eq!(parse_since("24h"), Ok(24));
        assert_eq!(parse_since("7d"), Ok(168));
        assert_eq!(parse_since("30d"), Ok(720));
        for bad in ["", "h", "0h", "24", "1w", "-1d", "401d", "99999999999d"] {
            let e = parse_since(bad).unwrap_err();
            assert_eq!(e, NotAPeriod(bad.to_owned()));
            assert!(e.to_string().contains("24h, 7d or 30d"), "{bad}: {e}");
        }
        assert_eq!(
            parse_since("1w").unwrap_err().to_string(),
            format!(
                "--since \"1w\" is not a period: write 24h, 7d or 30d (or a number of hours or \
                 days, up to {} days)",
                journal::KEEP_HOURS / 24
            )
        );
    }
}

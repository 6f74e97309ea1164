//! What `resolve stats` shows, as the dashboard's HTML: the period, the money (paid calls, cache
//! hits, refunds, spend limits), a bar chart of paid calls (inline SVG, with a table as its text
//! alternative), the bytes served, the requests and refusals by kind, the top clients and the
//! last `ACTION NEEDED` notes. Pure: it renders a gathered [`Stats`].
//!
//! Long because each section of the usage view is written here with the test of its HTML.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::app::sizes::in_words;
use crate::core::calendar;
use crate::core::journal::{ClientFigures, HOUR_MS};
use crate::support::html::escape;
use crate::usage::stats::{PERIODS, SpendUse, Stats, Stretch, TOP_CLIENTS, window_words};

/// The chart's height in CSS pixels. It has no `viewBox`: it is as wide as the page, its bars
/// placed in percents of that width and its heights in pixels, so that its text keeps the size
/// the stylesheet gives it on a phone as on a desktop (a scaled drawing shrinks its text with it).
const CHART_HEIGHT: u32 = 180;
/// Room for the labels below the bars (the times), and above the tallest bar.
const BOTTOM: u32 = 24;
const TOP: u32 = 8;
/// At most this many times are written under the bars, so that they never run into each other
/// at a phone's width.
const TIME_LABELS: usize = 7;
/// Periods up to this many hours are drawn hour by hour; longer ones day by day.
const HOURLY_UP_TO: u32 = 48;

/// The links to the periods `stats --since` knows, the current one marked.
pub fn periods(action: Option<&str>, hours: u32) -> String {
    let base = action.unwrap_or("admin");
    let mut out = String::from("<nav aria-label=\"Period\"><ul class=\"period\">\n");
    for (name, h) in PERIODS {
        let label = match *h {
            24 => "Last 24 hours".to_owned(),
            h => format!("Last {} days", h / 24),
        };
        let current = if *h == hours {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "<li><a href=\"{}?since={name}\"{current}>{label}</a></li>",
            escape(base)
        );
    }
    out.push_str("</ul></nav>\n");
    out
}

/// `1,234`: thousands grouped, as people read them.
pub fn number(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A row of big figures: each a label and its number, in a description list.
fn figures(list: &[(&str, u64)]) -> String {
    let mut out = String::from("<dl class=\"figures\">\n");
    for (label, n) in list {
        let (label, n) = (escape(label), number(*n));
        let _ = writeln!(out, "<div><dt>{label}</dt><dd>{n}</dd></div>");
    }
    out.push_str("</dl>\n");
    out
}

/// The bytes served each day of the period, as a table.
fn bytes_per_day(stats: &Stats) -> String {
    let mut out = String::from(
        "<table>\n<caption>Bytes served per day</caption>\n<thead><tr><th scope=\"col\">Day \
         (UTC)</th><th scope=\"col\" class=\"n\">Bytes</th></tr></thead>\n<tbody>\n",
    );
    for d in stats.per(Stretch::Day) {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{} ({})</td></tr>",
            escape(&Stretch::Day.label(d.from_hour).1),
            number(d.bytes),
            escape(&in_words(d.bytes, false))
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// A spend limit's count as the dashboard shows it: grouped digits, or bytes in words.
fn spend_count(s: &SpendUse, count: u32, up: bool) -> String {
    match s.unit {
        crate::core::rule::Unit::Requests => number(u64::from(count)),
        crate::core::rule::Unit::Bytes => s.words(count, up),
    }
}

/// The bytes each of several services served, as a table; nothing when none gave a size.
fn bytes_by_service(f: &crate::core::journal::Figures) -> String {
    if f.services.values().all(|s| s.bytes == 0) {
        return String::new();
    }
    let mut out = String::from(
        "<table>\n<caption>Bytes by service</caption>\n<thead><tr><th scope=\"col\">Service\
         </th><th scope=\"col\" class=\"n\">Bytes</th></tr></thead>\n<tbody>\n",
    );
    for (name, s) in &f.services {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{} ({})</td></tr>",
            escape(name),
            number(s.bytes),
            escape(&in_words(s.bytes, false))
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// The clients served the most bytes, as a table; nothing when none was.
fn by_bytes(list: &[ClientFigures]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<table class=\"clients\">\n<caption>By bytes served</caption>\n<thead><tr>\
         <th scope=\"col\">Client</th><th scope=\"col\" class=\"n\">Bytes</th></tr></thead>\n\
         <tbody>\n",
    );
    for c in list {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{} ({})</td></tr>",
            address(&c.client),
            number(c.bytes),
            escape(&in_words(c.bytes, false))
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// A table of name → count, or nothing when there is nothing to count.
fn counts(caption: &str, what: &str, map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<table>\n<caption>{}</caption>\n<thead><tr><th scope=\"col\">{}</th>\
         <th scope=\"col\" class=\"n\">Count</th></tr></thead>\n<tbody>\n",
        escape(caption),
        escape(what)
    );
    for (name, n) in map {
        let (name, n) = (escape(name), number(*n));
        let _ = writeln!(out, "<tr><td>{name}</td><td class=\"n\">{n}</td></tr>");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// Where a block button posts, the session's form token it carries, and the owner's own
/// client (the address the dashboard's request comes from, as the rules count it), which is
/// marked and never offered a button.
pub struct BlockForm<'a> {
    pub action: Option<&'a str>,
    pub csrf: &'a str,
    pub own: Option<&'a str>,
}

/// A client's address, kept on one line (the table gives way around it, never through it).
fn address(client: &str) -> String {
    format!("<span class=\"addr\">{}</span>", escape(client))
}

/// A table of clients, the owner's own (`own`) marked. With `block`, each refused client but
/// the owner's has a **Block 24 h** button in its cell, after the address (below it where the
/// row is narrow).
fn clients(
    caption: &str,
    list: &[ClientFigures],
    own: Option<&str>,
    block: Option<&BlockForm<'_>>,
) -> String {
    let mut out = format!(
        "<table class=\"clients\">\n<caption>{}</caption>\n<thead><tr><th scope=\"col\">Client</th>\
         <th scope=\"col\" class=\"n\">Admitted</th><th scope=\"col\" class=\"n\">Refused</th>\
         </tr></thead>\n<tbody>\n",
        escape(caption)
    );
    if list.is_empty() {
        out.push_str("<tr><td colspan=\"3\">None in this period.</td></tr>\n");
    }
    for c in list {
        let after = match block {
            _ if own == Some(c.client.as_str()) => " <span class=\"muted\">(you)</span>".to_owned(),
            Some(form) if c.refused > 0 => format!(
                " <form method=\"post\"{}>\
                 <input type=\"hidden\" name=\"action\" value=\"block\">\
                 <input type=\"hidden\" name=\"client\" value=\"{}\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                 <button type=\"submit\" aria-label=\"Block 24 h: {}\">Block 24 h</button>\
                 </form>",
                form.action
                    .map_or(String::new(), |a| format!(" action=\"{}\"", escape(a))),
                escape(&c.client),
                escape(form.csrf),
                escape(&c.client)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}{after}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            address(&c.client),
            number(c.admitted),
            number(c.refused)
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// The chart's bars: a label for each (its hour or day, UTC) and its paid calls.
fn buckets(stats: &Stats) -> (Vec<(String, u64)>, &'static str) {
    let f = &stats.figures;
    let start = u64::from(f.from_hour) * HOUR_MS;
    if stats.hours <= HOURLY_UP_TO {
        let bars = f
            .paid_per_hour
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let at = calendar::iso(start + i as u64 * HOUR_MS);
                (format!("{} {}", &at[..10], &at[11..16]), *n)
            })
            .collect();
        (bars, "hour")
    } else {
        // Whole UTC days, the first and last ones as far as the period reaches.
        let mut bars: Vec<(String, u64)> = Vec::new();
        for (i, n) in f.paid_per_hour.iter().enumerate() {
            let day = calendar::date(start + i as u64 * HOUR_MS);
            match bars.last_mut() {
                Some((d, sum)) if *d == day => *sum += n,
                _ => bars.push((day, *n)),
            }
        }
        (bars, "day")
    }
}

/// The bar chart of paid calls, and the same figures as a table for those who cannot see it.
pub fn chart(stats: &Stats) -> String {
    let (bars, unit) = buckets(stats);
    let total: u64 = bars.iter().map(|(_, n)| n).sum();
    let max = bars.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let busiest = bars
        .iter()
        .filter(|(_, n)| *n == max && max > 0)
        .map(|(label, _)| label.as_str())
        .next();
    let summary = match busiest {
        Some(label) => format!(
            "{} paid calls in this period; the busiest {unit}, {label} UTC, had {}.",
            number(total),
            number(max)
        ),
        None => "No paid calls in this period.".to_owned(),
    };
    let plot_h = CHART_HEIGHT - TOP - BOTTOM;
    let base_y = TOP + plot_h;
    // Each bar's slot, in percent of the chart's width.
    let slot = 100.0 / bars.len().max(1) as f64;
    let scale = max.max(1) as f64;
    // The scale beside the plot is the page's own text: the drawing then needs no room of a
    // fixed width on its left. Screen readers have the summary and the table instead.
    let mut svg = format!(
        "<div class=\"chart-frame\">\n<div class=\"scale\" aria-hidden=\"true\">\
         <span>{}</span><span>0</span></div>\n\
         <svg class=\"chart\" width=\"100%\" height=\"{CHART_HEIGHT}\" role=\"img\" \
         aria-labelledby=\"chart-title chart-desc\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <title id=\"chart-title\">Paid calls per {unit}</title>\n\
         <desc id=\"chart-desc\">{}</desc>\n",
        number(max),
        escape(&summary)
    );
    let _ = writeln!(
        svg,
        "<line class=\"axis\" x1=\"0\" y1=\"{base_y}\" x2=\"100%\" y2=\"{base_y}\"/>"
    );
    let every = bars.len().div_ceil(TIME_LABELS).max(1);
    for (i, (label, calls)) in bars.iter().enumerate() {
        let h = (*calls as f64 / scale * f64::from(plot_h)).round();
        let x = slot * i as f64 + slot * 0.1;
        let _ = writeln!(
            svg,
            "<rect class=\"column\" x=\"{x:.2}%\" y=\"{:.1}\" width=\"{:.2}%\" height=\"{h:.1}\">\
             <title>{} UTC: {} paid calls</title></rect>",
            f64::from(base_y) - h,
            slot * 0.8,
            escape(label),
            number(*calls)
        );
        if i % every == 0 {
            let short = if unit == "hour" {
                &label[11..]
            } else {
                &label[5..]
            };
            let _ = writeln!(
                svg,
                "<text x=\"{:.2}%\" y=\"{}\" text-anchor=\"middle\">{short}</text>",
                x + slot * 0.4,
                CHART_HEIGHT - 6
            );
        }
    }
    svg.push_str("</svg>\n</div>\n");
    let mut table = format!(
        "<details>\n<summary>Paid calls per {unit}, as a table</summary>\n<table>\n\
         <thead><tr><th scope=\"col\">{} (UTC)</th><th scope=\"col\" class=\"n\">Paid calls</th>\
         </tr></thead>\n<tbody>\n",
        if unit == "hour" { "Hour" } else { "Day" }
    );
    for (label, calls) in &bars {
        let _ = writeln!(
            table,
            "<tr><td>{}</td><td class=\"n\">{}</td></tr>",
            escape(label),
            number(*calls)
        );
    }
    table.push_str("</tbody>\n</table>\n</details>\n");
    format!("<p>{}</p>\n{svg}{table}", escape(&summary))
}

/// Every section of the figures, in the order the page shows them.
pub fn sections(stats: &Stats, action: Option<&str>, block: Option<&BlockForm<'_>>) -> String {
    let f = &stats.figures;
    let from = calendar::iso(u64::from(f.from_hour) * HOUR_MS);
    let to = calendar::iso(u64::from(f.to_hour) * HOUR_MS);
    let mut out = periods(action, stats.hours);
    let _ = writeln!(
        out,
        "<p class=\"muted\">From {} to {} (UTC), counted by the usage journal.</p>",
        escape(&from.replace('T', " ").replace(":00Z", "")),
        escape(&to.replace('T', " ").replace(":00Z", ""))
    );

    out.push_str("<section aria-labelledby=\"money\">\n<h2 id=\"money\">Paid calls</h2>\n");
    out.push_str(&figures(&[
        ("Paid calls", f.paid_calls),
        ("Cache hits (paid calls saved)", f.cache_hits),
        ("Refunds (never reached the provider)", f.refunds),
    ]));
    if f.bytes > 0 {
        out.push_str(&figures(&[("Bytes served", f.bytes)]));
        out.push_str(&bytes_per_day(stats));
    }
    if stats.spend.is_empty() {
        out.push_str(
            "<p>No spend limit is set (<code>spend</code> in the configuration): nothing caps \
             what the site spends.</p>\n",
        );
    } else {
        out.push_str(
            "<table>\n<caption>Spend limits, now</caption>\n<thead><tr>\
             <th scope=\"col\">Limit</th><th scope=\"col\" class=\"n\">Used</th>\
             <th scope=\"col\" class=\"n\">Of</th><th scope=\"col\" class=\"n\">Left</th>\
             <th scope=\"col\">Per</th></tr></thead>\n<tbody>\n",
        );
        for s in &stats.spend {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td>{}</td></tr>",
                escape(&s.name),
                escape(&spend_count(s, s.used, false)),
                escape(&spend_count(s, s.limit, true)),
                escape(&spend_count(s, s.left, false)),
                escape(&window_words(s.window_secs))
            );
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("</section>\n");

    out.push_str(&crate::usage::account::card(stats));

    out.push_str(
        "<section aria-labelledby=\"per-hour\">\n<h2 id=\"per-hour\">Paid calls over time</h2>\n",
    );
    out.push_str(&chart(stats));
    out.push_str("</section>\n");

    let sum = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    out.push_str("<section aria-labelledby=\"requests\">\n<h2 id=\"requests\">Requests</h2>\n");
    let mut list = vec![
        ("Requests", f.requests),
        ("Admitted", f.admitted),
        ("Refused (429)", f.refused_total()),
        ("Spend refusals", sum(&f.spend_refused)),
        ("Bad requests", sum(&f.bad_requests)),
        ("Provider failures", sum(&f.provider_failures)),
    ];
    if f.blocked > 0 || f.auto_blocks > 0 {
        list.push(("Blocked (403)", f.blocked));
    }
    if f.store_failures > 0 {
        list.push(("Store failures", f.store_failures));
    }
    if f.signin_failed > 0 || f.signin_refused > 0 {
        list.push(("Failed sign-ins", f.signin_failed));
        list.push(("Sign-ins refused (429)", f.signin_refused));
    }
    out.push_str(&figures(&list));
    // With several services: each one's calls, and its failures by kind.
    let service_calls: BTreeMap<String, u64> = f
        .services
        .iter()
        .map(|(name, s)| (name.clone(), s.calls))
        .collect();
    let service_failures: BTreeMap<String, u64> = f
        .services
        .iter()
        .flat_map(|(name, s)| {
            s.failures
                .iter()
                .map(move |(class, n)| (format!("{name}: {class}"), *n))
        })
        .collect();
    let tables = [
        counts("Refused by rule", "Rule", &f.refused),
        counts("Spend refusals by limit", "Limit", &f.spend_refused),
        counts("Provider failures by kind", "Kind", &f.provider_failures),
        counts("Calls by service", "Service", &service_calls),
        counts("Failures by service", "Service and kind", &service_failures),
        bytes_by_service(f),
        counts("Bad requests by reason", "Reason", &f.bad_requests),
        counts("Shadow rules: would have refused", "Rule", &f.would_refuse),
    ]
    .concat();
    if !tables.is_empty() {
        let _ = write!(out, "<div class=\"tables\">\n{tables}</div>\n");
    }
    for (name, n) in &f.untrusted_networks {
        let _ = writeln!(
            out,
            "<div class=\"result\"><div class=\"card wait\"><p>{} requests came from {}'s \
             edges, which are not in <code>client.trusted_proxies</code>: its visitors share one \
             counter. Add \"{}\" there.</p></div></div>",
            number(*n),
            escape(name),
            escape(name)
        );
    }
    out.push_str("</section>\n");

    out.push_str(
        "<section aria-labelledby=\"clients\">\n<h2 id=\"clients\">Top clients</h2>\n\
         <div class=\"tables\">\n",
    );
    let own = block.and_then(|b| b.own);
    out.push_str(&clients(
        "By refusals",
        &f.top_refused(TOP_CLIENTS),
        own,
        block,
    ));
    out.push_str(&clients(
        "By admitted requests",
        &f.top_admitted(TOP_CLIENTS),
        own,
        None,
    ));
    out.push_str(&by_bytes(&f.top_bytes(TOP_CLIENTS)));
    out.push_str("</div>\n</section>\n");

    out.push_str("<section aria-labelledby=\"action\">\n<h2 id=\"action\">Action needed</h2>\n");
    let folding = stats.folding_line();
    if let Some(text) = &folding {
        let button = block.map_or(String::new(), |form| {
            format!(
                "<form method=\"post\"{}>\
                 <input type=\"hidden\" name=\"action\" value=\"clear-shared\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                 <button type=\"submit\">Clear the shared counters</button></form>",
                form.action
                    .map_or(String::new(), |a| format!(" action=\"{}\"", escape(a))),
                escape(form.csrf)
            )
        });
        let _ = writeln!(
            out,
            "<div class=\"result\"><div class=\"card error\"><p>{}</p>{button}</div></div>",
            escape(text)
        );
    }
    if stats.notes.is_empty() && folding.is_none() {
        out.push_str("<p>Nothing to act on: no <code>ACTION NEEDED</code> line was logged.</p>\n");
    } else if !stats.notes.is_empty() {
        out.push_str("<ul>\n");
        for n in stats.notes.iter().take(10) {
            let at = calendar::iso(n.at_ms);
            let _ = writeln!(
                out,
                "<li><time datetime=\"{}\">{} UTC</time>: {}</li>",
                escape(&at),
                escape(&at[..16].replace('T', " ")),
                escape(&n.text)
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::journal::{Figures, Note, ServiceFigures};
    use crate::usage::stats::SpendUse;

    /// 2026-12-01 00:00 UTC, in hours since 1970.
    const DAY_START: u32 = 1_796_083_200 / 3600;

    fn stats(hours: u32, paid: &[u64]) -> Stats {
        let mut per_hour = vec![0; hours as usize];
        for (i, n) in paid.iter().enumerate() {
            per_hour[i] = *n;
        }
        let figures = Figures {
            from_hour: DAY_START,
            to_hour: DAY_START + hours,
            requests: 1234,
            admitted: 1200,
            paid_calls: paid.iter().sum(),
            cache_hits: 7,
            refused: [("ip".to_owned(), 34)].into(),
            paid_per_hour: per_hour,
            clients: vec![ClientFigures {
                client: "203.0.113.<7>".into(),
                admitted: 3,
                refused: 9,
                bytes: 0,
            }],
            ..Figures::default()
        };
        Stats {
            hours,
            now_ms: u64::from(DAY_START + hours) * HOUR_MS,
            figures,
            totals: Vec::new(),
            spend: vec![SpendUse {
                name: "day".into(),
                unit: crate::core::rule::Unit::Requests,
                limit: 100,
                window_secs: 86_400,
                used: 40,
                left: 60,
            }],
            notes: vec![Note {
                at_ms: u64::from(DAY_START) * HOUR_MS + 90_000,
                text: "ACTION NEEDED: the provider refused the <token>".into(),
            }],
            folding: None,
            account: None,
            accounts: Vec::new(),
        }
    }

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(number(0), "0");
        assert_eq!(number(999), "999");
        assert_eq!(number(1000), "1,000");
        assert_eq!(number(1_234_567), "1,234,567");
    }

    #[test]
    fn every_figure_is_shown_and_escaped() {
        let html = sections(
            &stats(24, &[1, 0, 5, 2]),
            Some("/cgi-bin/resolve/admin"),
            None,
        );
        for shown in [
            "<dt>Paid calls</dt><dd>8</dd>",
            "<dt>Cache hits (paid calls saved)</dt><dd>7</dd>",
            "<dt>Requests</dt><dd>1,234</dd>",
            "<dt>Refused (429)</dt><dd>34</dd>",
            "<tr><td>day</td><td class=\"n\">40</td><td class=\"n\">100</td><td class=\"n\">60</td><td>day</td></tr>",
            "<tr><td>ip</td><td class=\"n\">34</td></tr>",
            "203.0.113.&lt;7&gt;",
            "refused the &lt;token&gt;",
            "2026-12-01 00:01 UTC",
            "<a href=\"/cgi-bin/resolve/admin?since=24h\" aria-current=\"page\">Last 24 hours</a>",
            "<a href=\"/cgi-bin/resolve/admin?since=7d\">Last 7 days</a>",
        ] {
            assert!(html.contains(shown), "{shown} in\n{html}");
        }
        assert!(!html.contains("<7>") && !html.contains("<token>"));
    }

    #[test]
    fn each_services_calls_and_failures_are_shown() {
        let mut s = stats(24, &[2]);
        s.figures.services = [
            (
                "realdebrid".to_owned(),
                ServiceFigures {
                    calls: 1,
                    failures: [("server_refused".to_owned(), 1)].into(),
                    ..Default::default()
                },
            ),
            (
                "alldebrid".to_owned(),
                ServiceFigures {
                    calls: 1,
                    bytes: 12_400_000_000,
                    ..Default::default()
                },
            ),
        ]
        .into();
        let html = sections(&s, None, None);
        for shown in [
            "<caption>Calls by service</caption>",
            "<caption>Bytes by service</caption>",
            "<tr><td>alldebrid</td><td class=\"n\">12,400,000,000 (12.4 GB)</td></tr>",
            "<tr><td>realdebrid</td><td class=\"n\">0 (0 bytes)</td></tr>",
            "<tr><td>alldebrid</td><td class=\"n\">1</td></tr>",
            "<tr><td>realdebrid: server_refused</td><td class=\"n\">1</td></tr>",
        ] {
            assert!(html.contains(shown), "{shown} in\n{html}");
        }
    }

    #[test]
    fn the_chart_has_a_bar_per_hour_and_says_what_it_shows() {
        let html = chart(&stats(24, &[1, 0, 5, 2]));
        assert_eq!(html.matches("<rect class=\"column\"").count(), 24);
        holds(
            &html,
            &[
                "<title id=\"chart-title\">Paid calls per hour</title>",
                "8 paid calls in this period; the busiest hour, 2026-12-01 02:00 UTC, had 5.",
                "<title>2026-12-01 02:00 UTC: 5 paid calls</title>",
                // The tallest bar fills the plot; an empty hour has no height. Across, the
                // drawing is in percents of the page's width, and has no viewBox to scale it.
                "height=\"148.0\"><title>2026-12-01 02:00",
                "height=\"0.0\"><title>2026-12-01 01:00",
                "<rect class=\"column\" x=\"8.75%\" y=\"8.0\" width=\"3.33%\"",
                "<span>5</span><span>0</span>",
                // The same figures as a table.
                "<tr><td>2026-12-01 02:00</td><td class=\"n\">5</td></tr>",
            ],
        );
        assert!(
            !html.contains("style=") && !html.contains("viewBox"),
            "the policy allows no style attribute; a viewBox would shrink the text"
        );
        // Six times under 24 bars: every fourth hour.
        assert_eq!(html.matches("<text ").count(), 6, "{html}");
        assert!(chart(&stats(24, &[])).contains("No paid calls in this period."));
    }

    #[test]
    fn a_longer_period_is_drawn_day_by_day() {
        let mut paid = vec![0; 7 * 24];
        paid[0] = 2;
        paid[23] = 3;
        paid[24] = 4;
        let html = chart(&stats(7 * 24, &paid));
        assert_eq!(html.matches("<rect class=\"column\"").count(), 7, "{html}");
        holds(
            &html,
            &[
                "Paid calls per day",
                "<tr><td>2026-12-01</td><td class=\"n\">5</td></tr>",
                "<tr><td>2026-12-02</td><td class=\"n\">4</td></tr>",
            ],
        );
    }

    #[test]
    fn the_owners_own_address_is_marked_and_has_no_block_button() {
        let mut s = stats(24, &[1]);
        s.figures.clients.push(ClientFigures {
            client: "2001:db8:85a3:1234::/64".into(),
            admitted: 5,
            refused: 2,
            bytes: 0,
        });
        let form = BlockForm {
            action: Some("/cgi-bin/resolve/admin"),
            csrf: "tok",
            own: Some("2001:db8:85a3:1234::/64"),
        };
        let html = sections(&s, form.action, Some(&form));
        holds(
            &html,
            &[
                "<td><span class=\"addr\">2001:db8:85a3:1234::/64</span> \
                 <span class=\"muted\">(you)</span></td>",
                // Another refused client has its button, named by what it shows first.
                "<td><span class=\"addr\">203.0.113.&lt;7&gt;</span> <form method=\"post\" \
                 action=\"/cgi-bin/resolve/admin\">",
                "aria-label=\"Block 24 h: 203.0.113.&lt;7&gt;\">Block 24 h</button>",
            ],
        );
        assert_eq!(html.matches("value=\"block\"").count(), 1, "{html}");
        assert_eq!(html.matches("(you)").count(), 2, "both tables: {html}");
    }

    #[test]
    fn bytes_served_show_when_files_of_known_size_were() {
        let mut s = stats(24, &[1]);
        let quiet = sections(&s, None, None);
        assert!(!quiet.contains("Bytes"), "{quiet}");
        s.figures.bytes = 12_400_000_000;
        s.figures.clients[0].bytes = 12_400_000_000;
        let html = sections(&s, None, None);
        holds(
            &html,
            &[
                "<dt>Bytes served</dt><dd>",
                "<caption>Bytes served per day</caption>",
                "<caption>By bytes served</caption>",
                "(12.4 GB)</td></tr>",
            ],
        );
    }

    /// Fails unless `html` holds each of `parts`.
    fn holds(html: &str, parts: &[&str]) {
        for part in parts {
            assert!(html.contains(part), "{part:?} in\n{html}");
        }
    }
}

//! The dashboard shows what `resolve stats --json` says: the owner signs in, and every figure
//! of the page (the money, the spend limits, the paid calls of each hour, the requests and
//! refusals by kind, both lists of top clients, the `ACTION NEEDED` lines) is compared with the
//! JSON's.

use resolve::support::html::escape;
use serde_json::Value;

use crate::sum;
use crate::support::Site;
use crate::support::dashboard::Browser;

/// The figures of a `<dl class="figures">`: each `<dt>` with its `<dd>`.
fn figure(page: &str, label: &str) -> u64 {
    let marker = format!("<dt>{label}</dt><dd>");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no figure {label:?} in\n{page}"));
    let rest = &page[at + marker.len()..];
    rest[..rest.find("</dd>").expect("</dd>")]
        .replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("{label}: {e}"))
}

/// The part of `page` from `start` to the next `end`.
fn between<'a>(page: &'a str, start: &str, end: &str) -> &'a str {
    let at = page
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in\n{page}"));
    let rest = &page[at..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

/// The rows of a table's body as the text of their `<td>` cells: a client's address, or the
/// cell's text before any tag.
fn rows(table: &str) -> Vec<Vec<String>> {
    let body = between(table, "<tbody>", "</tbody>");
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let cell = &cell[cell.find('>').map_or(0, |i| i + 1)..];
                    let cell = &cell[..cell.find("</td>").unwrap_or(cell.len())];
                    let cell = cell.strip_prefix("<span class=\"addr\">").unwrap_or(cell);
                    cell[..cell.find('<').unwrap_or(cell.len())].replace(',', "")
                })
                .collect()
        })
        .collect()
}

/// A table of name -> count as a JSON object, as the stats give it.
fn counts(page: &str, caption: &str) -> Value {
    let marker = format!("<caption>{caption}</caption>");
    if !page.contains(&marker) {
        return Value::Object(Default::default());
    }
    let table = between(page, &marker, "</table>");
    Value::Object(
        rows(table)
            .into_iter()
            .map(|r| (r[0].clone(), r[1].parse::<u64>().expect("a count").into()))
            .collect(),
    )
}

/// A table of top clients as the stats list them.
fn clients(page: &str, caption: &str) -> Vec<Value> {
    let table = between(page, &format!("<caption>{caption}</caption>"), "</table>");
    rows(table)
        .into_iter()
        .map(|r| {
            serde_json::json!({
                "client": r[0],
                "admitted": r[1].parse::<u64>().expect("admitted"),
                "refused": r[2].parse::<u64>().expect("refused"),
            })
        })
        .collect()
}

/// The rows a table shows for the JSON array `list`, each made by `row`.
fn table_of(list: &Value, row: impl Fn(&Value) -> Vec<String>) -> Vec<Vec<String>> {
    list.as_array().expect("an array").iter().map(row).collect()
}

/// Signs in to the site's dashboard and compares its figures with `resolve stats --json`'s.
pub fn expect_the_figures_of_stats(site: &Site) {
    let mut browser = Browser::new(site);
    let r = browser.sign_in(crate::PASSWORD);
    assert_eq!(r.status, 303, "{}", r.everything());
    let page = browser.get();
    assert_eq!(page.status, 200, "{}", page.everything());
    let page = page.text();
    let s = crate::stats_json(site);
    let n = |field: &str| s[field].as_u64().unwrap_or_else(|| panic!("{field}"));

    for (label, expected) in [
        ("Paid calls", n("paid_calls")),
        ("Cache hits (paid calls saved)", n("cache_hits")),
        ("Refunds (never reached the provider)", n("refunds")),
        ("Requests", n("requests")),
        ("Admitted", n("admitted")),
        ("Refused (429)", n("refused_total")),
        ("Spend refusals", sum(&s["spend_refused"])),
        ("Bad requests", sum(&s["bad_requests"])),
        ("Provider failures", sum(&s["provider_failures"])),
    ] {
        assert_eq!(figure(&page, label), expected, "{label}");
    }
    for (caption, field) in [
        ("Refused by rule", "refused"),
        ("Spend refusals by limit", "spend_refused"),
        ("Provider failures by kind", "provider_failures"),
        ("Bad requests by reason", "bad_requests"),
    ] {
        assert_eq!(counts(&page, caption), s[field], "{caption}");
    }

    let spend = rows(between(
        &page,
        "<caption>Spend limits, now</caption>",
        "</table>",
    ));
    let expected = table_of(&s["spend"], |l| {
        vec![
            l["name"].as_str().unwrap().to_owned(),
            l["used"].to_string(),
            l["limit"].to_string(),
            l["left"].to_string(),
            "day".to_owned(),
        ]
    });
    assert_eq!(spend, expected, "spend limits");

    // Paid calls hour by hour: the chart's table holds the same 24 hours as the JSON.
    let hours = rows(between(
        &page,
        "Paid calls per hour, as a table",
        "</table>",
    ));
    let expected = table_of(&s["paid_per_hour"], |h| {
        let at = h["hour"].as_str().unwrap();
        vec![
            format!("{} {}", &at[..10], &at[11..16]),
            h["paid_calls"].to_string(),
        ]
    });
    assert_eq!(hours, expected, "paid calls per hour");
    assert!(
        page.contains(&format!("{} paid calls in this period", n("paid_calls"))),
        "{page}"
    );

    assert_eq!(
        clients(&page, "By refusals"),
        s["top_clients"].as_array().unwrap()[..],
        "top clients by refusals"
    );
    assert_eq!(
        clients(&page, "By admitted requests"),
        s["top_admitted"].as_array().unwrap()[..],
        "top clients by admitted requests"
    );

    let action = between(&page, "<h2 id=\"action\">", "</section>");
    let shown: Vec<&str> = action
        .split("</time>: ")
        .skip(1)
        .map(|item| &item[..item.find("</li>").expect("</li>")])
        .collect();
    let expected: Vec<String> = s["action_needed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|note| escape(note["text"].as_str().unwrap()))
        .collect();
    assert_eq!(shown, expected, "ACTION NEEDED lines");
    assert!(!page.contains(crate::support::config::TOKEN));
}

//! The setup and settings forms as data: the fields a form sent, the values the configuration
//! holds now (what the form is filled with), and the changes to the configuration's JSON a
//! valid form makes, only where a value differs. Secrets (the setup code, the provider's token,
//! the password) are read but never shown back. Pure: no I/O; the password is hashed by the
//! caller.
//! Long because each field of the forms is read, compared and turned into edits here, in one
//! place, with what the configuration's limits (requests and bytes), `max_file_bytes` and
//! `request.max_links` need.

use serde_json::{Value, json};

use crate::config::json_text::Edit;
use crate::config::schema::{self, Field, Limits};
use crate::net::form;
use crate::support::defaults;

/// A day and 30 days, in seconds: the windows of the spend limits the forms show.
const DAY: u64 = 86_400;
const MONTH: u64 = 30 * DAY;
/// A minute: the window of the per-visitor limit the forms show beside the day.
const MINUTE: u64 = 60;

/// The provider choices: the echo provider (nothing spent), then the presets.
pub fn providers() -> Vec<(&'static str, &'static str)> {
    let mut list = vec![(
        "echo",
        "Echo: each link answered with itself (to try the site)",
    )];
    for (name, label) in [
        ("realdebrid", "Real-Debrid"),
        ("alldebrid", "AllDebrid"),
        ("premiumize", "Premiumize.me"),
        ("debridlink", "Debrid-Link"),
        ("torbox", "TorBox"),
    ] {
        if crate::provider::presets::NAMES.contains(&name) {
            list.push((name, label));
        }
    }
    list
}

/// What the form shows and sends, secrets aside: each as text, as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    /// A preset's name, `echo`, or `custom` (a provider written by hand, kept as it is).
    pub provider: String,
    /// The site's addresses, one a line (setup only).
    pub site: String,
    pub spend_day: String,
    pub spend_month: String,
    pub visitor_minute: String,
    pub visitor_day: String,
    /// Bytes per visitor a day: a rule of bytes (`"unit": "bytes"`) by address.
    pub visitor_bytes_day: String,
    /// The largest file served, in bytes (`max_file_bytes`).
    pub max_file_bytes: String,
    /// The most links one request may carry (`request.max_links`).
    pub max_links: String,
    /// One per line.
    pub origins: String,
    pub block: String,
    pub allow: String,
    /// The confirmation the form's second step sent: what it confirms (see [`Confirm`]).
    pub confirm: String,
    /// The challenge's public site key (settings only).
    pub challenge_site_key: String,
}

/// What the form sends that is never shown back.
#[derive(Default)]
pub struct Secrets {
    pub code: String,
    pub token: String,
    pub password: String,
    pub again: String,
    /// The current password, which a change of the password, the token or the provider needs.
    pub current: String,
    /// The challenge's secret key: written, never shown back.
    pub challenge_secret: String,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(***)")
    }
}

/// One field of a form body, decoded; empty when missing or not text.
pub fn field(body: &[u8], name: &str) -> String {
    form::raw_values(body, name)
        .first()
        .and_then(|raw| form::decode(raw).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_default()
}

impl Values {
    /// The values a form sent.
    pub fn from_form(body: &[u8]) -> Values {
        Values {
            provider: field(body, "provider"),
            site: field(body, "site"),
            spend_day: field(body, "spend_day"),
            spend_month: field(body, "spend_month"),
            visitor_minute: field(body, "visitor_minute"),
            visitor_day: field(body, "visitor_day"),
            visitor_bytes_day: field(body, "visitor_bytes_day"),
            max_file_bytes: field(body, "max_file_bytes"),
            max_links: field(body, "max_links"),
            origins: field(body, "origins"),
            block: field(body, "block"),
            allow: field(body, "allow"),
            confirm: field(body, "confirm"),
            challenge_site_key: field(body, "challenge_site_key"),
        }
    }

    /// The values the configuration `json` holds now; `site`: the address the request came
    /// to, for the setup form.
    pub fn of(json: &Value, site: &str) -> Values {
        let provider = if let Some(p) = schema::PROVIDER_PRESET.of(json).as_str() {
            p.to_owned()
        } else if schema::PROVIDER.of(json).is_null() || schema::PROVIDER_KIND.of(json) == "echo" {
            "echo".to_owned()
        } else {
            "custom".to_owned()
        };
        let number = |list: &Limits, window: u64, ip: bool| {
            find(json, list, (window, ip, false))
                .and_then(|i| list.limit.of_item(json, i).as_u64())
                .map_or(String::new(), |n| n.to_string())
        };
        let lines = |field: Field| {
            field
                .of(json)
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        };
        let mut values = Values {
            provider,
            site: site.to_owned(),
            spend_day: number(&schema::SPEND_LIMITS, DAY, false),
            spend_month: number(&schema::SPEND_LIMITS, MONTH, false),
            visitor_minute: number(&schema::RULE_LIMITS, MINUTE, true),
            visitor_day: number(&schema::RULE_LIMITS, DAY, true),
            visitor_bytes_day: find(json, &schema::RULE_LIMITS, (DAY, true, true))
                .and_then(|i| schema::RULE_LIMIT.of_item(json, i).as_u64())
                .map_or(String::new(), |n| n.to_string()),
            max_file_bytes: schema::MAX_FILE_BYTES
                .of(json)
                .as_u64()
                .map_or(String::new(), |n| n.to_string()),
            max_links: schema::REQUEST_MAX_LINKS
                .of(json)
                .as_u64()
                .map_or(String::new(), |n| n.to_string()),
            origins: lines(schema::ALLOWED_ORIGINS),
            block: lines(schema::BLOCK),
            allow: lines(schema::ALLOW),
            confirm: String::new(),
            challenge_site_key: schema::CHALLENGE_SITE_KEY
                .of(json)
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        };
        if schema::RULES.find(json, &[]).is_none() {
            // The rule that applies when the file names none.
            if u64::from(defaults::RULE_WINDOW_SECS) == MINUTE {
                values.visitor_minute = defaults::RULE_LIMIT.to_string();
            }
        }
        values
    }
}

impl Secrets {
    pub fn from_form(body: &[u8]) -> Secrets {
        Secrets {
            code: field(body, "code"),
            token: field(body, "token"),
            password: field(body, "password"),
            again: field(body, "password_again"),
            current: field(body, "current_password"),
            challenge_secret: field(body, "challenge_secret"),
        }
    }
}

/// What is wrong with one field, in words for the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The form field's name (`provider`, `spend_day`...), or `file` for the whole file.
    pub field: &'static str,
    pub text: String,
}

fn problem(field: &'static str, text: impl Into<String>) -> Problem {
    Problem {
        field,
        text: text.into(),
    }
}

/// The changes a valid form makes: edits of the JSON text, and a new password to hash.
#[derive(Debug, Default)]
pub struct Change {
    pub edits: Vec<Edit<'static>>,
    pub password: Option<String>,
}

impl Change {
    /// Whether it changes what a stolen session must not change without the password: the
    /// password, the provider or its token, the challenge's keys.
    pub fn needs_password(&self) -> bool {
        self.password.is_some()
            || self.edits.iter().any(|e| {
                e.path.first() == schema::PROVIDER.steps().first()
                    || e.path.first() == schema::CHALLENGE.steps().first()
            })
    }
}

/// What a form would write that the owner must confirm apart, in a second step that names it:
/// new `block` and `allow` entries the lists' judgement flags (`app::controls::reach`), and
/// visitor limits all taken away.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confirm {
    /// Each concern: the field it is about and the sentence that says what it does.
    pub concerns: Vec<(&'static str, String)>,
}

impl Confirm {
    /// What the confirmation's checkbox sends: the concerns' fields and ranges, so that a
    /// confirmation of one set of concerns never passes another.
    pub fn key(&self) -> String {
        self.concerns
            .iter()
            .map(|(field, text)| {
                let range = text.split(' ').next().unwrap_or_default();
                format!("{field}:{range}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether the form sent the confirmation of exactly these concerns (none: nothing to
    /// confirm).
    pub fn confirmed_by(&self, values: &Values) -> bool {
        self.concerns.is_empty() || values.confirm == self.key()
    }
}

/// What the settings form `values` would write, against the configuration `json` holds now,
/// that must be confirmed: the owner writing from `owner`.
pub fn to_confirm(values: &Values, json: &Value, owner: Option<std::net::IpAddr>) -> Confirm {
    use crate::app::controls::reach::{self, List};
    let now = Values::of(json, &values.site);
    let mut concerns = Vec::new();
    for (field, list, text, have) in [
        ("block", List::Block, &values.block, &now.block),
        ("allow", List::Allow, &values.allow, &now.allow),
    ] {
        let had = lines(have);
        let new: Vec<crate::net::cidr::Cidr> = lines(text)
            .iter()
            .filter(|l| !had.contains(l))
            .filter_map(|l| crate::net::cidr::Cidr::parse(l))
            .collect();
        for c in reach::judge_all(list, &new, owner) {
            concerns.push((field, c.describe()));
        }
    }
    let rules = &schema::RULE_LIMITS;
    let other_visitor_rule = rules.list.of(json).as_array().is_some_and(|list| {
        (0..list.len()).any(|i| {
            rules.key.is_some_and(|k| k.of_item(json, i) == "ip")
                && ![Some(MINUTE), Some(DAY)].contains(&rules.window.of_item(json, i).as_u64())
        })
    });
    let had_visitor_limit =
        !now.visitor_minute.trim().is_empty() || !now.visitor_day.trim().is_empty();
    if values.visitor_minute.trim().is_empty()
        && values.visitor_day.trim().is_empty()
        && rules.list.find(json, &[]).is_some()
        && had_visitor_limit
        && !other_visitor_rule
    {
        concerns.push((
            "visitor_minute",
            "no visitor limit: with both fields empty no rule counts per visitor, and one \
             visitor can spend what the spend limits leave for everyone"
                .to_owned(),
        ));
    }
    Confirm { concerns }
}

/// Which form: the first setup, or the settings of a site set up already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Setup,
    Settings,
}

/// The index of the entry of `list` (`spend` or `rules`) with this window (and for rules, the
/// `ip` key) that counts bytes or requests (`bytes`).
fn find(json: &Value, list: &Limits, (window, ip, bytes): (u64, bool, bool)) -> Option<usize> {
    let len = list.list.of(json).as_array()?.len();
    (0..len).find(|&i| {
        list.window.of_item(json, i).as_u64() == Some(window)
            && list.counts_bytes(json, i) == bytes
            && (!ip
                || list
                    .key
                    .is_some_and(|k| k.of_item(json, i).as_str() == Some("ip")))
    })
}

/// A whole number as typed: blank is None; one within `range`, or Err.
fn typed(text: &str, range: std::ops::RangeInclusive<u64>) -> Result<Option<u64>, ()> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match t.parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(()),
    }
}

/// A limit as typed: blank is none; otherwise a whole number of at least 1.
fn limit(text: &str, field: &'static str, what: &str) -> Result<Option<u64>, Problem> {
    typed(text, 1..=u64::from(u32::MAX)).map_err(|()| {
        problem(
            field,
            format!("{what}: write a whole number of at least 1 (or leave it empty for none)"),
        )
    })
}

/// A number of bytes as typed: blank is none; otherwise a whole number of at least 1
/// (`resolve check`'s own checks then bound it).
fn bytes(text: &str, field: &'static str, what: &str) -> Result<Option<u64>, Problem> {
    typed(text, 1..=u64::MAX).map_err(|()| {
        problem(
            field,
            format!(
                "{what}: write a whole number of bytes, e.g. 20000000000 for 20 GB (or leave it empty for none)"
            ),
        )
    })
}

/// The links one request may carry, as typed: blank is the default
/// ([`defaults::MAX_LINKS`]); otherwise a whole number from 1 to [`defaults::MAX_LINKS_LIMIT`],
/// as the configuration's check wants.
fn links(text: &str) -> Result<Option<u64>, Problem> {
    typed(text, 1..=u64::from(defaults::MAX_LINKS_LIMIT)).map_err(|()| {
        problem(
            "max_links",
            format!(
                "Links per request: write a whole number from 1 to {} (or leave it empty for {})",
                defaults::MAX_LINKS_LIMIT,
                defaults::MAX_LINKS
            ),
        )
    })
}

/// The non-empty lines of a text box.
pub fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One limit a form shows: its list (`spend` or `rules`), window, whether it counts by
/// address, the name a new one takes, and the number wanted (None: no such limit).
struct Want<'a> {
    window: u64,
    ip: bool,
    /// It counts bytes (`"unit": "bytes"`), not requests.
    bytes: bool,
    name: &'a str,
    limit: Option<u64>,
}

/// The edits that make `list` hold the limits wanted: numbers changed in place, missing ones
/// appended, unwanted ones taken out (last first, so the other indexes still hold); a list
/// that is not there is written whole.
fn list_edits(json: &Value, list: &Limits, wants: &[Want<'_>]) -> Vec<Edit<'static>> {
    let entry = |w: &Want<'_>, n: u64| {
        if w.bytes {
            list.bytes_entry(w.name, "ip", n, w.window)
        } else {
            list.entry(w.name, "ip", n, w.window)
        }
    };
    let Some(items) = list.list.of(json).as_array() else {
        let new: Vec<Value> = wants
            .iter()
            .filter_map(|w| w.limit.map(|n| entry(w, n)))
            .collect();
        return if new.is_empty() {
            Vec::new()
        } else {
            vec![Edit {
                path: list.list.steps(),
                value: Some(Value::Array(new)),
            }]
        };
    };
    let (mut sets, mut appends, mut removes) = (Vec::new(), Vec::new(), Vec::new());
    for w in wants {
        let at = find(json, list, (w.window, w.ip, w.bytes));
        match (at, w.limit) {
            (Some(i), Some(n)) if list.limit.of_item(json, i).as_u64() != Some(n) => {
                sets.push(Edit {
                    path: list.limit.at(&[i]),
                    value: Some(json!(n)),
                });
            }
            (Some(i), None) => removes.push(i),
            (None, Some(n)) => appends.push(entry(w, n)),
            _ => {}
        }
    }
    let mut edits = sets;
    for (k, v) in appends.into_iter().enumerate() {
        edits.push(Edit {
            path: list.list.item(items.len() + k),
            value: Some(v),
        });
    }
    removes.sort_unstable();
    for i in removes.into_iter().rev() {
        edits.push(Edit {
            path: list.list.item(i),
            value: None,
        });
    }
    edits
}

/// The changes the form asks for against the configuration `json` holds now, or every problem
/// with it. Only what differs is changed; a blank token or password keeps the one there.
pub fn changes(
    kind: Kind,
    values: &Values,
    secrets: &Secrets,
    json: &Value,
) -> Result<Change, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut change = Change::default();
    let now = Values::of(json, &values.site);
    let choices = providers();
    let paid = values.provider != "echo";
    let token = secrets.token.trim();
    if json.get("providers").is_some() {
        // A list of providers is the file's to edit: the form's one provider leaves it alone.
    } else if values.provider == now.provider && values.provider != "echo" {
        if !token.is_empty() {
            change.edits.push(Edit {
                path: schema::PROVIDER_TOKEN.steps(),
                value: Some(json!(token)),
            });
        }
    } else if values.provider == "echo" {
        if now.provider != "echo" || schema::PROVIDER.find(json, &[]).is_none() {
            change.edits.push(Edit {
                path: schema::PROVIDER.steps(),
                value: Some(schema::echo_section()),
            });
        }
    } else if choices.iter().any(|(n, _)| *n == values.provider) {
        if token.is_empty() {
            problems.push(problem(
                "token",
                "the provider's API token is needed: copy it from your account at the provider",
            ));
        } else {
            change.edits.push(Edit {
                path: schema::PROVIDER.steps(),
                value: Some(schema::preset_section(&values.provider, token)),
            });
        }
    } else {
        problems.push(problem("provider", "choose a provider from the list"));
    }

    let day = limit(&values.spend_day, "spend_day", "Paid calls per day");
    let month = limit(&values.spend_month, "spend_month", "Paid calls per 30 days");
    let minute = limit(
        &values.visitor_minute,
        "visitor_minute",
        "Requests per visitor per minute",
    );
    let vday = limit(
        &values.visitor_day,
        "visitor_day",
        "Requests per visitor per day",
    );
    let vbytes = bytes(
        &values.visitor_bytes_day,
        "visitor_bytes_day",
        "Bytes per visitor per day",
    );
    // A number of its own: written where it differs, removed when emptied.
    for (field, typed) in [
        (
            schema::MAX_FILE_BYTES,
            bytes(&values.max_file_bytes, "max_file_bytes", "Largest file"),
        ),
        (schema::REQUEST_MAX_LINKS, links(&values.max_links)),
    ] {
        match typed {
            Err(p) => problems.push(p),
            Ok(n) if n != field.of(json).as_u64() => change.edits.push(Edit {
                path: field.steps(),
                value: n.map(|n| json!(n)),
            }),
            Ok(_) => {}
        }
    }
    let vbytes = vbytes.unwrap_or_else(|p| {
        problems.push(p);
        None
    });
    if kind == Kind::Setup && paid && matches!((&day, &month), (Ok(None), Ok(None))) {
        problems.push(problem(
            "spend_day",
            "a paid provider needs a spend limit: without one a script can use up the plan",
        ));
    }
    let mut numbers = Vec::new();
    for r in [day, month, minute, vday] {
        match r {
            Ok(n) => numbers.push(n),
            Err(p) => problems.push(p),
        }
    }
    if let [day, month, minute, vday] = numbers[..] {
        let spend = [
            Want {
                window: DAY,
                ip: false,
                bytes: false,
                name: "day",
                limit: day,
            },
            Want {
                window: MONTH,
                ip: false,
                bytes: false,
                name: "month",
                limit: month,
            },
        ];
        change
            .edits
            .extend(list_edits(json, &schema::SPEND_LIMITS, &spend));
        let rules = [
            Want {
                window: MINUTE,
                ip: true,
                bytes: false,
                name: "ip",
                limit: minute,
            },
            Want {
                window: DAY,
                ip: true,
                bytes: false,
                name: "ip-day",
                limit: vday,
            },
            Want {
                window: DAY,
                ip: true,
                bytes: true,
                name: "ip-bytes",
                limit: vbytes,
            },
        ];
        // No rules in the file: the default rule, shown as it is, stays unwritten.
        let default = schema::RULES.find(json, &[]).is_none()
            && minute == Some(u64::from(defaults::RULE_LIMIT))
            && vday.is_none()
            && vbytes.is_none();
        if !default {
            change
                .edits
                .extend(list_edits(json, &schema::RULE_LIMITS, &rules));
        }
    }

    let origins: Vec<String> = match kind {
        // The site's addresses, one a line, after the origins the file holds already.
        Kind::Setup => {
            let mut list = lines(&now.origins);
            let given = lines(&values.site);
            let mut good = !given.is_empty();
            for line in &given {
                match crate::http::origin::origin_of(line) {
                    Some(o) if !list.contains(&o) => list.push(o),
                    Some(_) => {}
                    None => good = false,
                }
            }
            if !good {
                problems.push(problem(
                    "site",
                    "the site's address, like https://example.com (the address of the page \
                     visitors use), one a line",
                ));
            }
            list
        }
        Kind::Settings => lines(&values.origins),
    };
    if kind == Kind::Setup
        && paid
        && origins.is_empty()
        && !problems.iter().any(|p| p.field == "site")
    {
        problems.push(problem("site", "a paid provider needs the site's address"));
    }
    if lines(&now.origins) != origins {
        change.edits.push(Edit {
            path: schema::ALLOWED_ORIGINS.steps(),
            value: Some(json!(origins)),
        });
    }
    if kind == Kind::Settings {
        match crate::admin::challenge_form::edits(
            &values.challenge_site_key,
            &secrets.challenge_secret,
            json,
        ) {
            Ok(edits) => change.edits.extend(edits),
            Err((field, text)) => problems.push(problem(field, text)),
        }
        for (field, text, have) in [
            (schema::BLOCK, &values.block, &now.block),
            (schema::ALLOW, &values.allow, &now.allow),
        ] {
            let want = lines(text);
            if lines(have) != want {
                change.edits.push(Edit {
                    path: field.steps(),
                    value: (!want.is_empty() || field.find(json, &[]).is_some())
                        .then(|| json!(want)),
                });
            }
        }
    }

    if kind == Kind::Setup || !secrets.password.is_empty() {
        match new_password(secrets) {
            Ok(password) => change.password = Some(password),
            Err(p) => problems.push(p),
        }
    }
    if problems.is_empty() {
        Ok(change)
    } else {
        Err(problems)
    }
}

/// The new password the form sends, typed twice, or what is wrong with it.
pub fn new_password(secrets: &Secrets) -> Result<String, Problem> {
    let password = &secrets.password;
    if password.trim().is_empty() {
        Err(problem("password", "the password is empty: choose one"))
    } else if crate::support::password::check_strength(password).is_err() {
        Err(problem(
            "password",
            format!(
                "the password has {} characters: use at least {} (a few unrelated words make \
                 a good one)",
                password.chars().count(),
                defaults::ADMIN_PASSWORD_MIN_CHARS
            ),
        ))
    } else if *password != secrets.again {
        Err(problem(
            "password",
            "the two passwords differ: type the same twice",
        ))
    } else {
        Ok(password.clone())
    }
}

/// The form field a configuration error is about, from its field's name.
pub fn field_of(config_field: &str) -> &'static str {
    let top = config_field.split(['.', '[']).next().unwrap_or_default();
    [
        (schema::PROVIDER, "provider"),
        (schema::SPEND, "spend_day"),
        (schema::RULES, "visitor_minute"),
        (schema::MAX_FILE_BYTES, "max_file_bytes"),
        (schema::REQUEST, "max_links"),
        (schema::ALLOWED_ORIGINS, "origins"),
        (schema::BLOCK, "block"),
        (schema::ALLOW, "allow"),
        (schema::ADMIN, "password"),
        (schema::CHALLENGE, "challenge_site_key"),
    ]
    .iter()
    .find(|(field, _)| field.section() == top)
    .map_or("file", |(_, form)| form)
}

#[cfg(test)]
mod tests;

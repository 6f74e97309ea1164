//! The `steps` of a provider: each call's method, URL, headers, query and form (templates
//! whose placeholders must be known), what it extracts, and when it polls.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::config::error::{ConfigError, err};
use crate::config::provider::raw::{RawStep, RawTest};
use crate::config::provider::urls::check_step_url;
use crate::core::rule::RuleName;
use crate::provider::spec::{
    Best, FileList, HttpMethod, Poll, Progress, ProgressUnit, Step, SuccessTest, Template,
};

pub(crate) fn method(field: &str, m: Option<&str>) -> Result<HttpMethod, ConfigError> {
    match m.unwrap_or("POST") {
        m if m.eq_ignore_ascii_case("POST") => Ok(HttpMethod::Post),
        m if m.eq_ignore_ascii_case("GET") => Ok(HttpMethod::Get),
        m => Err(err(field, format!("{m:?}: use \"POST\" or \"GET\""))),
    }
}

pub(crate) fn is_pointer(s: &str) -> bool {
    s.is_empty() || s.starts_with('/')
}

pub(crate) fn pointer(field: &str, p: Option<String>) -> Result<Option<String>, ConfigError> {
    match p {
        Some(p) if !is_pointer(&p) => Err(err(
            field,
            format!("{p:?} is not a JSON Pointer: write it like \"/data/link\""),
        )),
        other => Ok(other),
    }
}

pub(crate) fn test(field: &str, t: Option<RawTest>) -> Result<Option<SuccessTest>, ConfigError> {
    match t {
        None => Ok(None),
        Some(t) => {
            pointer(&format!("{field}.pointer"), Some(t.pointer.clone()))?;
            Ok(Some(SuccessTest {
                pointer: t.pointer,
                equals: t.equals,
            }))
        }
    }
}

pub(crate) fn templates(
    field: &str,
    map: Option<BTreeMap<String, String>>,
    known: &[String],
    headers: bool,
) -> Result<Vec<(String, Template)>, ConfigError> {
    let mut out = Vec::new();
    for (name, value) in map.unwrap_or_default() {
        if headers && !crate::http::request::is_header_name(&name) {
            return Err(err(
                format!("{field}.{name}"),
                "is not a header name (letters, digits and '-')",
            ));
        }
        if crate::support::text::has_control(&value) {
            return Err(err(
                format!("{field}.{name}"),
                "cannot contain control characters",
            ));
        }
        let t = Template(value);
        check_names(&format!("{field}.{name}"), &t, known)?;
        out.push((name, t));
    }
    Ok(out)
}

pub(crate) fn check_names(field: &str, t: &Template, known: &[String]) -> Result<(), ConfigError> {
    for name in t.names() {
        if !known.iter().any(|k| k == name) {
            return Err(err(
                field,
                format!(
                    "uses {{{name}}}, which nothing provides: use {{link}}, {{token}}, {{base}} or a value an earlier step extracts"
                ),
            ));
        }
    }
    Ok(())
}

/// The steps, checked in order: each may use the values `known` before it, and adds what it
/// extracts to them.
pub(crate) fn steps(
    raw_steps: Vec<RawStep>,
    known: &mut Vec<String>,
) -> Result<Vec<Step>, ConfigError> {
    let mut steps = Vec::new();
    for (i, s) in raw_steps.into_iter().enumerate() {
        let at = |f: &str| format!("provider.steps[{i}].{f}");
        let m = method(&at("method"), s.method.as_deref())?;
        let url = Template(s.url);
        check_names(&at("url"), &url, known)?;
        check_step_url(&at("url"), &url.0)?;
        if m == HttpMethod::Get && s.form.as_ref().is_some_and(|f| !f.is_empty()) {
            return Err(err(
                at("form"),
                "a GET request has no form body: use \"query\"",
            ));
        }
        for (field, name) in [("when", &s.when), ("unless", &s.unless)] {
            if let Some(w) = name
                && !known.contains(w)
            {
                return Err(err(
                    at(field),
                    format!("{w:?} is not extracted by an earlier step"),
                ));
            }
        }
        let headers = templates(&at("headers"), s.headers, known, true)?;
        let query = templates(&at("query"), s.query, known, false)?;
        let form = templates(&at("form"), s.form, known, false)?;
        let mut extract = Vec::new();
        for (name, v) in s.extract.unwrap_or_default() {
            let pointers: Vec<String> = match v {
                Value::String(p) => vec![p],
                Value::Array(list) => list
                    .into_iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            };
            if pointers.is_empty() || !pointers.iter().all(|p| is_pointer(p)) {
                return Err(err(
                    at(&format!("extract.{name}")),
                    "must be a JSON Pointer like \"/data/link\", or a list of them",
                ));
            }
            if RuleName::new(&name).is_none() {
                return Err(err(
                    at("extract"),
                    format!("{name:?}: names are a-z, 0-9, '_' and '-'"),
                ));
            }
            known.push(name.clone());
            extract.push((name, pointers));
        }
        let files = match s.files {
            None => None,
            Some(f) => {
                for (field, p) in [("list", &f.list), ("download", &f.download)] {
                    pointer(&at(&format!("files.{field}")), Some(p.clone()))?;
                }
                pointer(&at("files.filename"), f.filename.clone())?;
                // A list of files gives the download, as an extracted value would.
                known.push("download".into());
                Some(FileList {
                    list: f.list,
                    download: f.download,
                    filename: f.filename,
                })
            }
        };
        let best = match s.best {
            None => None,
            Some(b) => {
                for (field, p) in [("list", &b.list), ("by", &b.by), ("take", &b.take)] {
                    pointer(&at(&format!("best.{field}")), Some(p.clone()))?;
                }
                if RuleName::new(&b.name).is_none() {
                    return Err(err(
                        at("best.as"),
                        format!("{:?}: names are a-z, 0-9, '_' and '-'", b.name),
                    ));
                }
                known.push(b.name.clone());
                Some(Best {
                    list: b.list,
                    by: b.by,
                    take: b.take,
                    name: b.name,
                })
            }
        };
        let poll = match s.poll {
            None => None,
            Some(p) => {
                if !(100..=60_000).contains(&p.interval_ms) {
                    return Err(err(at("poll.interval_ms"), "must be 100 to 60000"));
                }
                Some(Poll {
                    interval: Duration::from_millis(p.interval_ms),
                    until: test(&at("poll.until"), Some(p.until))?.expect("given"),
                    fail: test(&at("poll.fail"), p.fail)?,
                    progress: match p.progress {
                        None => None,
                        Some(pr) => {
                            pointer(&at("poll.progress.pointer"), Some(pr.pointer.clone()))?;
                            let unit = match pr.unit.as_str() {
                                "fraction" => ProgressUnit::Fraction,
                                "percent" => ProgressUnit::Percent,
                                "seconds_left" => ProgressUnit::SecondsLeft,
                                other => {
                                    return Err(err(
                                        at("poll.progress.unit"),
                                        format!(
                                            "{other:?}: use \"fraction\", \"percent\" or \"seconds_left\""
                                        ),
                                    ));
                                }
                            };
                            Some(Progress {
                                pointer: pr.pointer,
                                unit,
                            })
                        }
                    },
                })
            }
        };
        steps.push(Step {
            method: m,
            url,
            headers,
            query,
            form,
            when: s.when,
            unless: s.unless,
            success: test(&at("success"), s.success)?,
            error_code: pointer(&at("error_code"), s.error_code)?,
            error_message: pointer(&at("error_message"), s.error_message)?,
            extract,
            files,
            best,
            poll,
        });
    }
    Ok(steps)
}

/// A token written into a template by hand, instead of as `{token}`, becomes `{token}`: the
/// request sent is the same (templates are filled in as they are, nothing encoded), and the
/// token then lives only in the `Secret`, which is never shown.
pub(crate) fn token_by_name(steps: &mut [Step], token: &str) {
    // A token that could be read as part of a placeholder is left as written.
    if token.is_empty() || token.contains(['{', '}']) {
        return;
    }
    for step in steps {
        let templates = std::iter::once(&mut step.url).chain(
            step.headers
                .iter_mut()
                .chain(step.query.iter_mut())
                .chain(step.form.iter_mut())
                .map(|(_, t)| t),
        );
        for t in templates {
            t.0 = named_in_text(&t.0, token);
        }
    }
}

/// `template` with `token` replaced by `{token}` in its text, placeholders left as they are.
pub(crate) fn named_in_text(template: &str, token: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    loop {
        let (text, placeholder) = match rest.find('{') {
            Some(open) => match rest[open..].find('}') {
                Some(close) => (&rest[..open], &rest[open..=open + close]),
                None => (rest, ""),
            },
            None => (rest, ""),
        };
        out.push_str(&text.replace(token, "{token}"));
        out.push_str(placeholder);
        rest = &rest[text.len() + placeholder.len()..];
        if rest.is_empty() {
            return out;
        }
    }
}

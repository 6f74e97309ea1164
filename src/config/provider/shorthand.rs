//! The one-call form of the provider section (`url`, `auth`, `link`, `download`, ...), turned
//! into the one step it stands for.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::config::error::{ConfigError, err};
use crate::config::provider::raw::{RawPlace, RawProvider, RawStep};
use crate::config::provider::steps::{method, pointer};
use crate::config::provider::urls::check_url;
use crate::provider::spec::HttpMethod;

/// Turns the one-call shorthand into a step.
pub(crate) fn shorthand(raw: &mut RawProvider) -> Result<RawStep, ConfigError> {
    let url = raw.url.take().ok_or_else(|| {
        err(
            "provider.url",
            "missing: the provider's API endpoint, e.g. \"https://api.real-debrid.com/rest/1.0/unrestrict/link\" (or use \"preset\")",
        )
    })?;
    check_url("provider.url", &url)?;
    let m = method("provider.method", raw.method.as_deref())?;
    let mut headers = BTreeMap::new();
    let mut query = BTreeMap::new();
    let mut form = BTreeMap::new();
    let mut put = |place: RawPlace, field: &str, value: &str| -> Result<(), ConfigError> {
        let chosen = [
            place.header.is_some(),
            place.query.is_some(),
            place.form.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if chosen != 1 {
            return Err(err(
                field,
                "name exactly one of \"header\", \"query\" or \"form\", e.g. {\"form\": \"link\"}",
            ));
        }
        if place.prefix.is_some() && place.header.is_none() {
            return Err(err(format!("{field}.prefix"), "only goes with \"header\""));
        }
        if let Some(h) = place.header {
            if !crate::http::request::is_header_name(&h) {
                return Err(err(
                    format!("{field}.header"),
                    "must be a header name of letters, digits and '-', e.g. \"Authorization\"",
                ));
            }
            headers.insert(h, format!("{}{value}", place.prefix.unwrap_or_default()));
        } else if let Some(q) = place.query {
            query.insert(q, value.to_owned());
        } else if let Some(f) = place.form {
            if m == HttpMethod::Get {
                return Err(err(
                    format!("{field}.form"),
                    "a GET request has no form body: use {\"query\": ...} or set \"method\": \"POST\"",
                ));
            }
            form.insert(f, value.to_owned());
        }
        Ok(())
    };
    match (raw.auth.take(), raw.token.is_some()) {
        (Some(a), true) => put(a, "provider.auth", "{token}")?,
        (Some(_), false) => {
            return Err(err(
                "provider.token",
                "missing: \"auth\" says where the token goes, so put the provider's API token in \"token\"",
            ));
        }
        (None, true) => put(
            RawPlace {
                header: Some("Authorization".into()),
                prefix: Some("Bearer ".into()),
                query: None,
                form: None,
            },
            "provider.auth",
            "{token}",
        )?,
        (None, false) => {}
    }
    let link = raw.link.take().unwrap_or(RawPlace {
        header: None,
        prefix: None,
        query: (m == HttpMethod::Get).then(|| "link".to_owned()),
        form: (m == HttpMethod::Post).then(|| "link".to_owned()),
    });
    if link.header.is_some() {
        return Err(err(
            "provider.link",
            "the link goes in a \"form\" field or the \"query\", not a header",
        ));
    }
    put(link, "provider.link", "{link}")?;
    let download = raw.download.take().ok_or_else(|| {
        err(
            "provider.download",
            "missing: the JSON Pointer to the download URL in the answer, e.g. \"/download\"",
        )
    })?;
    pointer("provider.download", Some(download.clone()))?;
    let mut extract = BTreeMap::new();
    extract.insert("download".to_owned(), Value::String(download));
    if let Some(f) = raw.filename.take() {
        pointer("provider.filename", Some(f.clone()))?;
        extract.insert("filename".to_owned(), Value::String(f));
    }
    Ok(RawStep {
        method: raw.method.take(),
        url,
        headers: Some(headers),
        query: Some(query),
        form: Some(form),
        when: None,
        unless: None,
        success: raw.success.take(),
        error_code: raw.error_code.take(),
        error_message: raw.error_message.take(),
        extract: Some(extract),
        files: None,
        best: None,
        poll: None,
    })
}

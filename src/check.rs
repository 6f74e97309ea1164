//! `resolve check`: is the site ready? Reads the configuration, reaches the store without
//! counting anything, and prints the effective configuration with secrets masked.

use std::io::Write;

use crate::config::Config;
use crate::locate::{self, Located};
use crate::provider::{HttpMethod, Place, ProviderSpec};
use crate::rule::KeyKind;

/// Runs the check, writing a report to `out`. Returns true when the site can serve requests.
pub fn run(located: &Located, out: &mut dyn Write) -> bool {
    let _ = writeln!(
        out,
        "configuration: {}",
        match located {
            Located::File(source) => source.describe(),
            Located::Defaults { base } => format!(
                "none found ({}/config.json does not exist): using the defaults",
                base.display()
            ),
        }
    );
    let config = match locate::load(located) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(out, "FAIL {e}");
            return false;
        }
    };
    let mut ok = true;
    ok &= report_store(&config, out);
    ok &= report_provider(&config, out);
    for rule in &config.rules {
        let _ = writeln!(
            out,
            "rule {}: {} requests per {} s {}",
            rule.name,
            rule.limit,
            rule.window_secs,
            match rule.key {
                KeyKind::Ip => "per client address",
                KeyKind::Global => "for the whole site",
                KeyKind::ApiKey => "per API key",
            }
        );
    }
    let keys = &config.api_keys;
    let _ = writeln!(
        out,
        "api keys: read from the {} header; {}; {}",
        keys.header,
        if keys.require { "required" } else { "optional" },
        if keys.keys.is_empty() {
            "any key is accepted and counted by its hash".to_owned()
        } else {
            format!("{} listed, others refused", keys.keys.len())
        }
    );
    for k in &keys.keys {
        for rule in k.rules.iter().flatten() {
            let _ = writeln!(
                out,
                "key {} rule {}: {} requests per {} s",
                k.name, rule.name, rule.limit, rule.window_secs
            );
        }
    }
    let _ = writeln!(
        out,
        "effective configuration (secrets masked):\n{}",
        serde_json::to_string_pretty(&config.masked_json()).unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "{}",
        if ok {
            "OK"
        } else {
            "NOT READY: fix the lines marked FAIL"
        }
    );
    ok
}

fn report_store(config: &Config, out: &mut dyn Write) -> bool {
    match crate::stores::open(config).probe() {
        Ok(what) => {
            let _ = writeln!(out, "ok   store: {what}");
            true
        }
        Err(e) => {
            let _ = writeln!(out, "FAIL store: {e}");
            false
        }
    }
}

fn report_provider(config: &Config, out: &mut dyn Write) -> bool {
    match &config.provider {
        None => {
            let _ = writeln!(
                out,
                "FAIL provider: none configured, so every request gets 503; add a \"provider\" \
                 section (see README: Configuration), or {{\"kind\": \"echo\"}} to try the site"
            );
            false
        }
        Some(ProviderSpec::Echo) => {
            let _ = writeln!(
                out,
                "ok   provider: echo (answers each link with itself; nothing is spent)"
            );
            true
        }
        Some(ProviderSpec::Http(h)) => {
            let place = |p: &Place| match p {
                Place::Header { name, .. } => format!("header {name}"),
                Place::Query(n) => format!("query parameter {n}"),
                Place::Form(n) => format!("form field {n}"),
            };
            let _ = writeln!(
                out,
                "ok   provider: {} {}; link in {}; token {}; download URL at {}",
                match h.method {
                    HttpMethod::Get => "GET",
                    HttpMethod::Post => "POST",
                },
                h.url,
                place(&h.link),
                match (&h.token, &h.auth) {
                    (Some(_), Some(p)) => format!("set, sent in {}", place(p)),
                    _ => "not set".to_owned(),
                },
                h.download
            );
            true
        }
    }
}

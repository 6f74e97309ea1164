//! `resolve check`: is the site ready? Reads the configuration, reaches the store without
//! counting anything, and prints the effective configuration with secrets masked; with a link,
//! makes one real provider call.

use std::io::Write;

use crate::config::Config;
use crate::config::locate::{self, Located};
use crate::provider::Provider;
use crate::provider::described::ProviderSpec;
use crate::support::log::{Context, StderrLog};
use crate::usage::readiness::{report, warn_exposure};

/// Runs the check, writing a report to `out`. With `live`, also makes one real provider call
/// for that link. Returns true when the site can serve requests (and the call succeeded). The
/// lines it logs (the page files put back, the store's own) carry `log`.
pub fn run(located: &Located, live: Option<&str>, out: &mut dyn Write, log: &Context) -> bool {
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
    // What every request refuses: settings where they can be fetched over HTTP.
    if let Some(refused) = crate::site::web_root::for_check(located, Some(&config)) {
        let _ = writeln!(out, "FAIL web root: {refused}");
        let _ = writeln!(out, "NOT READY: fix the lines marked FAIL");
        return false;
    }
    if let Located::File(source) = located {
        warn_exposure(source.path(), "configuration", out);
    }
    crate::site::page_files::keep_for(&config, &StderrLog::new(log.clone()));
    // As requests use it: the usage figures it reads include what waits in the journal's spool.
    let mut ok = report(&config, &crate::site::open::for_requests(&config, log), out);
    if let Some(link) = live {
        ok &= live_call(&config, link, out);
    }
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

/// One real call to the provider, announced; it may cost a paid call. Counts nothing. With
/// several services in `providers`, one call to each, each reported under its name.
fn live_call(config: &Config, link: &str, out: &mut dyn Write) -> bool {
    let link = match crate::http::link::validate(link.as_bytes()) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(out, "FAIL live: {e}");
            return false;
        }
    };
    if config.services.len() > 1 {
        let mut ok = true;
        for service in &config.services {
            ok &= live_one(config, link, &service.spec, Some(&service.name), out);
        }
        return ok;
    }
    let Some(spec) = &config.provider else {
        let _ = writeln!(out, "FAIL live: no provider to call");
        return false;
    };
    live_one(config, link, spec, None, out)
}

/// One real call to one service (`name`, with several), reported in a line of its own.
fn live_one(
    config: &Config,
    link: &str,
    spec: &ProviderSpec,
    name: Option<&str>,
    out: &mut dyn Write,
) -> bool {
    let (what, tag) = match name {
        Some(n) => (n.to_owned(), format!("live ({n})")),
        None => ("the provider".to_owned(), "live".to_owned()),
    };
    let _ = writeln!(
        out,
        "LIVE: calling {what} once for {link} (this may cost one paid call; no limit is counted)"
    );
    let started = std::time::Instant::now();
    let result = match spec {
        ProviderSpec::Echo => {
            crate::provider::EchoProvider.resolve(link, &crate::provider::Unmetered)
        }
        ProviderSpec::Http(h) => crate::provider::http::HttpProvider::shared(h.clone())
            .resolve(link, &crate::provider::Unmetered),
    };
    let took = started.elapsed().as_millis();
    let forms = crate::support::secret::all_forms(&config.secrets());
    let mask = |text: String| crate::support::secret::mask(&text, &forms).into_owned();
    match result {
        // The visitor would get 502 for such an answer (see app.rs): say so, without it.
        Ok(r) if r.holds_any(&forms) => {
            let _ = writeln!(
                out,
                "FAIL {tag}: after {took} ms: the provider's answer holds the provider token, so \
                 it is never passed on: {}",
                mask(r.download.clone())
            );
            false
        }
        Ok(r) => {
            let _ = writeln!(
                out,
                "ok   {tag}: resolved in {took} ms: {}{}",
                r.download,
                r.filename.map_or(String::new(), |f| format!(" ({f})"))
            );
            true
        }
        Err(e) => {
            let _ = writeln!(out, "FAIL {tag}: after {took} ms: {}", mask(e.to_string()));
            false
        }
    }
}

//! Is the site ready? The report `resolve check` prints and the dashboard shows: the data
//! directory, the store (reached, nothing counted), the provider, the limits, the dashboard
//! and the effective configuration with its secrets masked.

use std::io::Write;

use crate::app::controls::reach::{self, List};
use crate::config::Config;
use crate::core::rule::KeyKind;
use crate::provider::described::ProviderSpec;
use crate::provider::spec::HttpMethod;
use crate::store::roles::Store;

/// The checks of a loaded configuration: the data directory, the store (reached, nothing
/// counted), the provider, the limits, the dashboard and the effective configuration with its
/// secrets masked. True when the site can serve requests. The dashboard shows this report too.
pub fn report(config: &Config, store: &Store, out: &mut dyn Write) -> bool {
    if let crate::store::settings::StoreKind::File { dir } = &config.store.kind {
        warn_exposure(dir, "data directory", out);
    }
    let mut ok = report_ca_file(config, out);
    ok &= report_store(store, out);
    report_spool(config, out);
    ok &= report_provider(config, out);
    warn_unsafe(config, out);
    for rule in &config.spend {
        let _ = writeln!(
            out,
            "spend {}: {} per {} s for the whole site",
            rule.name,
            rule.limit_words("paid calls"),
            rule.window_secs
        );
    }
    if let Some(max) = config.max_file_bytes {
        let _ = writeln!(out, "max_file_bytes: files up to {max} bytes are served");
    }
    let _ = writeln!(
        out,
        "cache: {}",
        if config.cache_ttl.is_zero() {
            "off".to_owned()
        } else {
            format!(
                "a resolved link is answered again for {} s without a paid call",
                config.cache_ttl.as_secs()
            )
        }
    );
    for rule in &config.rules {
        let _ = writeln!(
            out,
            "rule {}: {} per {} s {}; stored as {}",
            rule.name,
            rule.limit_words("requests"),
            rule.window_secs,
            match rule.key {
                KeyKind::Ip => "per client address",
                KeyKind::Global => "for the whole site",
                KeyKind::ApiKey => "per API key",
            },
            rule.key_template
        );
    }
    report_controls(config, store, out);
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
                "key {} rule {}: {} per {} s",
                k.name,
                rule.name,
                rule.limit_words("requests"),
                rule.window_secs
            );
        }
    }
    report_dashboard(config, out);
    report_challenge(config, out);
    let _ = writeln!(
        out,
        "effective configuration (secrets masked):\n{}",
        serde_json::to_string_pretty(&config.masked_json()).unwrap_or_default()
    );
    ok
}

/// Whether visitors may be asked to solve a challenge, when, and what happens when siteverify
/// is down.
fn report_challenge(config: &Config, out: &mut dyn Write) {
    use crate::challenge::{OnError, When};
    let Some(c) = &config.challenge else {
        let _ = writeln!(
            out,
            "challenge: off (to ask visitors to show they are people before a paid call, set              \"challenge\": {{\"site_key\": \"...\", \"secret\": \"...\"}} from Turnstile in the              Cloudflare dashboard; see docs/configuration.md)"
        );
        return;
    };
    let when = match c.when {
        When::Always => "before every link".to_owned(),
        When::NewClients => "of clients with no admitted request in the last day".to_owned(),
        When::OverLimit => format!(
            "of visitors over their own limit, for {} more links once per {} s",
            c.extra.limit, c.extra.window_secs
        ),
        When::Busy => format!("once {:.0}% of a spend limit is used", c.busy_share * 100.0),
    };
    let _ = writeln!(
        out,
        "challenge: asked {when} (API keys never); checked at {}; remembered {} s; siteverify \
         down: {}",
        c.verify_url,
        c.remember_secs,
        match c.on_error {
            OnError::Deny => "links refused (on_error deny)",
            OnError::Allow => "links answered unchecked (on_error allow)",
        }
    );
}

/// Whether the dashboard is on, and where its secret is kept.
fn report_dashboard(config: &Config, out: &mut dyn Write) {
    match &config.admin {
        None => {
            let _ = writeln!(
                out,
                "dashboard: off (to turn it on, make a password hash with `resolve hash-password` \
                 and set \"admin\": {{\"password_hash\": \"...\"}}; see README: Dashboard)"
            );
        }
        Some(_) => {
            let _ = writeln!(
                out,
                "dashboard: on at /cgi-bin/resolve/admin (the program's address followed by \
                 /admin); failed sign-ins per {} s: {} per address, {} per network, {} for the \
                 site, {} per browser that signed in before; its secret in {}",
                crate::support::defaults::ADMIN_SIGNIN_WINDOW_SECS,
                crate::support::defaults::ADMIN_SIGNIN_FAILURES,
                crate::support::defaults::ADMIN_SIGNIN_NETWORK_FAILURES,
                crate::support::defaults::ADMIN_SIGNIN_SITE_FAILURES,
                crate::support::defaults::ADMIN_SIGNIN_DEVICE_FAILURES,
                config
                    .data_dir
                    .join(crate::support::defaults::ADMIN_SECRET_FILE)
                    .display()
            );
            if let Some(root) = web_root_in(&config.data_dir) {
                let _ = writeln!(
                    out,
                    "WARN dashboard: its data directory {} lies under the web root ({root}), so \
                     the dashboard refuses to sign anyone in: move it to ~/resolve/ratelimit",
                    config.data_dir.display()
                );
            }
        }
    }
}

/// Shadow rules, trusted networks, block and allow lists, automatic blocks; and a warning when
/// the journal saw requests from a known network's edges that are not trusted.
fn report_controls(config: &Config, store: &Store, out: &mut dyn Write) {
    for rule in &config.shadow_rules {
        let _ = writeln!(
            out,
            "rule {} (shadow): {} requests per {} s; refuses nothing, `resolve stats` shows what it would have refused",
            rule.name, rule.limit, rule.window_secs
        );
    }
    for cdn in &config.client.trusted_networks {
        let _ = writeln!(
            out,
            "client: {}'s edges are trusted by name ({} ranges, its published lists as taken on {}; the visitor's address is read from {} on requests from them only)",
            cdn.name(),
            cdn.ranges().count(),
            cdn.ranges_date(),
            cdn.header()
        );
    }
    let (block, allow) = (config.block.ranges().len(), config.allow.ranges().len());
    if block + allow > 0 {
        let _ = writeln!(
            out,
            "block: {block} addresses or ranges refused with 403; allow: {allow} exempt from the ip rules (`resolve blocks` lists the temporary blocks)"
        );
    }
    warn_reach(config, out);
    if let Some(a) = config.auto_block {
        let _ = writeln!(
            out,
            "auto_block: a client refused {} times within {} s is blocked for {} s",
            a.refusals, a.window_secs, a.block_secs
        );
    }
    let now = crate::core::clock::Clock::now_ms(&crate::core::clock::SystemClock);
    // What the journal counted over the last day tells whether a network's edges call us.
    if let Ok(stats) = crate::usage::stats::Stats::gather(config, store, now, 24) {
        for (name, n) in &stats.figures.untrusted_networks {
            let _ = writeln!(
                out,
                "WARN {n} requests in the last 24 hours came from {name}'s edges (counted by the usage journal), \
                 but \"{name}\" is not in client.trusted_proxies: every visitor behind one edge shares one counter \
                 and real visitors get 429s. Fix: \"client\": {{\"trusted_proxies\": [\"{name}\"]}}"
            );
        }
    }
}

/// Warns of what the dashboard would not write without a confirmation (the same judgement,
/// `app::controls::reach`): a `block` or `allow` entry wider than its Block button's limit or
/// covering every address, and no rule left that counts per visitor.
fn warn_reach(config: &Config, out: &mut dyn Write) {
    for (list, set, name) in [
        (List::Block, &config.block, "block"),
        (List::Allow, &config.allow, "allow"),
    ] {
        for concern in reach::judge_all(list, set.ranges(), None) {
            let _ = writeln!(
                out,
                "WARN {name}: {}; if that is not meant, take {} out of \"{name}\"",
                concern.describe(),
                concern.range()
            );
        }
    }
    if !config.rules.iter().any(|r| r.key == KeyKind::Ip) {
        let _ = writeln!(
            out,
            "WARN rules: no rule counts per visitor (\"key\": \"ip\"), so one visitor can spend \
             what the spend limits leave for everyone; add for example \
             {{\"name\": \"ip\", \"key\": \"ip\", \"limit\": 30, \"window_secs\": 60}} to \"rules\""
        );
    }
}

/// Directory names that web hosts serve.
pub const WEB_ROOTS: [&str; 5] = ["public_html", "www", "htdocs", "html", "httpdocs"];

/// The web root `path` lies under (by the names hosts give it), if it does: as written, or
/// once its symbolic links are followed (`~/resolve/ratelimit` may be a link into
/// `public_html`).
pub fn web_root_in(path: &std::path::Path) -> Option<&'static str> {
    let by_name = |p: &std::path::Path| {
        p.ancestors()
            .filter_map(|a| a.file_name()?.to_str())
            .find_map(|name| WEB_ROOTS.iter().find(|r| **r == name).copied())
    };
    by_name(path).or_else(|| by_name(&resolved(path)?))
}

/// `path` with the links of its nearest existing ancestor followed, and the rest as written.
fn resolved(path: &std::path::Path) -> Option<std::path::PathBuf> {
    path.ancestors().find_map(|a| {
        let real = std::fs::canonicalize(a).ok()?;
        Some(real.join(path.strip_prefix(a).ok()?))
    })
}

/// Warns when secrets or counters could be read by other accounts or fetched over HTTP.
pub fn warn_exposure(path: &std::path::Path, what: &str, out: &mut dyn Write) {
    use std::os::unix::fs::PermissionsExt;
    if let Some(root) = web_root_in(path) {
        let _ = writeln!(
            out,
            "WARN {what} {} lies under the web root ({root}): it may be fetched over HTTP; move it to ~/resolve/",
            path.display()
        );
    }
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            let fix = if meta.is_dir() { 700 } else { 600 };
            let _ = writeln!(
                out,
                "WARN {what} {} can be read by other accounts (mode {mode:o}): chmod {fix} {}",
                path.display(),
                path.display()
            );
        }
    }
}

/// True when a paid provider is configured and `allowed_origins` is empty: any other site's
/// page can then make its visitors' browsers spend the site's paid calls. The dashboard says so
/// at its top; `resolve check` warns.
pub fn open_to_other_sites(config: &Config) -> bool {
    config.pays() && config.allowed_origins.is_empty()
}

/// The two settings that keep a paid provider's money safe, when they are missing.
fn warn_unsafe(config: &Config, out: &mut dyn Write) {
    if !config.pays() {
        return;
    }
    // With several providers, each with spend limits of its own, every paid call is capped.
    let each_capped =
        !config.services.is_empty() && config.services.iter().all(|s| !s.spend.is_empty());
    if config.budget().is_empty() && !each_capped {
        let _ = writeln!(
            out,
            "WARN spend: a paid provider is configured with no spend limit, so nothing caps what \
             the site spends in a day; add for example \
             \"spend\": [{{\"name\": \"day\", \"limit\": 100, \"window_secs\": 86400}}, \
             {{\"name\": \"month\", \"limit\": 1500, \"window_secs\": 2592000}}]"
        );
    }
    if open_to_other_sites(config) {
        let _ = writeln!(
            out,
            "WARN allowed_origins: empty, so any other site's page can make its visitors' \
             browsers spend your paid calls; add your site, e.g. \
             \"allowed_origins\": [\"https://www.example.com\", \"https://example.com\"]"
        );
    }
}

/// `store.ca_file`, read as a connection reads it: a file that cannot serve is named with how
/// to fix it, before the store's own line says that the connection failed.
fn report_ca_file(config: &Config, out: &mut dyn Write) -> bool {
    use crate::store::settings::StoreKind;
    let path = match &config.store.kind {
        StoreKind::Mysql(m) => m.ca_file.as_deref(),
        StoreKind::Redis(r) => match &r.target {
            crate::store::redis::resp::Target::Tls { ca_file, .. } => ca_file.as_deref(),
            _ => None,
        },
        StoreKind::File { .. } => None,
    };
    let Some(path) = path else {
        return true;
    };
    match crate::store::tls::read_ca_file(path) {
        Ok(certs) => {
            let _ = writeln!(
                out,
                "ok   store.ca_file: {} ({} certificate{}, trusted beside the public roots)",
                path.display(),
                certs.len(),
                if certs.len() == 1 { "" } else { "s" }
            );
            true
        }
        Err(e) => {
            let _ = writeln!(out, "FAIL store.ca_file: {e}");
            false
        }
    }
}

fn report_store(store: &Store, out: &mut dyn Write) -> bool {
    match store.upkeep.probe() {
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

/// The journal's spool: a WARN only, since entries then go to the store one by one.
fn report_spool(config: &Config, out: &mut dyn Write) {
    if !config.journal {
        return;
    }
    let _ = match crate::store::spool::ready(&config.data_dir) {
        Ok(dir) => writeln!(
            out,
            "ok   journal spool: {dir} (requests append their usage entries there; one a \
             second writes them to the store)"
        ),
        Err(e) => writeln!(
            out,
            "WARN journal spool: {e}; until it is fixed every request sends its usage entry \
             to the store itself"
        ),
    };
}

fn report_provider(config: &Config, out: &mut dyn Write) -> bool {
    let ok = report_first_provider(config, out);
    report_services(config, out);
    ok
}

/// With several providers: the order they are asked in, each one's own spend and rates.
fn report_services(config: &Config, out: &mut dyn Write) {
    let names = |rules: &[crate::core::rule::Rule]| {
        rules
            .iter()
            .map(|r| format!("{} ({} per {} s)", r.name, r.limit, r.window_secs))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (i, service) in config.services.iter().enumerate() {
        let what = match &service.spec {
            ProviderSpec::Echo => "echo".to_owned(),
            ProviderSpec::Http(h) => h
                .preset
                .as_deref()
                .map_or("http".to_owned(), |p| format!("preset {p}")),
        };
        let when = if i == 0 {
            "asked first".to_owned()
        } else {
            format!(
                "asked when {} refuses the server, the account or the call for now",
                config.services[i - 1].name
            )
        };
        let _ = writeln!(out, "ok   providers[{i}] {}: {what}; {when}", service.name);
        if i > 0 && !service.rates.is_empty() {
            let _ = writeln!(out, "     its rates: {}", names(&service.rates));
        }
        if !service.spend.is_empty() {
            let _ = writeln!(out, "     its own spend: {}", names(&service.spend));
        }
    }
}

fn report_first_provider(config: &Config, out: &mut dyn Write) -> bool {
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
            let _ = writeln!(
                out,
                "ok   provider: {}{}; token {}; each link within {} ms",
                h.preset
                    .as_deref()
                    .map_or("http".to_owned(), |p| format!("preset {p}")),
                h.base_url
                    .as_deref()
                    .map_or(String::new(), |b| format!(" at {b}")),
                if h.token.is_some() { "set" } else { "not set" },
                h.deadline.as_millis()
            );
            for (i, step) in h.steps.iter().enumerate() {
                let method = match step.method {
                    HttpMethod::Get => "GET",
                    HttpMethod::Post => "POST",
                };
                let mut reads: Vec<String> = step
                    .extract
                    .iter()
                    .map(|(name, pointers)| format!("{name} <- {}", pointers.join(" or ")))
                    .collect();
                if let Some(f) = &step.files {
                    reads.push(format!("every file of {} <- {}", f.list, f.download));
                }
                if let Some(b) = &step.best {
                    reads.push(format!(
                        "{} <- {} of the greatest {} in {}",
                        b.name, b.take, b.by, b.list
                    ));
                }
                let _ = writeln!(
                    out,
                    "     step {}: {method} {}{}{}; reads {}",
                    i + 1,
                    step.url.0,
                    step.when
                        .as_deref()
                        .map(|w| format!(" (when {w} is given)"))
                        .into_iter()
                        .chain(
                            step.unless
                                .as_deref()
                                .map(|u| format!(" (unless {u} is given)"))
                        )
                        .collect::<String>(),
                    step.poll.as_ref().map_or(String::new(), |p| format!(
                        " (every {} ms until {} = {})",
                        p.interval.as_millis(),
                        p.until.pointer,
                        p.until.equals
                    )),
                    if reads.is_empty() {
                        "nothing".to_owned()
                    } else {
                        reads.join(", ")
                    }
                );
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn warnings(text: &str) -> String {
        let config = Config::from_json(text, Path::new("/home/u/resolve")).unwrap();
        let mut out = Vec::new();
        warn_unsafe(&config, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_link_into_the_web_root_is_under_the_web_root() {
        let home = crate::support::temp::dir("webroot", "link");
        std::fs::create_dir_all(home.join("public_html/files")).unwrap();
        std::fs::create_dir_all(home.join("resolve")).unwrap();
        std::os::unix::fs::symlink(
            home.join("public_html/files"),
            home.join("resolve/ratelimit"),
        )
        .unwrap();
        assert_eq!(
            super::web_root_in(&home.join("resolve/ratelimit")),
            Some("public_html")
        );
        assert_eq!(
            super::web_root_in(&home.join("resolve/ratelimit/not-yet/made")),
            Some("public_html")
        );
        assert_eq!(super::web_root_in(&home.join("resolve/other")), None);
        assert_eq!(
            super::web_root_in(&home.join("public_html/x")),
            Some("public_html")
        );
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn a_paid_provider_without_a_budget_or_origins_is_warned_about() {
        let out = warnings(r#"{"provider": {"preset": "realdebrid", "token": "t0k"}}"#);
        assert!(out.contains("WARN spend:"), "{out}");
        assert!(out.contains(r#""spend": [{"name": "day""#), "{out}");
        assert!(out.contains("WARN allowed_origins:"), "{out}");
        assert!(out.contains(r#""allowed_origins": ["https://"#), "{out}");
    }

    #[test]
    fn the_provider_rate_limits_are_not_a_budget() {
        let out = warnings(
            r#"{"provider": {"preset": "realdebrid", "token": "t0k",
                "rate_limits": [{"name": "burst", "limit": 200, "window_secs": 60}]},
                "allowed_origins": ["https://example.com"]}"#,
        );
        assert!(out.contains("WARN spend:"), "{out}");
        assert!(!out.contains("WARN allowed_origins"), "{out}");
    }

    #[test]
    fn a_safe_site_and_the_echo_provider_get_no_warning() {
        assert_eq!(
            warnings(
                r#"{"provider": {"preset": "realdebrid", "token": "t0k"},
                    "spend": [{"name": "day", "limit": 100, "window_secs": 86400}],
                    "allowed_origins": ["https://example.com"]}"#
            ),
            ""
        );
        assert_eq!(warnings(r#"{"provider": {"kind": "echo"}}"#), "");
        assert_eq!(warnings("{}"), "");
    }

    #[test]
    fn several_providers_each_capped_need_no_site_wide_spend_and_are_listed_in_order() {
        let each = r#"{"providers": [
            {"preset": "realdebrid", "token": "a", "spend": [{"name": "rd-day", "limit": 9, "window_secs": 86400}]},
            {"preset": "alldebrid", "token": "b", "spend": [{"name": "ad-day", "limit": 9, "window_secs": 86400}]}],
            "allowed_origins": ["https://example.com"]}"#;
        assert_eq!(warnings(each), "");
        let one_uncapped = each.replace(
            r#", "spend": [{"name": "ad-day", "limit": 9, "window_secs": 86400}]"#,
            "",
        );
        assert!(warnings(&one_uncapped).contains("WARN spend:"));
        let config = Config::from_json(each, std::path::Path::new("/nonexistent")).unwrap();
        let mut out = Vec::new();
        report_services(&config, &mut out);
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains(
                "ok   providers[1] alldebrid: preset alldebrid; asked when realdebrid refuses"
            ),
            "{out}"
        );
        assert!(
            out.contains("its own spend: rd-day (9 per 86400 s)"),
            "{out}"
        );
    }
}

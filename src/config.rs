//! The configuration file: its JSON form, and the checked `Config` the program runs with. Every
//! mistake is reported with the field and what to write instead, before any request is served.

pub mod admin;
pub mod api_keys;
pub mod challenge;
pub mod controls;
pub mod editor;
pub mod error;
pub mod json_text;
pub mod locate;
pub mod page;
pub mod print;
pub mod provider;
pub mod raw;
pub mod redact;
pub mod rules;
pub mod schema;
pub mod secrets;
pub mod starter;
pub mod store;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::config::controls::AutoBlock;
pub use crate::config::error::ConfigError;
use crate::config::error::err;
use crate::config::raw::RawConfig;
use crate::config::redact::{secret_strings, without_quoted_value};
pub use crate::config::rules::default_key_template;
use crate::core::rule::{Algorithm, KeyKind, Rule, RuleName};
use crate::http::api_key::KeyPolicy;
use crate::http::identity::ClientPolicy;
use crate::net::addr_set::AddrSet;
use crate::provider::described::ProviderSpec;
use crate::store::settings::StoreConfig;
use crate::support::defaults;

/// The checked configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// None until the owner names one: every request then gets 503 "not configured".
    pub provider: Option<ProviderSpec>,
    pub store: StoreConfig,
    pub rules: Vec<Rule>,
    /// Site-wide limits on paid calls: the provider's published rate and the owner's budget
    /// (`spend`). Checked with `rules` before a paid call, and only then.
    pub spend: Vec<Rule>,
    /// How many of `spend`, from the start, are the provider's published rate limits; the rest
    /// are the owner's budget (see [`Config::budget`]).
    pub provider_rate_limits: usize,
    /// The provider's rates as its description declares them, before they were made to hold in
    /// every window for this store (what `resolve check` prints).
    pub provider_rates: Vec<Rule>,
    /// The services asked in order when `providers` lists them (empty with `provider`): the
    /// first is `provider` (its rates lead `spend`), each later one is asked when the one
    /// before refuses the server, the account or the call for now.
    pub services: Vec<provider::list::Service>,
    /// How long a resolved link is answered again without a new paid call (0: never).
    pub cache_ttl: Duration,
    pub client: ClientPolicy,
    /// Request header that carries the client address from a trusted proxy.
    pub forwarded_header: String,
    /// API keys: where they arrive, whether they are required, which are accepted.
    pub api_keys: KeyPolicy,
    pub max_body_bytes: u64,
    /// The most links one request may carry (`request.max_links`); each counts as a request.
    pub max_links: u32,
    /// The largest file the site serves, in bytes (`max_file_bytes`); None: any size.
    pub max_file_bytes: Option<u64>,
    /// Sites whose pages may use the endpoint (`scheme://host[:port]`); empty: any.
    pub allowed_origins: Vec<String>,
    /// Requests one FastCGI process answers before it exits.
    pub fastcgi_max_requests: u32,
    /// The footer the owner shows visitors (site name, contact, terms link).
    pub page: crate::http::footer::Page,
    /// The owner's dashboard at `/admin`: None (off) unless a password hash is set.
    pub admin: Option<admin::Admin>,
    /// Where the program keeps its own small files whatever the store: the file store's
    /// directory, else `ratelimit/` beside the configuration. Outside the web root.
    pub data_dir: PathBuf,
    /// Whether requests are counted in the usage journal (`"journal": false` turns it off).
    pub journal: bool,
    /// `account.tighten_spend_above`: past this share of fair use spent (the provider
    /// account's last reading), the spend limits are scaled down; None: never.
    pub tighten_spend_above: Option<f64>,
    /// Rules in shadow mode: counted, and what they would refuse reported, refusing nothing.
    pub shadow_rules: Vec<Rule>,
    /// Clients refused with 403 before anything is counted (`block`).
    pub block: AddrSet,
    /// Clients exempt from the `ip` rules (never from spend, API key or global rules).
    pub allow: AddrSet,
    /// Block a client refused this many times within a window, for a while.
    pub auto_block: Option<AutoBlock>,
    /// The file it was read from (set when a file is loaded): where the dashboard's setup and
    /// settings write. None for the defaults and for text checked on its own.
    pub file: Option<PathBuf>,
    /// The challenge asked before a paid call (`challenge`); None: never asked.
    /// Boxed: the largest section, and most sites ask none (see `raw_from_json` on frames).
    pub challenge: Option<Box<crate::challenge::Settings>>,
}

/// The rule that applies when the configuration names none.
pub fn default_rule() -> Rule {
    Rule {
        name: RuleName::new(defaults::RULE_NAME).expect("valid default name"),
        key: KeyKind::Ip,
        algorithm: Algorithm::Fixed,
        limit: NonZeroU32::new(defaults::RULE_LIMIT).expect("nonzero default"),
        window_secs: NonZeroU32::new(defaults::RULE_WINDOW_SECS).expect("nonzero default"),
        unit: crate::core::rule::Unit::Requests,
        key_template: default_key_template(KeyKind::Ip),
    }
}

impl Config {
    /// The configuration with no file: safe defaults and no provider. `base` holds the data
    /// directory.
    pub fn defaults(base: &Path) -> Config {
        Config::from_raw(Box::default(), base, false).expect("defaults are valid")
    }

    /// Parses and checks a configuration file's text. Relative paths are taken from `base`,
    /// the file's directory.
    pub fn from_json(text: &str, base: &Path) -> Result<Config, ConfigError> {
        Config::from_json_with(text, base, false)
    }

    /// As [`Config::from_json`], for a process that answers one request (CGI). Every section is
    /// checked as `from_json` checks it, with the same messages (a mistake answers 503), but
    /// one: a preset given only its token (and perhaps `base_url`) is checked as far as the
    /// owner wrote it and built at its first use (see [`provider::deferred::parse_deferred`]),
    /// so that a refused request never builds it. Nothing else is left for later.
    pub fn for_one_request(text: &str, base: &Path) -> Result<Config, ConfigError> {
        Config::from_json_with(text, base, true)
    }

    fn from_json_with(text: &str, base: &Path, deferred: bool) -> Result<Config, ConfigError> {
        let raw = raw_from_json(text)?;
        // Kept where it is returned (a `map_err` would copy the whole configuration on the
        // stack).
        let mut checked = Config::from_raw(raw, base, deferred);
        if let Err(e) = &mut checked {
            e.at = json_text::of_field(text, &e.field);
        }
        checked
    }

    /// The owner's budget: the `spend` limits they set, without the provider's rate limits.
    pub fn budget(&self) -> &[Rule] {
        &self.spend[self.provider_rate_limits.min(self.spend.len())..]
    }

    /// True when a paid provider is configured (not none, not the echo provider).
    pub fn pays(&self) -> bool {
        matches!(self.provider, Some(ProviderSpec::Http(_)))
    }

    fn from_raw(raw: Box<RawConfig>, base: &Path, deferred: bool) -> Result<Config, ConfigError> {
        // Taken out of its box at once: the box, the last thing the reading allocated, goes
        // back to a process's arena before anything else is allocated (`*raw` alone would
        // keep it until the end of this function, and the arena for good).
        let raw = {
            let boxed = raw;
            *boxed
        };
        let mut services = Vec::new();
        let (provider, rate_rules) = match (raw.provider, raw.providers) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "providers",
                    "give either \"provider\" (one service) or \"providers\" (several, asked in order), not both: move the \"provider\" section into the list",
                ));
            }
            (None, None) => (None, Vec::new()),
            (None, Some(list)) => {
                services = crate::config::provider::list::parse_list(list, deferred)?;
                (Some(services[0].spec.clone()), services[0].rates.clone())
            }
            (Some(section), None) if deferred => {
                let (p, r) = crate::config::provider::deferred::parse_deferred(section)?;
                (Some(p), r)
            }
            (Some(section), None) => {
                let (p, r) = crate::config::provider::parse(section)?;
                (Some(p), r)
            }
        };
        let provider_rate_limits = rate_rules.len();
        let provider_rates = rate_rules.clone();
        let mut spend = rate_rules;
        if let Some(list) = raw.spend {
            let raw_rules =
                crate::config::provider::site_rules::raw_site_rules_in(list.get(), "spend")?;
            spend.extend(crate::config::provider::site_rules::site_rules(
                &raw_rules, "spend",
            )?);
        }
        let store = store::store(raw.store, base)?;
        // The provider's published rates hold in every window, not only in windows that start
        // at a first call.
        let sliding = !matches!(store.kind, crate::store::settings::StoreKind::File { .. });
        for r in &mut spend[..provider_rate_limits] {
            *r = crate::config::provider::site_rules::never_over(r, sliding);
        }
        for r in services.iter_mut().skip(1).flat_map(|s| s.rates.iter_mut()) {
            *r = crate::config::provider::site_rules::never_over(r, sliding);
        }
        let (rules, shadow_rules) = match raw.rules {
            None => (vec![default_rule()], Vec::new()),
            Some(list) => rules::site_rules(list, &spend)?,
        };
        rules::check_algorithms(&rules, &store.kind)?;
        rules::check_algorithms(&shadow_rules, &store.kind)?;
        // Every site-wide counter: the spend limits, and each later service's rates and spend.
        let counted: Vec<&Rule> = spend
            .iter()
            .chain(
                services
                    .iter()
                    .enumerate()
                    .flat_map(|(i, s)| s.rates.iter().filter(move |_| i > 0).chain(s.spend.iter())),
            )
            .collect();
        for (i, r) in counted.iter().enumerate() {
            if rules.iter().any(|o| o.name == r.name)
                || counted[..i].iter().any(|o| o.name == r.name)
            {
                return Err(err(
                    "spend",
                    format!(
                        "the rule name {:?} is used twice (rules, spend, each provider's spend and rate_limits share names)",
                        r.name.as_str()
                    ),
                ));
            }
        }
        let cache_ttl = Duration::from_secs(
            raw.cache
                .and_then(|c| c.ttl_secs)
                .unwrap_or(defaults::CACHE_TTL_SECS),
        );
        if cache_ttl > Duration::from_secs(7 * 24 * 3600) {
            return Err(err(
                "cache.ttl_secs",
                "must be at most 604800 (a week); 0 turns the cache off",
            ));
        }
        let api_keys = api_keys::api_keys(raw.api_keys, &store.kind)?;
        let mut allowed_origins = Vec::new();
        for (i, o) in raw.allowed_origins.unwrap_or_default().iter().enumerate() {
            allowed_origins.push(crate::http::origin::origin_of(o).ok_or_else(|| {
                err(
                    format!("allowed_origins[{i}]"),
                    format!("{o:?} is not a site: write it as the browser does, e.g. \"https://www.example.com\""),
                )
            })?);
        }
        let (client, forwarded_header) = controls::client(raw.client)?;
        let max_body_bytes = raw
            .request
            .as_ref()
            .and_then(|r| r.max_body_bytes)
            .unwrap_or(defaults::MAX_BODY_BYTES);
        if !(1..=1024 * 1024).contains(&max_body_bytes) {
            return Err(err(
                "request.max_body_bytes",
                "must be 1 to 1048576; a form with one link needs less than 3000",
            ));
        }
        let max_links = raw
            .request
            .as_ref()
            .and_then(|r| r.max_links)
            .unwrap_or(defaults::MAX_LINKS.into());
        let max_links = u32::try_from(max_links)
            .ok()
            .filter(|n| (1..=defaults::MAX_LINKS_LIMIT).contains(n))
            .ok_or_else(|| {
                err(
                    "request.max_links",
                    format!(
                        "must be 1 to {}: the links one request may carry, each counted as a request (1: one link at a time; {} is the default)",
                        defaults::MAX_LINKS_LIMIT,
                        defaults::MAX_LINKS
                    ),
                )
            })?;
        let max_file_bytes = raw.max_file_bytes;
        if max_file_bytes.is_some_and(|m| m < rules::MIN_BYTES_LIMIT) {
            return Err(err(
                "max_file_bytes",
                "must be at least 1000000 (1 MB), in bytes: e.g. 10000000000 for 10 GB; remove it to serve files of any size",
            ));
        }
        let fastcgi_max_requests = u32::try_from(
            raw.fastcgi
                .and_then(|f| f.max_requests)
                .unwrap_or(defaults::FASTCGI_MAX_REQUESTS.into()),
        )
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            err(
                "fastcgi.max_requests",
                "must be 1 to 4294967295; 10000 (the default) renews each process now and then",
            )
        })?;
        let page = page::page(raw.page)?;
        let admin = admin::admin(raw.admin, &rules, &spend)?;
        let block = controls::addr_list(raw.block, "block")?;
        let allow = controls::addr_list(raw.allow, "allow")?;
        let auto_block = raw.auto_block.map(controls::auto_block).transpose()?;
        let challenge = challenge::challenge(raw.challenge)?.map(Box::new);
        if challenge
            .as_ref()
            .is_some_and(|c| c.when == crate::challenge::When::Busy)
            && spend.is_empty()
        {
            return Err(err(
                "challenge.when",
                "\"busy\" asks once the site's spend passes a share of its limit, and there is no spend limit: add one to \"spend\" (e.g. {\"name\": \"day\", \"limit\": 200, \"window_secs\": 86400}) or choose another mode",
            ));
        }
        let tighten_spend_above = match raw.account.and_then(|a| a.tighten_spend_above) {
            Some(share) if !(0.05..=0.99).contains(&share) => {
                return Err(err(
                    "account.tighten_spend_above",
                    "is a share of the fair use, 0.05 to 0.99 (e.g. 0.8: past 80% spent)",
                ));
            }
            share => share,
        };
        let data_dir = match &store.kind {
            crate::store::settings::StoreKind::File { dir } => dir.clone(),
            _ => base.join(defaults::DATA_DIR_NAME),
        };
        Ok(Config {
            provider,
            store,
            rules,
            spend,
            provider_rate_limits,
            provider_rates,
            services,
            cache_ttl,
            client,
            forwarded_header,
            api_keys,
            max_body_bytes,
            max_links,
            max_file_bytes,
            allowed_origins,
            fastcgi_max_requests,
            page,
            admin,
            data_dir,
            journal: raw.journal.unwrap_or(defaults::JOURNAL),
            tighten_spend_above,
            shadow_rules,
            block,
            allow,
            auto_block,
            file: None,
            challenge,
        })
    }
}

/// The file's text read into its raw form. A function of its own, never inlined: serde's
/// reading of every section holds a frame of several kilobytes, which is given back before
/// [`Config::from_raw`] checks the sections (each pushes frames of its own); boxed, so that the
/// caller's frame holds a pointer, not the form.
#[inline(never)]
fn raw_from_json(text: &str) -> Result<Box<RawConfig>, ConfigError> {
    serde_json::from_str(text).map_err(|e| read_error(text, &e))
}

/// What serde could not read in the file, as the owner is told it. Apart from
/// [`raw_from_json`], and never inlined there: its text and masking would widen that frame.
#[cold]
#[inline(never)]
fn read_error(text: &str, e: &serde_json::Error) -> ConfigError {
    // A name closed with a curly quote reads as an unknown field: every failure is looked at
    // for an editor's mistake.
    if let Some(named) = editor::mistake(text, e.line(), e.column()) {
        return named;
    }
    // serde quotes the offending value, which may be a secret in the wrong place (or a
    // password written as a number): the value is cut out, and what secrets the text holds
    // are masked in every form as well.
    let message = without_quoted_value(&e.to_string());
    let message = crate::support::secret::mask(
        &message,
        &crate::support::secret::all_forms(&secret_strings(text)),
    )
    .into_owned();
    err(
        format!("line {} column {}", e.line(), e.column()),
        format!("{message}; the file must be one JSON object (see README: Configuration)"),
    )
}

#[cfg(test)]
mod tests;

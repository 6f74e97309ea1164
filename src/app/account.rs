//! The owner's account, read at most once a day: after an admitted request's answer is written
//! (a refused request never reads it, nor the kept reading), or by `resolve report`. The
//! reading is kept in `account.json` in the data directory (mode 600): the facts, or why they
//! could not be had, and when; never the token. A failed reading is tried again an hour later
//! at the earliest. A reading's warnings (premium ending within 7 days, fair use past 80%, no
//! premium) are logged and kept as `ACTION NEEDED` notes. With several services, each one's
//! account is read and kept apart (`account-NAME.json` beside the first's `account.json`), and
//! its lines name it.

use std::fs::{File, TryLockError};
use std::path::Path;

use crate::app::App;
use crate::http::problem::{Kind, Problem};
use crate::http::render;
use crate::provider::account::{Reading, tightened};
use crate::provider::described::ProviderSpec;
use crate::store::Check;
use crate::support::log::Level;
use crate::support::private_file;
use crate::support::secret;

/// The kept reading, in the data directory.
pub const FILE: &str = "account.json";
/// Held by the one process that reads the account.
const LOCK: &str = "account.lock";

/// The kept reading of the account, if there is one.
pub fn kept(data_dir: &Path) -> Option<Reading> {
    kept_in(data_dir, FILE)
}

fn kept_in(data_dir: &Path, file: &str) -> Option<Reading> {
    let bytes = std::fs::read(data_dir.join(file)).ok()?;
    Reading::from_json(&serde_json::from_slice(&bytes).ok()?)
}

/// Where service `at` of several (named `name`) keeps its reading, and its lock: the first in
/// `account.json`, as with one service; a later one in `account-NAME.json`.
fn files_of(at: usize, name: &str) -> (String, String) {
    if at == 0 {
        (FILE.to_owned(), LOCK.to_owned())
    } else {
        (
            format!("account-{name}.json"),
            format!("account-{name}.lock"),
        )
    }
}

/// Whether a provider description says where its account is.
fn describes_account(spec: Option<&ProviderSpec>) -> bool {
    matches!(spec, Some(ProviderSpec::Http(h)) if h.account.is_some())
}

/// With several services, each one's kept reading by its name (those whose description says
/// where the account is, and read at least once); empty with one service.
pub fn kept_by_service(config: &crate::config::Config) -> Vec<(String, Reading)> {
    if config.services.len() < 2 {
        return Vec::new();
    }
    config
        .services
        .iter()
        .enumerate()
        .filter(|(_, s)| describes_account(Some(&s.spec)))
        .filter_map(|(at, s)| {
            let (file, _) = files_of(at, &s.name);
            Some((s.name.clone(), kept_in(&config.data_dir, &file)?))
        })
        .collect()
}

/// A reading's line about "the provider account" said of the service `name`.
pub fn named(line: &str, name: &str) -> String {
    line.replace("the provider account", &format!("the {name} account"))
}

impl App<'_> {
    /// With `account.tighten_spend_above` set and the kept reading's fair use past it: the
    /// first spend limit whose count (this paid request's included) passes its scaled-down
    /// limit, as a 503 refusal and its name. Asked only for an admitted request about to be
    /// paid for: a refused request reads nothing more.
    pub(super) fn past_tightened_spend(&self, checks: &[Check<'_>]) -> Option<(Problem, String)> {
        let share = self.config.tighten_spend_above?;
        let Some(Reading::Read { facts, .. }) = kept(&self.config.data_dir) else {
            return None;
        };
        let used = facts.fair_use_used.filter(|u| *u > share)?;
        let budget: Vec<Check<'_>> = checks
            .iter()
            .filter(|c| self.config.budget().iter().any(|r| r.name == c.rule.name))
            .cloned()
            .collect();
        let counts = self.store.counters.used(&budget).ok()?;
        let (check, count) = budget
            .iter()
            .zip(counts)
            .find(|(c, count)| *count > tightened(c.rule.limit.get(), used, share))?;
        let rule = check.rule;
        let limit = tightened(rule.limit.get(), used, share);
        let wait = rule.window_secs.get().min(3600);
        let problem = Problem::new(
            503,
            Kind::SpendLimit,
            format!(
                "The service has reached its limit for now. Please try again in {}.",
                render::wait_words(wait)
            ),
        )
        .retry_after(wait)
        .log(format!(
            "site-wide limit {} tightened to {limit} paid calls per {} s (the provider account's fair use is {:.0}% spent, past account.tighten_spend_above {share}); {count} counted: this paid call refused",
            rule.name,
            rule.window_secs,
            used * 100.0
        ));
        Some((problem, rule.name.as_str().to_owned()))
    }

    /// Reads the owner's account when the description says where it is and the kept reading
    /// is due (a day old, an hour after a failure): one process at a time, the others go on.
    /// With several services, each one's account in turn, kept apart. The first service's
    /// reading now kept, if any.
    pub fn read_account_if_due(&self) -> Option<Reading> {
        let services = &self.config.services;
        if services.len() >= 2 && self.others.len() + 1 == services.len() {
            for (at, service) in services.iter().enumerate().skip(1) {
                if describes_account(Some(&service.spec)) {
                    let (file, lock) = files_of(at, &service.name);
                    self.read_one(&*self.others[at - 1], (&file, &lock), Some(&service.name));
                }
            }
            let first = describes_account(self.config.provider.as_ref())
                .then_some(self.provider)
                .flatten()?;
            return self.read_one(first, (FILE, LOCK), Some(&services[0].name));
        }
        if !describes_account(self.config.provider.as_ref()) {
            return None;
        }
        self.read_one(self.provider?, (FILE, LOCK), None)
    }

    /// One service's reading, kept in `file` under `lock`; its lines name `name` (with several).
    fn read_one(
        &self,
        provider: &dyn crate::provider::Provider,
        (file, lock): (&str, &str),
        name: Option<&str>,
    ) -> Option<Reading> {
        let now = self.clock.now_ms();
        let dir = &self.config.data_dir;
        let before = kept_in(dir, file);
        if before.as_ref().is_some_and(|r| !r.due(now)) {
            return before;
        }
        std::fs::create_dir_all(dir).ok()?;
        let lock = File::create(dir.join(lock)).ok()?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return before,
            Err(TryLockError::Error(_)) => return before,
        }
        // Another process may have read it while this one waited for nothing.
        let before = kept_in(dir, file);
        if before.as_ref().is_some_and(|r| !r.due(now)) {
            return before;
        }
        let read = provider.account(now)?;
        let forms = secret::all_forms(&self.config.secrets());
        let reading = match read {
            Ok(facts) => Reading::Read { at_ms: now, facts },
            Err(reason) => Reading::Failed {
                at_ms: now,
                reason: secret::mask(&reason, &forms).into_owned(),
            },
        };
        let text = reading.to_json().to_string();
        if let Err(e) = private_file::replace(&dir.join(file), text.as_bytes()) {
            self.log.line(
                Level::Warn,
                &format!("keeping the provider account's reading failed: {e}"),
            );
        }
        let say = |line: &str| name.map_or_else(|| line.to_owned(), |n| named(line, n));
        match &reading {
            Reading::Failed { reason, .. } => self.log.line(
                Level::Warn,
                &say(&format!(
                    "the provider account could not be read: {reason}; tried again in an hour at the earliest"
                )),
            ),
            Reading::Read { .. } => {
                for line in reading.warnings(now) {
                    let line = say(&line);
                    self.log.line(Level::Warn, &line);
                    self.note(&line);
                }
            }
        }
        Some(reading)
    }
}

//! Opens the store the configuration names: as it is (commands that look into it), or as
//! requests and the journal's readers use it (its journal spooled).

use std::path::Path;
use std::rc::Rc;

use crate::config::Config;
use crate::core::clock::SystemClock;
use crate::store::file::FileStore;
use crate::store::file::budget::Budget;
use crate::store::mysql::MysqlStore;
use crate::store::redis::RedisStore;
use crate::store::refusals::RememberedRefusals;
use crate::store::roles::Store;
use crate::store::settings::StoreKind;
use crate::store::spool::SpooledJournal;
use crate::support::log::{Context, StderrLog};

/// The configured store, ready to use (connections are opened on first use); the lines it
/// writes itself carry `log`.
pub fn from_config(config: &Config, log: &Context) -> Store {
    match &config.store.kind {
        StoreKind::File { dir } => Store::whole(file_store(config, dir, log)),
        StoreKind::Mysql(settings) => {
            // Every rule a request may be counted by: shadow rules, spend limits and the
            // keys' own too, so that rows are kept for the longest window of them all.
            let mut rules = config.rules.clone();
            rules.extend(config.shadow_rules.iter().cloned());
            rules.extend(config.spend.iter().cloned());
            for key in &config.api_keys.keys {
                rules.extend(key.rules.iter().flatten().cloned());
            }
            Store::whole(MysqlStore::new(
                (**settings).clone(),
                &rules,
                config.store.sweep_grace,
            ))
        }
        StoreKind::Redis(settings) => Store::whole(RedisStore::new((**settings).clone())),
    }
}

/// The file store in `dir` with the configuration's settings.
fn file_store(config: &Config, dir: &Path, log: &Context) -> FileStore<SystemClock> {
    FileStore::new(dir, SystemClock, config.store.sweep_grace)
        .with_lock_timeout(config.store.lock_timeout)
        .with_budget(Budget {
            max_files: config.store.max_files,
            max_bytes: config.store.max_bytes,
            fold_rules: folding_rules(config),
        })
        .with_log(StderrLog::new(log.clone()))
}

/// The rules whose keys the file store may fold: every rule that counts a client, its shadow
/// rules and the API keys' own included.
fn folding_rules(config: &Config) -> u64 {
    let keys = config
        .api_keys
        .keys
        .iter()
        .flat_map(|k| k.rules.iter().flatten());
    let counted = config
        .rules
        .iter()
        .chain(&config.shadow_rules)
        .chain(keys)
        .filter(|r| r.key != crate::core::rule::KeyKind::Global)
        .count();
    counted as u64
}

/// The configured store for a process that answers one request and exits (CGI): as
/// [`for_requests`], with this server's memory of refusals in front of its counters (see
/// [`crate::store::refusals`]), and the file store working in its data directory
/// ([`FileStore::working_in_dir`]) when `whole_paths` says every path the request goes on to
/// use is whole (its configuration's place is: the paths it names are then too).
pub fn for_one_request(config: &Config, log: &Context, whole_paths: bool) -> Store {
    let (store, data_dir) = match &config.store.kind {
        StoreKind::File { dir } if whole_paths => (
            spooled(
                Store::whole(file_store(config, dir, log).working_in_dir()),
                config,
                log,
            ),
            // The working directory: a path of one name.
            Path::new(""),
        ),
        _ => (for_requests(config, log), config.data_dir.as_path()),
    };
    store.with_counters(|c| Rc::new(RememberedRefusals::new(c, data_dir)))
}

/// The configured store as requests use it: its usage journal spooled in the data directory
/// (see [`crate::store::spool`]), whatever the store. `stats` and `report` read through it
/// too, so that what is spooled is written before it is read.
pub fn for_requests(config: &Config, log: &Context) -> Store {
    spooled(from_config(config, log), config, log)
}

/// `store` with its usage journal spooled: a request appends its entry to a small file of
/// the current second, and one request a second writes the earlier seconds' entries to the
/// store's journal, summed. On a server (MySQL, Redis) that saves a statement per request;
/// in the file store, the read and rewrite of an hour file that holds a sixteenth of the
/// hour's clients, which grows with every address seen (docs/performance.md).
fn spooled(store: Store, config: &Config, log: &Context) -> Store {
    let spool = |journal| {
        let spool = SpooledJournal::new(journal, &config.data_dir, config.store.lock_timeout);
        match &config.store.kind {
            // The file store's directory is the data directory: made again by the spool, it is
            // said out loud as the store says it, its counts being gone.
            StoreKind::File { .. } => spool.holding_counts(Rc::new(StderrLog::new(log.clone()))),
            _ => spool,
        }
    };
    store.with_journal(|journal| Rc::new(spool(journal)))
}

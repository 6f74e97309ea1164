//! Opens the store the configuration names: as it is (commands that look into it), or as
//! requests and the journal's readers use it (a store on a server with its journal spooled).

use std::path::Path;
use std::rc::Rc;

use crate::config::Config;
use crate::core::clock::SystemClock;
use crate::store::file::FileStore;
use crate::store::file::budget::Budget;
use crate::store::mysql::MysqlStore;
use crate::store::redis::RedisStore;
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
/// [`for_requests`], the file store working in its data directory
/// ([`FileStore::working_in_dir`]) when `whole_paths` says every path the request goes on to
/// use is whole (its configuration's place is: the paths it names are then too).
pub fn for_one_request(config: &Config, log: &Context, whole_paths: bool) -> Store {
    match &config.store.kind {
        StoreKind::File { dir } if whole_paths => {
            Store::whole(file_store(config, dir, log).working_in_dir())
        }
        _ => for_requests(config, log),
    }
}

/// The configured store as requests use it: a store on a server (MySQL, Redis) with its
/// usage journal spooled in the data directory (see [`crate::store::spool`]); the file store
/// as it is (its journal is local already). `stats` and `report` read through it too, so that
/// what is spooled is written before it is read.
pub fn for_requests(config: &Config, log: &Context) -> Store {
    let store = from_config(config, log);
    match config.store.kind {
        StoreKind::File { .. } => store,
        StoreKind::Mysql(_) | StoreKind::Redis(_) => store.with_journal(|journal| {
            Rc::new(SpooledJournal::new(
                journal,
                &config.data_dir,
                config.store.lock_timeout,
            ))
        }),
    }
}

//! Opens the store the configuration names.

use crate::clock::SystemClock;
use crate::config::{Config, StoreKind};
use crate::file_store::FileStore;
use crate::mysql_store::MysqlStore;
use crate::redis_store::RedisStore;
use crate::store::Store;

/// The configured store, ready to use (connections are opened on first use).
pub fn open(config: &Config) -> Box<dyn Store> {
    match &config.store.kind {
        StoreKind::File { dir } => Box::new(
            FileStore::new(dir, SystemClock, config.store.sweep_grace)
                .with_lock_timeout(config.store.lock_timeout),
        ),
        StoreKind::Mysql(settings) => Box::new(MysqlStore::new(
            (**settings).clone(),
            &config.rules,
            config.store.sweep_grace,
        )),
        StoreKind::Redis(settings) => Box::new(RedisStore::new((**settings).clone())),
    }
}

//! One store contract, tested once: every scenario runs against every store (memory, files,
//! MySQL on a real MariaDB, Redis on a real redis-server, and Redis Cluster on six real
//! redis-server processes: `redis_cluster`, every scenario of `redis` but the slow store's, as a
//! delaying proxy cannot stand for nodes that name each other's addresses), each as its own
//! test named `<scenario>::<store>`, so that a store that behaves differently shows by name:
//! `cargo test --test store_contract sliding` runs one scenario on every store,
//! `cargo test --test store_contract mysql` every scenario on one store.
//!
//! | scenario                                               | memory  | file      | mysql     | redis     |
//! |--------------------------------------------------------|---------|-----------|-----------|-----------|
//! | several_rules_at_once                                  | yes     | yes       | yes       | yes       |
//! | own_rules_refuse_before_the_sites_are_read             | yes     | yes       | yes       | yes       |
//! | refused_requests_consume_nothing                       | yes     | fixed (1) | yes       | yes       |
//! | retry_after_counts_to_the_end_of_the_window            | yes     | yes       | yes       | yes       |
//! | sliding_window_admits_again_as_requests_age_out        | yes     | (1)       | yes       | yes       |
//! | two_handles_share_counts_and_cache                     | yes     | fixed (1) | yes       | yes       |
//! | cache_claims_releases_and_expires                      | yes     | yes       | yes       | yes       |
//! | refunds_take_back_only_from_the_same_window            | yes     | fixed (1) | yes       | yes       |
//! | sweep_keeps_running_windows                            | yes     | yes       | yes       | yes (2)   |
//! | a_handle_recovers_when_its_store_returns               | yes (3) | yes (3)   | yes (3)   | yes (3)   |
//! | exact_under_300_requests_at_once_fixed                 | threads | processes | processes | processes |
//! | exact_under_300_requests_at_once_sliding               | threads | (1)       | processes | processes |
//! | two_servers_share_one_limit                            | threads | processes | processes | processes |
//! | key_templates_name_the_stored_keys                     | yes     | fixed (1) | yes       | yes       |
//! | store_killed_under_load_and_restarted                  | yes (3) | yes (3)   | yes (3)   | yes (3)   |
//! | ten_part_links_with_five_left                          | yes     | yes       | yes       | yes       |
//! | pastes_of_several_links_at_once_stay_exact             | threads | processes | processes | processes |
//! | slow_store_is_answered_within_its_bound                | -       | yes (4)   | yes       | yes       |
//! | wrong_credentials_get_the_policy_answer_and_never_show | -       | -         | yes       | yes       |
//! | journal_rows_round_trip                                | yes     | yes       | yes       | yes       |
//! | journal_notes_newest_first_and_capped                  | yes     | yes       | yes       | yes       |
//! | journal_notes_keep_a_share_for_each_kind               | yes     | yes       | yes       | yes       |
//! | used_counts_without_counting                           | yes     | fixed (1) | yes       | yes       |
//! | journal_sweep_lets_old_hours_go                        | yes (5) | yes (5)   | yes       | yes (2)   |
//! | journal_exact_under_300_processes                      | threads | processes | processes | processes |
//! | journal_exact_under_300_processes_through_the_spool    | -       | -         | processes | processes |
//! | journal_size_of_a_busy_day                             | -       | yes (5)   | yes       | yes       |
//! | bytes_count_sizes_and_charge_after                     | yes     | yes       | yes       | yes       |
//! | bytes_bound_under_concurrency                          | threads | processes | processes | processes |
//!
//! (1) The file store keeps fixed windows only: where a scenario has sliding windows, its test
//! asserts that the configuration check refuses a sliding rule with the file store, and that the
//! store itself refuses to decide one. (2) Redis keys expire by themselves; its sweep does
//! nothing. (3) "Killed": the memory store fails as an unreachable store does, then comes back
//! empty, as a new process would; the file store's data directory is replaced by a file (a
//! mount gone), then put back; MariaDB and Redis get a SIGKILL and a restart (MariaDB keeps its
//! counts, Redis here has no persistence). (4) Slow: a key's file locked by another process.
//! The memory store has no I/O to be slow and no credentials; the file store has no
//! credentials (its permission faults are in storage_faults.rs). (5) Also with the clock moved
//! on: two days, then 400 days.
//!
//! The journal's 300 processes are this test program run again
//! (`journal_add_in_a_child_process`), each adding one entry through the library, so that the
//! store is tested alone; the program's own journal entries, through Apache, are counted in
//! usage.rs.
//!
//! The scenarios through the program run it under a real Apache (mod_cgid: a process per
//! request; mod_fcgid with RESOLVE_TEST_APACHE_MODE=fcgid), 300 requests at once meaning as
//! many processes at once as Apache runs; the memory store, which processes cannot share, runs
//! the same request handler on threads in this process.
//!
//! What only one store does stays in its own file: the file store's records and their crash
//! argument (file_store.rs, file_store_processes.rs, storage_faults.rs), the MySQL tables, PHP
//! rows, sweeps and `check` (mysql_store.rs), Redis key expiries, a rule changing type, sockets
//! and ACL users (redis_store.rs; loading the script by its SHA-1 is in fastcgi.rs), each
//! store's protocol and file system faults (storage_faults.rs).
//!
//! What only a Redis Cluster does is in cluster.rs (`cluster_*`): three Apaches on one cluster,
//! a master killed in a burst under each `on_error` policy, a slot moving under a kept handle.
//!
//! `differential::redis_script_decides_as_the_rust_limiter` holds the Redis store's Lua script
//! to the Rust limiter: random request sequences, decided by both, step by step alike.

mod support;

#[path = "store_contract/bytes.rs"]
mod bytes;
#[path = "store_contract/cluster.rs"]
mod cluster;
#[path = "store_contract/differential.rs"]
mod differential;
#[path = "store_contract/handles.rs"]
mod handles;
#[path = "store_contract/journal.rs"]
mod journal;
#[path = "store_contract/served.rs"]
mod served;
#[path = "store_contract/sites.rs"]
mod sites;
#[path = "store_contract/stores.rs"]
mod stores;

/// The store type of each name a test can have.
macro_rules! store_type {
    (memory) => {
        crate::stores::InMemory
    };
    (file) => {
        crate::stores::InFiles
    };
    (mysql) => {
        crate::stores::InMysql
    };
    (redis) => {
        crate::stores::InRedis
    };
    (redis_cluster) => {
        crate::stores::InRedisCluster
    };
}

/// `module::scenario() for stores;` makes `mod scenario` with one `#[test] fn <store>()` per
/// store, which starts the store and runs the function on it; `all_stores` names them all.
macro_rules! contract {
    ($($module:ident::$func:ident() for $($store:ident),+;)+) => {
        $(
            mod $func {
                $( store_test!($store, $module::$func); )+
            }
        )+
    };
}

/// The test of one store (or of each, for `all_stores`) in a scenario's module.
macro_rules! store_test {
    (all_stores, $($scenario:tt)+) => {
        store_test!(memory, $($scenario)+);
        store_test!(file, $($scenario)+);
        store_test!(mysql, $($scenario)+);
        store_test!(redis, $($scenario)+);
        store_test!(redis_cluster, $($scenario)+);
    };
    (memory, $module:ident::$func:ident) => {
        store_fn!(plain, memory, $module::$func);
    };
    (file, served::$func:ident) => {
        store_fn!(servers, file, served::$func);
    };
    (file, $module:ident::$func:ident) => {
        store_fn!(plain, file, $module::$func);
    };
    ($store:ident, $module:ident::$func:ident) => {
        store_fn!(servers, $store, $module::$func);
    };
}

/// The test function itself. The memory store, and the file store's scenarios run on handles in
/// this process or in its own child processes, run in plain `cargo test`; the scenarios served
/// by the program under Apache, and every MySQL and Redis one, need the `servers` feature.
macro_rules! store_fn {
    (plain, $store:ident, $module:ident::$func:ident) => {
        #[test]
        fn $store() {
            let mut store =
                <store_type!($store) as crate::stores::StoreUnderTest>::start(stringify!($store));
            crate::$module::$func(&mut store);
        }
    };
    (servers, $store:ident, $module:ident::$func:ident) => {
        #[test]
        #[cfg_attr(
            not(feature = "servers"),
            ignore = "needs Apache, MariaDB or Redis: cargo test --features servers"
        )]
        fn $store() {
            let mut store =
                <store_type!($store) as crate::stores::StoreUnderTest>::start(stringify!($store));
            crate::$module::$func(&mut store);
        }
    };
}

contract! {
    handles::several_rules_at_once() for all_stores;
    handles::own_rules_refuse_before_the_sites_are_read() for all_stores;
    handles::refused_requests_consume_nothing() for all_stores;
    handles::retry_after_counts_to_the_end_of_the_window() for all_stores;
    handles::sliding_window_admits_again_as_requests_age_out() for all_stores;
    handles::two_handles_share_counts_and_cache() for all_stores;
    handles::cache_claims_releases_and_expires() for all_stores;
    handles::refunds_take_back_only_from_the_same_window() for all_stores;
    handles::sweep_keeps_running_windows() for all_stores;
    handles::a_handle_recovers_when_its_store_returns() for all_stores;
    served::exact_under_300_requests_at_once_fixed() for all_stores;
    served::exact_under_300_requests_at_once_sliding() for all_stores;
    served::two_servers_share_one_limit() for all_stores;
    served::key_templates_name_the_stored_keys() for all_stores;
    served::store_killed_under_load_and_restarted() for all_stores;
    served::ten_part_links_with_five_left() for all_stores;
    served::pastes_of_several_links_at_once_stay_exact() for all_stores;
    served::slow_store_is_answered_within_its_bound() for file, mysql, redis;
    served::wrong_credentials_get_the_policy_answer_and_never_show() for mysql, redis, redis_cluster;
    journal::journal_rows_round_trip() for all_stores;
    journal::journal_notes_newest_first_and_capped() for all_stores;
    journal::journal_notes_keep_a_share_for_each_kind() for all_stores;
    journal::used_counts_without_counting() for all_stores;
    journal::journal_sweep_lets_old_hours_go() for all_stores;
    journal::journal_exact_under_300_processes() for all_stores;
    journal::journal_exact_under_300_processes_through_the_spool() for mysql, redis, redis_cluster;
    journal::journal_size_of_a_busy_day() for file, mysql, redis, redis_cluster;
    bytes::bytes_count_sizes_and_charge_after() for all_stores;
    bytes::bytes_bound_under_concurrency() for all_stores;
}

/// Not a test by itself: the body of the processes `bytes_bound_under_concurrency` starts
/// (this program run again with `RESOLVE_TEST_BYTES_STORE`); without that, it does nothing.
#[test]
fn bytes_member_in_a_child_process() {
    bytes::member_in_a_child_process();
}

/// Not a test by itself: the body of the processes `journal_exact_under_300_processes` starts
/// (this program run again with `RESOLVE_TEST_JOURNAL_STORE`); without that, it does nothing.
#[test]
fn journal_add_in_a_child_process() {
    journal::child_adds_one_entry();
}

/// The Redis Cluster's own scenarios (`cluster.rs`): three web servers, a failover.
#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache and Redis: cargo test --features servers"
)]
fn cluster_exact_over_three_web_servers() {
    let mut store = <stores::InRedisCluster as stores::StoreUnderTest>::start("exact3");
    cluster::exact_over_three_web_servers(&mut store);
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache and Redis: cargo test --features servers"
)]
fn cluster_failover_keeps_the_policy_then_exact() {
    let mut store = <stores::InRedisCluster as stores::StoreUnderTest>::start("failover");
    cluster::failover_keeps_the_policy_then_exact(&mut store);
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn cluster_moved_and_ask_are_followed() {
    let mut store = <stores::InRedisCluster as stores::StoreUnderTest>::start("moving");
    cluster::moved_and_ask_are_followed(&mut store);
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache and Redis: cargo test --features servers"
)]
fn cluster_site_wide_limit_exact_across_slots() {
    let mut store = <stores::InRedisCluster as stores::StoreUnderTest>::start("sitewide");
    cluster::site_wide_limit_exact_across_slots(&mut store);
}

//! The MySQL store under test: a real MariaDB, and a delaying proxy in front of it.

use std::time::Duration;

use resolve::core::rule::{Algorithm, Rule};
use resolve::store::mysql::MysqlStore;
use resolve::store::roles::Backend;
use resolve::store::settings::StoreKind;
use serde_json::{Value, json};

use super::{
    Credentialed, SLACK, Slowable, Slowdown, StoreUnderTest, Timeouts, parse_store, policy_fields,
    proxy_recover, proxy_slow_down, proxy_slow_within_bounds, proxy_slowdowns,
};
use crate::support::urlenc::encode;
use crate::support::{DelayProxy, MariaDb};

pub struct InMysql {
    db: MariaDb,
    proxy: DelayProxy,
}

impl InMysql {
    fn tcp(&self, port: u16, policy: &str, timeouts: Timeouts) -> Value {
        let mut store = json!({
            "kind": "mysql",
            "host": "127.0.0.1",
            "port": port,
            "user": self.db.user(),
            "password": self.db.password(),
            "database": self.db.database(),
            "connect_timeout_ms": timeouts.connect_ms(),
            "read_timeout_ms": timeouts.read_ms(),
        });
        policy_fields(&mut store, policy);
        store
    }

    /// One number from root SQL; 0 while the table does not exist yet.
    fn number(&self, sql: &str) -> u64 {
        match self.db.try_root_sql(sql) {
            Ok(out) => out.trim().parse().unwrap_or(0),
            Err(e) if e.contains("doesn't exist") => 0,
            Err(e) => panic!("{sql}: {e}"),
        }
    }
}

impl StoreUnderTest for InMysql {
    fn start(label: &str) -> InMysql {
        // Room for every process of a burst at once, and the test's own.
        let db = MariaDb::builder(label).max_connections(400).start();
        let proxy = DelayProxy::start(db.addr());
        InMysql { db, proxy }
    }

    fn name(&self) -> &'static str {
        "mysql"
    }

    fn open(&self, rules: &[Rule]) -> Box<dyn Backend> {
        let StoreKind::Mysql(settings) = parse_store(self.store_json("deny", Timeouts::Short))
        else {
            unreachable!("a mysql store section");
        };
        Box::new(MysqlStore::new(*settings, rules, Duration::ZERO))
    }

    fn counted(&self, key: &str, algorithm: Algorithm) -> u64 {
        match algorithm {
            Algorithm::Fixed => self.number(&format!(
                "SELECT count FROM resolve_test.rate_counters WHERE rkey = '{key}'"
            )),
            Algorithm::Sliding => self.number(&format!(
                "SELECT COUNT(*) FROM resolve_test.rate_events WHERE rkey = '{key}'"
            )),
        }
    }

    fn holds(&self, key: &str) -> bool {
        self.number(&format!(
            "SELECT (SELECT COUNT(*) FROM resolve_test.rate_counters WHERE rkey = '{key}') \
             + (SELECT COUNT(*) FROM resolve_test.rate_events WHERE rkey = '{key}')"
        )) > 0
    }

    /// The journal table's data and index, as InnoDB counts them (pages of 16 kB); for its
    /// totals alone, those of a copy holding only them.
    fn journal_bytes(&self, totals_only: bool) -> Option<u64> {
        let d = self.db.database();
        let size = |table: &str| {
            self.db.root_sql(&format!("ANALYZE TABLE `{d}`.`{table}`"));
            self.number(&format!(
                "SELECT data_length + index_length FROM information_schema.TABLES \
                 WHERE table_schema = '{d}' AND table_name = '{table}'"
            ))
        };
        if !totals_only {
            return Some(size("rate_journal"));
        }
        self.db.root_sql(&format!(
            "CREATE TABLE `{d}`.totals_alone LIKE `{d}`.rate_journal; \
             INSERT INTO `{d}`.totals_alone SELECT * FROM `{d}`.rate_journal WHERE kind = 't'"
        ));
        let bytes = size("totals_alone");
        self.db.root_sql(&format!("DROP TABLE `{d}`.totals_alone"));
        Some(bytes)
    }

    /// SIGKILL: no shutdown; InnoDB recovers at the next start.
    fn kill(&mut self) {
        self.db.kill();
    }

    fn restart(&mut self) {
        self.db.restart();
    }

    fn keeps_counts_across_restart(&self) -> bool {
        true
    }

    fn store_json(&self, policy: &str, timeouts: Timeouts) -> Value {
        self.tcp(self.db.port(), policy, timeouts)
    }

    fn place(&self) -> String {
        format!("mysql store at 127.0.0.1:{}", self.db.port())
    }

    fn secrets(&self) -> Vec<String> {
        vec![self.db.password().to_owned()]
    }

    /// A request is bounded by the connect timeout and twice the read timeout.
    fn failure_bound(&self, timeouts: Timeouts) -> Duration {
        Duration::from_millis(timeouts.connect_ms() + 2 * timeouts.read_ms()) + SLACK
    }
}

impl Slowable for InMysql {
    fn slow_store_json(&self, policy: &str) -> Value {
        self.tcp(self.proxy.port(), policy, Timeouts::Short)
    }

    fn slow_place(&self) -> String {
        format!("mysql store at 127.0.0.1:{}", self.proxy.port())
    }

    fn slow_within_bounds(&mut self, _keys: &[String]) -> Duration {
        proxy_slow_within_bounds(&self.proxy)
    }

    fn slowdowns(&self) -> Vec<Slowdown> {
        let bound = self.failure_bound(Timeouts::Short);
        let hints = &["timeout_ms", "too slowly"];
        let mut all = proxy_slowdowns(hints, bound);
        all.push(Slowdown {
            name: "every packet within the read timeout, too many of them",
            hints,
            at_least: Some(Duration::from_millis(Timeouts::Short.read_ms()) * 8 / 10),
            bound,
        });
        all
    }

    fn slow_down(&mut self, n: usize, _keys: &[String]) {
        proxy_slow_down(&self.proxy, n);
    }

    fn recover(&mut self) {
        proxy_recover(&self.proxy);
    }
}

impl Credentialed for InMysql {
    fn with_password(&self, password: &str, policy: &str) -> Vec<(&'static str, Value)> {
        let mut field = self.store_json(policy, Timeouts::Short);
        field["password"] = json!(password);
        let mut url = json!({
            "kind": "mysql",
            "url": format!(
                "mysql://{}:{}@127.0.0.1:{}/{}",
                self.db.user(),
                encode(password),
                self.db.port(),
                self.db.database()
            ),
        });
        policy_fields(&mut url, policy);
        vec![("password field", field), ("password in the URL", url)]
    }

    fn complaint(&self) -> [&'static str; 2] {
        ["Access denied", "store.password"]
    }
}

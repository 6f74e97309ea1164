//! A real Redis Cluster on loopback: six redis-server processes (`cluster-enabled yes`, each
//! in its own temp dir, its own client and bus ports), joined by Redis's own tooling
//! (`redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`) into three masters with
//! a replica each; a master can be killed and the replica's takeover waited for. Over TLS
//! (`start_tls`) every node speaks TLS only on its client port, its cluster bus and its
//! replication (`tls-cluster`, `tls-replication`), with the test CA's certificate; this test's
//! own plain client then reaches each node by its Unix socket.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::net::free_port;
use super::redis::{Redis, Resp};
use super::system::require;
use super::tls::TestCa;

pub const REDIS_CLI: &str = "/usr/bin/redis-cli";

/// How long a node may go unheard before the others call it failed: short, so that a
/// failover takes a second or two.
pub const NODE_TIMEOUT_MS: u64 = 1000;
/// How long forming the cluster or a failover may take before the test fails.
const SETTLE: Duration = Duration::from_secs(60);

pub struct RedisCluster {
    /// Every node; which are masters changes with a failover.
    pub nodes: Vec<Redis>,
    password: String,
}

impl RedisCluster {
    /// Six nodes with `password` (`requirepass`, and `masterauth` for the replicas), joined
    /// into three masters with a replica each; returns once every node says
    /// `cluster_state:ok` and every replica is in sync.
    pub fn start(label: &str, password: &str) -> RedisCluster {
        RedisCluster::start_with(label, password, None)
    }

    /// As [`RedisCluster::start`], every node over TLS with `ca`'s certificate: the client
    /// ports, the cluster bus and replication.
    pub fn start_tls(label: &str, password: &str, ca: &TestCa) -> RedisCluster {
        RedisCluster::start_with(label, password, Some(ca))
    }

    fn start_with(label: &str, password: &str, ca: Option<&TestCa>) -> RedisCluster {
        require(Path::new(REDIS_CLI), "redis-cli (package redis-tools)");
        let began = Instant::now();
        let nodes: Vec<Redis> = (0..6)
            .map(|i| {
                let mut node = Redis::builder(&format!("{label}-c{i}"));
                if let Some(ca) = ca {
                    node = node
                        .tls(ca)
                        .arg("--tls-cluster")
                        .arg("yes")
                        .arg("--tls-replication")
                        .arg("yes");
                }
                node.password(password)
                    .arg("--cluster-enabled")
                    .arg("yes")
                    .arg("--cluster-config-file")
                    .arg("nodes.conf")
                    .arg("--cluster-port")
                    .arg(&free_port().to_string())
                    .arg("--cluster-node-timeout")
                    .arg(&NODE_TIMEOUT_MS.to_string())
                    .arg("--repl-diskless-sync-delay")
                    .arg("0")
                    .arg("--masterauth")
                    .arg(password)
                    .start()
            })
            .collect();
        let mut create = Command::new(REDIS_CLI);
        if let Some(ca) = ca {
            create.arg("--tls").arg("--cacert").arg(ca.ca());
        }
        create.args(["--cluster", "create"]);
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port()));
        }
        create.args([
            "--cluster-replicas",
            "1",
            "--cluster-yes",
            "--no-auth-warning",
        ]);
        create.env("REDISCLI_AUTH", password);
        let out = create.output().expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster {
            nodes,
            password: password.to_owned(),
        };
        cluster.wait_settled(&[]);
        eprintln!(
            "redis cluster {label}: ready after {} ms (ports {:?})",
            began.elapsed().as_millis(),
            cluster.ports()
        );
        cluster
    }

    pub fn password(&self) -> &str {
        &self.password
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(Redis::port).collect()
    }

    /// `HOST:PORT` of every node, for `store.cluster_nodes`.
    pub fn seeds(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect()
    }

    /// A field of `INFO replication` or `CLUSTER INFO` of node `i`.
    fn field(&self, i: usize, command: &[&str], name: &str) -> Option<String> {
        let mut conn = self.nodes[i].connect(self.nodes[i].via()).ok()?;
        let text = conn.cmd(command).ok()?.as_text()?;
        text.lines().find_map(|l| {
            l.strip_prefix(&format!("{name}:"))
                .map(|v| v.trim().to_owned())
        })
    }

    /// The index of the node that is master of `slot` now, by a node that is up.
    pub fn master_of(&self, slot: u16, dead: &[usize]) -> usize {
        for (i, n) in self.nodes.iter().enumerate() {
            if dead.contains(&i) {
                continue;
            }
            let Ok(mut conn) = n.connect(n.via()) else {
                continue;
            };
            let Ok(Resp::Array(Some(ranges))) = conn.cmd(&["CLUSTER", "SLOTS"]) else {
                continue;
            };
            for r in ranges {
                let Resp::Array(Some(parts)) = r else {
                    continue;
                };
                let (Some(Resp::Int(a)), Some(Resp::Int(b)), Some(Resp::Array(Some(m)))) =
                    (parts.first(), parts.get(1), parts.get(2))
                else {
                    continue;
                };
                if (*a..=*b).contains(&i64::from(slot))
                    && let Some(Resp::Int(port)) = m.get(1)
                    && let Some(k) = self.ports().iter().position(|p| i64::from(*p) == *port)
                {
                    return k;
                }
            }
        }
        panic!("no node up names the master of slot {slot}");
    }

    /// The slot of `key`, as node 0 (or another up) computes it.
    pub fn keyslot(&self, key: &str) -> u16 {
        for n in &self.nodes {
            if let Ok(mut c) = n.connect(n.via())
                && let Ok(Resp::Int(s)) = c.cmd(&["CLUSTER", "KEYSLOT", key])
            {
                return s as u16;
            }
        }
        panic!("no node answers CLUSTER KEYSLOT");
    }

    /// Waits until every node but `dead` says `cluster_state:ok`, three masters serve every
    /// slot, and each master that has a replica up sees it in sync.
    pub fn wait_settled(&self, dead: &[usize]) -> Duration {
        let began = Instant::now();
        loop {
            let up: Vec<usize> = (0..self.nodes.len())
                .filter(|i| !dead.contains(i))
                .collect();
            let ok = up.iter().all(|&i| {
                self.field(i, &["CLUSTER", "INFO"], "cluster_state")
                    .as_deref()
                    == Some("ok")
                    && self
                        .field(i, &["CLUSTER", "INFO"], "cluster_slots_ok")
                        .as_deref()
                        == Some("16384")
            });
            let masters = up
                .iter()
                .filter(|&&i| {
                    self.field(i, &["INFO", "replication"], "role").as_deref() == Some("master")
                })
                .count();
            let synced = up.iter().all(|&i| {
                self.field(i, &["INFO", "replication"], "role").as_deref() != Some("slave")
                    || self
                        .field(i, &["INFO", "replication"], "master_link_status")
                        .as_deref()
                        == Some("up")
            });
            if ok && masters == 3 && synced {
                return began.elapsed();
            }
            assert!(
                began.elapsed() < SETTLE,
                "the cluster did not settle in {SETTLE:?}: ok {ok}, masters {masters}, synced {synced}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sums a counter of `INFO stats` over the nodes up.
    pub fn stat_sum(&self, name: &str, dead: &[usize]) -> u64 {
        (0..self.nodes.len())
            .filter(|i| !dead.contains(i))
            .filter_map(|i| self.field(i, &["INFO", "stats"], name))
            .filter_map(|v| v.parse::<u64>().ok())
            .sum()
    }

    /// Every key of every master up (tests hold few), with its node.
    pub fn keys(&self, dead: &[usize]) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if dead.contains(&i) {
                continue;
            }
            if self.field(i, &["INFO", "replication"], "role").as_deref() != Some("master") {
                continue;
            }
            if let Ok(mut c) = n.connect(n.via())
                && let Ok(Resp::Array(Some(keys))) = c.cmd(&["KEYS", "*"])
            {
                out.extend(keys.iter().filter_map(Resp::as_text).map(|k| (i, k)));
            }
        }
        out
    }

    /// One command on the master of `key`'s slot (its name as the store writes it).
    pub fn cmd_on_key(&self, key: &str, args: &[&str]) -> Resp {
        let i = self.master_of(self.keyslot(key), &[]);
        self.nodes[i].cmd(args)
    }

    /// The key the store writes for `key` (a client's identity in braces), found among the
    /// keys held: the same text once its braces are taken out.
    pub fn stored_name(&self, key: &str) -> Option<String> {
        self.keys(&[])
            .into_iter()
            .map(|(_, k)| k)
            .find(|k| k == key || k.replace(['{', '}'], "") == key)
    }
}

//! A Redis Cluster as the store reaches it: the slot map (from `CLUSTER SLOTS`), a connection
//! per node opened only when a command goes there, and each command sent to the master of its
//! key's slot, following `MOVED` (the map learnt again) and `ASK` (`ASKING` first, the map
//! kept), and waiting out a failover (`CLUSTERDOWN`, `TRYAGAIN`, a master unreachable) within
//! the request's time, a bounded number of tries.
//!
//! What is sent is a list of units, each one command or one transaction (`MULTI` … `EXEC`)
//! whose keys share a slot; replies come back in the units' order. Units for one node go in
//! one write. The first exchange of a process asks `CLUSTER SLOTS` of a seed in the same
//! write as its commands, so that a request whose keys live on that seed touches one node.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::core::slot::{SLOTS, slot_of};
use crate::store::redis::resp::{self, Connection, Reply, Target};
use crate::support::defaults;
use crate::support::secret::Secret;

/// One command, or one transaction, sent whole to one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The slot of its keys; None for a command without keys (any node answers it).
    pub slot: Option<u16>,
    pub commands: Vec<Vec<u8>>,
}

/// Why an exchange with the cluster failed.
#[derive(Debug)]
pub enum Failure {
    /// Connecting to a node (`store.connect_timeout_ms`) failed.
    Connect(String, io::Error),
    /// A node took the commands but its replies failed.
    Exchange(String, io::Error),
    /// A node refused the credentials, or the cluster stayed down or moving past the tries or
    /// the time: the node and its last words.
    Refused(String, String),
}

/// The cluster's nodes and where each slot lives.
pub struct Cluster {
    /// The seeds, in order: the URL's host first, then `store.cluster_nodes`.
    seeds: Vec<String>,
    username: Option<String>,
    password: Option<Secret>,
    connect_timeout: Duration,
    read_timeout: Duration,
    /// Every node over TLS, with this CA file besides the public roots (`Some(None)`: the
    /// roots only), as the configured target is; None: plain TCP.
    tls: Option<Option<PathBuf>>,
    /// Per slot, the master's index in `nodes` (None: not known yet).
    slots: Vec<Option<u16>>,
    /// Every node named by the map or a redirection, as `HOST:PORT`.
    nodes: Vec<String>,
    conns: HashMap<String, Connection>,
}

/// Where a unit goes next.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// The master of its slot by the map (or any node for a unit without keys).
    Map,
    /// A node named by `ASK`: `ASKING` first.
    Asking(String),
}

/// What a unit's replies say about where it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Done,
    /// `MOVED SLOT HOST:PORT`: the slot's master is that node from now on.
    Moved(u16, String),
    /// `ASK SLOT HOST:PORT`: the slot is moving there; this command only.
    Ask(String),
    /// `CLUSTERDOWN`, `TRYAGAIN`: the same again after a pause.
    Again(String),
}

/// The routing words of a command: its first key, from its encoded arguments.
pub fn key_of(command: &[u8]) -> Option<Vec<u8>> {
    let Ok(Some((Reply::Array(Some(args)), _))) = resp::parse(command) else {
        return None;
    };
    let arg = |i: usize| match args.get(i) {
        Some(Reply::Bulk(Some(b))) => Some(b.clone()),
        _ => None,
    };
    let name = String::from_utf8_lossy(&arg(0)?).to_ascii_uppercase();
    match name.as_str() {
        "EVAL" | "EVALSHA" => {
            let keys: usize = String::from_utf8_lossy(&arg(2)?).parse().ok()?;
            if keys == 0 { None } else { arg(3) }
        }
        "MULTI" | "EXEC" | "DISCARD" | "TIME" | "INFO" | "PING" | "CLUSTER" | "ASKING" | "AUTH"
        | "SCRIPT" => None,
        _ => arg(1),
    }
}

/// Splits `commands` into units: a `MULTI` … `EXEC` whole, every other command alone, each
/// with the slot of its first key.
pub fn units(commands: &[Vec<u8>]) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    let mut open: Option<Unit> = None;
    for command in commands {
        let key = key_of(command);
        let word = command_name(command);
        match (&mut open, word.as_str()) {
            (None, "MULTI") => {
                open = Some(Unit {
                    slot: None,
                    commands: vec![command.clone()],
                })
            }
            (Some(unit), _) => {
                unit.commands.push(command.clone());
                if unit.slot.is_none() {
                    unit.slot = key.as_deref().map(slot_of);
                }
                if word == "EXEC" || word == "DISCARD" {
                    out.extend(open.take());
                }
            }
            (None, _) => out.push(Unit {
                slot: key.as_deref().map(slot_of),
                commands: vec![command.clone()],
            }),
        }
    }
    out.extend(open);
    out
}

fn command_name(command: &[u8]) -> String {
    match resp::parse(command) {
        Ok(Some((Reply::Array(Some(args)), _))) => match args.first() {
            Some(Reply::Bulk(Some(b))) => String::from_utf8_lossy(b).to_ascii_uppercase(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// What a unit's replies say: the first redirection or "try again" among them.
fn outcome(replies: &[Reply]) -> Outcome {
    for reply in replies {
        let Reply::Error(e) = reply else { continue };
        let mut words = e.split(' ');
        match words.next() {
            Some("MOVED") => {
                if let (Some(slot), Some(node)) = (words.next(), words.next())
                    && let Ok(slot) = slot.parse::<u16>()
                    && slot < SLOTS
                {
                    return Outcome::Moved(slot, node.to_owned());
                }
            }
            Some("ASK") => {
                if let (Some(_), Some(node)) = (words.next(), words.next()) {
                    return Outcome::Ask(node.to_owned());
                }
            }
            Some("CLUSTERDOWN" | "TRYAGAIN" | "LOADING" | "MASTERDOWN") => {
                return Outcome::Again(e.clone());
            }
            _ => {}
        }
    }
    Outcome::Done
}

/// The masters of a `CLUSTER SLOTS` reply: `(first slot, last slot, HOST:PORT)`. A master
/// whose address is empty is the node asked (`asked`); one shown as `?` is skipped.
pub fn slot_ranges(reply: &Reply, asked: &str) -> Option<Vec<(u16, u16, String)>> {
    let Reply::Array(Some(ranges)) = reply else {
        return None;
    };
    let mut out = Vec::new();
    for range in ranges {
        let Reply::Array(Some(parts)) = range else {
            return None;
        };
        let (Some(Reply::Int(first)), Some(Reply::Int(last)), Some(Reply::Array(Some(master)))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            return None;
        };
        let (Some(Reply::Bulk(Some(host))), Some(Reply::Int(port))) =
            (master.first(), master.get(1))
        else {
            return None;
        };
        let host = String::from_utf8_lossy(host).into_owned();
        let node = match host.as_str() {
            "?" => continue,
            "" => asked.to_owned(),
            h if h.contains(':') => format!("[{h}]:{port}"),
            h => format!("{h}:{port}"),
        };
        let first = u16::try_from(*first).ok().filter(|s| *s < SLOTS)?;
        let last = u16::try_from(*last)
            .ok()
            .filter(|s| *s < SLOTS && *s >= first)?;
        out.push((first, last, node));
    }
    Some(out)
}

/// The target of `HOST:PORT` (`[ADDRESS]:PORT` for IPv6): over TLS when `tls` says so, the
/// certificate checked against the node's name as the cluster gives it.
fn target_of(node: &str, tls: Option<&Option<PathBuf>>) -> Option<Target> {
    let (host, port) = node.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .to_owned();
    let port = port.parse().ok()?;
    Some(match tls {
        Some(ca_file) => Target::Tls {
            host,
            port,
            ca_file: ca_file.clone(),
        },
        None => Target::Tcp { host, port },
    })
}

impl Cluster {
    pub fn new(
        seeds: Vec<String>,
        username: Option<String>,
        password: Option<Secret>,
        connect_timeout: Duration,
        read_timeout: Duration,
        tls: Option<Option<PathBuf>>,
    ) -> Cluster {
        Cluster {
            seeds,
            username,
            password,
            connect_timeout,
            read_timeout,
            tls,
            slots: vec![None; usize::from(SLOTS)],
            nodes: Vec::new(),
            conns: HashMap::new(),
        }
    }

    /// Whether any slot's master is known.
    fn mapped(&self) -> bool {
        self.slots.iter().any(Option::is_some)
    }

    fn node_index(&mut self, node: &str) -> u16 {
        match self.nodes.iter().position(|n| n == node) {
            Some(i) => i as u16,
            None => {
                self.nodes.push(node.to_owned());
                (self.nodes.len() - 1) as u16
            }
        }
    }

    /// Learns the map from a `CLUSTER SLOTS` reply of `asked`.
    fn learn(&mut self, reply: &Reply, asked: &str) -> bool {
        let Some(ranges) = slot_ranges(reply, asked) else {
            return false;
        };
        self.slots.iter_mut().for_each(|s| *s = None);
        for (first, last, node) in ranges {
            let i = self.node_index(&node);
            for slot in first..=last {
                self.slots[usize::from(slot)] = Some(i);
            }
        }
        true
    }

    /// The master of `slot` by the map.
    fn master(&self, slot: u16) -> Option<&str> {
        self.slots[usize::from(slot)].map(|i| self.nodes[usize::from(i)].as_str())
    }

    /// Where to ask the map (or send a command without keys): a node already connected, else
    /// the seeds in order, then the nodes the map named; none of those in `failed`.
    fn probe_node(&self, failed: &[String]) -> Option<String> {
        let ok = |n: &&String| !failed.contains(n);
        self.seeds
            .iter()
            .chain(&self.nodes)
            .filter(ok)
            .find(|n| self.conns.contains_key(*n))
            .or_else(|| self.seeds.iter().chain(&self.nodes).find(ok))
            .cloned()
    }

    /// The TLS version and cipher suite of a connection open now (the nodes are all reached
    /// alike), for `resolve check`; None over plain TCP or before any connection.
    pub fn tls(&self) -> Option<String> {
        let mut open: Vec<(&String, &Connection)> = self.conns.iter().collect();
        open.sort_by(|a, b| a.0.cmp(b.0));
        open.into_iter().find_map(|(_, c)| c.tls())
    }

    /// The masters by the map, for `resolve check`: each node, its slot ranges
    /// (`0-5460,6000`) and how many slots they hold.
    pub fn masters(&self) -> Vec<(String, String, usize)> {
        let mut ranges: Vec<(Vec<(u16, u16)>, usize)> = vec![(Vec::new(), 0); self.nodes.len()];
        for (slot, node) in self.slots.iter().enumerate() {
            let Some(i) = node else { continue };
            let slot = slot as u16;
            let (list, count) = &mut ranges[usize::from(*i)];
            *count += 1;
            match list.last_mut() {
                Some((_, last)) if *last + 1 == slot => *last = slot,
                _ => list.push((slot, slot)),
            }
        }
        self.nodes
            .iter()
            .zip(ranges)
            .filter(|(_, (_, c))| *c > 0)
            .map(|(n, (list, c))| {
                let text: Vec<String> = list
                    .iter()
                    .map(|(a, b)| {
                        if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        }
                    })
                    .collect();
                (n.clone(), text.join(","), c)
            })
            .collect()
    }

    /// Sends `commands` to `node` (connecting and authenticating first when needed) and
    /// returns their replies, the setup's taken off.
    fn send(&mut self, node: &str, commands: &[Vec<u8>]) -> Result<Vec<Reply>, Failure> {
        let mut sent = Vec::with_capacity(commands.len() + 1);
        if !self.conns.contains_key(node) {
            let target = target_of(node, self.tls.as_ref()).ok_or_else(|| {
                Failure::Refused(node.to_owned(), "not an address the store can reach".into())
            })?;
            let conn = Connection::open(&target, self.connect_timeout, self.read_timeout)
                .map_err(|e| Failure::Connect(node.to_owned(), e))?;
            self.conns.insert(node.to_owned(), conn);
            sent.extend(resp::auth(self.username.as_deref(), self.password.as_ref()));
        }
        let setup = sent.len();
        sent.extend_from_slice(commands);
        let conn = self.conns.get_mut(node).expect("connected above");
        match conn.pipeline(&sent) {
            Ok(mut replies) => {
                if setup == 1
                    && let Reply::Error(e) = &replies[0]
                {
                    let e = e.clone();
                    self.conns.remove(node);
                    return Err(Failure::Refused(node.to_owned(), e));
                }
                Ok(replies.split_off(setup))
            }
            Err(e) => {
                self.conns.remove(node);
                Err(Failure::Exchange(node.to_owned(), e))
            }
        }
    }

    /// Sends every unit to the master of its slot and returns the replies, unit after unit,
    /// following redirections and waiting out a failover until the tries or the time (the
    /// connect and read timeouts together) run out.
    pub fn exchange(&mut self, units: &[Unit]) -> Result<Vec<Reply>, Failure> {
        let deadline = Instant::now() + self.connect_timeout + self.read_timeout;
        let mut done: Vec<Option<Vec<Reply>>> = vec![None; units.len()];
        let mut routes: Vec<Route> = vec![Route::Map; units.len()];
        let mut failed: Vec<String> = Vec::new();
        let mut last: Option<Failure> = None;
        for _ in 0..defaults::REDIS_CLUSTER_MAX_TRIES {
            let pending: Vec<usize> = (0..units.len()).filter(|i| done[*i].is_none()).collect();
            if pending.is_empty() {
                break;
            }
            let mut pause = false;
            // Each pending unit's node; without a map, a seed asked for it in the same write.
            let mapped = self.mapped();
            let probe = self.probe_node(&failed);
            let mut by_node: Vec<(String, Vec<usize>)> = Vec::new();
            for &i in &pending {
                let node = match (&routes[i], units[i].slot) {
                    (Route::Asking(node), _) => Some(node.clone()),
                    (Route::Map, Some(slot)) if mapped => self.master(slot).map(str::to_owned),
                    _ => probe.clone(),
                };
                let Some(node) = node.or_else(|| probe.clone()) else {
                    // Every node failed this time: wait, then try them all again.
                    failed.clear();
                    pause = true;
                    break;
                };
                match by_node.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, list)) => list.push(i),
                    None => by_node.push((node, vec![i])),
                }
            }
            // The map is asked again only when it proved wrong; without one, the seed asked
            // gave it in the same write.
            let mut refresh = false;
            for (node, list) in by_node {
                let ask_map = !mapped && Some(&node) == probe.as_ref();
                let mut commands = Vec::new();
                if ask_map {
                    commands.push(resp::encode(&[b"CLUSTER", b"SLOTS"]));
                }
                for &i in &list {
                    if matches!(routes[i], Route::Asking(_)) {
                        commands.push(resp::encode(&[b"ASKING"]));
                    }
                    commands.extend(units[i].commands.iter().cloned());
                }
                let mut replies = match self.send(&node, &commands) {
                    Ok(r) => r.into_iter(),
                    Err(f) => {
                        // The node is gone or hung: the map may be old (a failover).
                        if matches!(f, Failure::Refused(..)) {
                            return Err(f);
                        }
                        let timed_out = matches!(&f, Failure::Exchange(_, e)
                            if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock));
                        if timed_out {
                            return Err(f);
                        }
                        // A node that takes no connection: a seed down (the next one is asked at
                        // once), or a master down by the map (a failover: the map is asked
                        // again after a pause). A connection that broke is opened again at once
                        // (a kept one the server closed).
                        let unreachable = matches!(f, Failure::Connect(..));
                        if unreachable {
                            failed.push(node.clone());
                        }
                        for &i in &list {
                            routes[i] = Route::Map;
                        }
                        last = Some(f);
                        refresh |= unreachable && mapped;
                        pause |= unreachable && mapped;
                        continue;
                    }
                };
                if ask_map {
                    let map = replies.next().unwrap_or(Reply::Array(None));
                    if !self.learn(&map, &node) {
                        let words = match map {
                            Reply::Error(e) => e,
                            other => format!("CLUSTER SLOTS answered {other:?}"),
                        };
                        return Err(Failure::Refused(
                            node,
                            format!(
                                "{words} (is it a Redis Cluster? remove store.cluster_nodes for a single Redis)"
                            ),
                        ));
                    }
                }
                for &i in &list {
                    if matches!(routes[i], Route::Asking(_)) {
                        replies.next();
                    }
                    let got: Vec<Reply> = replies.by_ref().take(units[i].commands.len()).collect();
                    match outcome(&got) {
                        Outcome::Done => done[i] = Some(got),
                        Outcome::Moved(slot, to) => {
                            let n = self.node_index(&to);
                            self.slots[usize::from(slot)] = Some(n);
                            routes[i] = Route::Map;
                            // Sent by the map: it is old, learn it whole. Sent to the seed
                            // before the map came in the same write: it is new.
                            refresh |= mapped;
                        }
                        Outcome::Ask(to) => routes[i] = Route::Asking(to),
                        Outcome::Again(words) => {
                            routes[i] = Route::Map;
                            last = Some(Failure::Refused(node.clone(), words));
                            refresh = true;
                            pause = true;
                        }
                    }
                }
            }
            if done.iter().all(Option::is_some) {
                break;
            }
            if Instant::now() >= deadline {
                break;
            }
            if pause {
                let left = deadline.saturating_duration_since(Instant::now());
                std::thread::sleep(
                    Duration::from_millis(defaults::REDIS_CLUSTER_RETRY_PAUSE_MS).min(left),
                );
            }
            if refresh {
                self.refresh(&failed);
            }
        }
        if done.iter().all(Option::is_some) {
            return Ok(done.into_iter().flatten().flatten().collect());
        }
        Err(last.unwrap_or_else(|| {
            Failure::Refused(
                self.probe_node(&[]).unwrap_or_default(),
                "the cluster kept redirecting the command".into(),
            )
        }))
    }

    /// Asks a node the map again (`CLUSTER SLOTS`); the map stays as it is when none answers.
    fn refresh(&mut self, failed: &[String]) {
        let mut tried: Vec<String> = failed.to_vec();
        while let Some(node) = self.probe_node(&tried) {
            if let Ok(replies) = self.send(&node, &[resp::encode(&[b"CLUSTER", b"SLOTS"])])
                && let Some(reply) = replies.first()
                && self.learn(reply, &node)
            {
                return;
            }
            tried.push(node);
            if tried.len() > self.seeds.len() + self.nodes.len() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;

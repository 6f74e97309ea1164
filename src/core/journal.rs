//! The usage journal's model: what one request adds to it (counts per hour, and the client's
//! admitted or refused count), and the figures read back from what the stores kept. Pure: the
//! stores only add and return counts.
//!
//! A store keeps two kinds of rows, both keyed by the hour (hours since the Unix epoch, UTC):
//! - totals: `name -> count` for the whole site (`requests`, `admitted`, `refused:ip`, ...);
//! - clients: `client -> (admitted, refused)`, kept for [`CLIENT_HOURS`] only.
//!
//! Day and month figures are sums of hours. Totals are kept for [`KEEP_HOURS`].

use std::collections::BTreeMap;

use crate::core::calendar;

mod line;

/// Milliseconds in one hour.
pub const HOUR_MS: u64 = 3_600_000;
/// Hours the per-client counts are kept: today and yesterday (UTC) whatever the hour now.
pub const CLIENT_HOURS: u32 = 48;
/// Hours the site's totals are kept: 400 days, so a month and the same month a year ago fit.
pub const KEEP_HOURS: u32 = 400 * 24;
/// The newest `ACTION NEEDED` notes a store keeps.
pub const KEEP_NOTES: usize = 50;
/// The most of them one kind of event may take ([`note_kind`]), so that a flood of one kind
/// (a failing provider's line for each visitor's link) cannot push out the others.
/// A fifth: one kind flooding the notes leaves room for four others.
pub const KEEP_NOTES_PER_KIND: usize = 10;

/// The hour `at_ms` falls in.
pub fn hour_of(at_ms: u64) -> u32 {
    u32::try_from(at_ms / HOUR_MS).unwrap_or(u32::MAX)
}

/// The first hour of the UTC day `hour` falls in.
pub fn day_start(hour: u32) -> u32 {
    hour - hour % 24
}

/// The first hour of the UTC month `hour` falls in.
pub fn month_start(hour: u32) -> u32 {
    let day = hour / 24;
    let (_, _, day_of_month) = calendar::date_of_day(i64::from(day));
    (day - (day_of_month - 1)) * 24
}

/// Whether a client was admitted or refused by the rules, for its per-client counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClientCount {
    Admitted,
    Refused,
    /// The bytes of the files the client was served (their sizes as the service gave them).
    Bytes,
}

impl ClientCount {
    pub fn name(self) -> &'static str {
        match self {
            ClientCount::Admitted => "admitted",
            ClientCount::Refused => "refused",
            ClientCount::Bytes => "bytes",
        }
    }

    pub fn from_name(name: &str) -> Option<ClientCount> {
        match name {
            "admitted" => Some(ClientCount::Admitted),
            "refused" => Some(ClientCount::Refused),
            "bytes" => Some(ClientCount::Bytes),
            _ => None,
        }
    }
}

/// One thing that happened to a request, as the journal counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Every request that reached the limiter's gate (answers about the page excepted).
    Request,
    /// Admitted by every rule.
    Admitted,
    /// A provider call that reached the provider: paid for.
    Paid,
    /// A paid call that never reached the provider, whose count went back.
    Refund,
    /// Answered from the cache: a paid call saved.
    CacheHit,
    /// Refused (429) by this rule.
    Refused(String),
    /// Refused (503) by this spend rule: the site's own budget.
    SpendRefused(String),
    /// The provider call failed, in this class (`timeout`, `auth`, ...).
    ProviderFailure(&'static str),
    /// Refused before anything was counted, for this reason (the problem's code).
    Bad(String),
    /// The store failed the decision with damaged data (answered by the failure policy).
    StoreFailed,
    /// Refused (403) by the block list, before anything was counted.
    Blocked,
    /// This request's refusal made its client reach `auto_block`'s threshold: it is blocked.
    AutoBlocked,
    /// A shadow rule would have refused it (and refused nothing).
    WouldRefuse(String),
    /// It came from a known network's edge (e.g. `cloudflare`) that is not trusted.
    UntrustedNetwork(&'static str),
    /// A dashboard sign-in with a wrong password.
    SignInFailed,
    /// A dashboard sign-in refused past a budget of failures (429): no password checked.
    SignInRefused,
    /// With several services: a call that reached this service.
    ServiceCall(String),
    /// With several services: this service's call failed, in this class.
    ServiceFailure(String, &'static str),
    /// A file of this many bytes was served (its size as the service gave it).
    Bytes(u64),
    /// With several services: a file of this many bytes was served by this service.
    ServiceBytes(String, u64),
}

impl Event {
    /// The total's name in the stores, e.g. `refused:ip`.
    pub fn name(&self) -> String {
        match self {
            Event::Request => "requests".into(),
            Event::Admitted => "admitted".into(),
            Event::Paid => "paid".into(),
            Event::Refund => "refunds".into(),
            Event::CacheHit => "cache_hits".into(),
            Event::Refused(rule) => format!("refused:{rule}"),
            Event::SpendRefused(rule) => format!("spend_refused:{rule}"),
            Event::ProviderFailure(class) => format!("provider_failure:{class}"),
            Event::Bad(reason) => format!("bad:{reason}"),
            Event::StoreFailed => "store_failed".into(),
            Event::Blocked => "blocked".into(),
            Event::AutoBlocked => "auto_blocked".into(),
            Event::WouldRefuse(rule) => format!("would_refuse:{rule}"),
            Event::UntrustedNetwork(name) => format!("untrusted_network:{name}"),
            Event::SignInFailed => "signin_failed".into(),
            Event::SignInRefused => "signin_refused".into(),
            Event::ServiceCall(name) => format!("service_calls:{name}"),
            Event::ServiceFailure(name, class) => format!("service_failure:{name}:{class}"),
            Event::Bytes(_) => "bytes".into(),
            Event::ServiceBytes(name, _) => format!("service_bytes:{name}"),
        }
    }

    /// What it adds to its total: a file's bytes, else 1.
    pub fn amount(&self) -> u64 {
        match self {
            Event::Bytes(n) | Event::ServiceBytes(_, n) => *n,
            _ => 1,
        }
    }
}

/// What is added to the journal for one hour: an amount to each named total, and to each
/// client's admitted or refused count. One request adds one to each of its totals and to its
/// client's count; a [`Batch`] adds many requests' at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub hour: u32,
    /// Each total's name and what is added to it.
    pub totals: Vec<(String, u64)>,
    /// Each client, which of its counts, and what is added to it.
    pub clients: Vec<(String, ClientCount, u64)>,
}

impl Entry {
    /// The entry for a request answered at `at_ms` after these events, by `client` (its
    /// address as counted, when known).
    pub fn new(at_ms: u64, client: Option<&str>, events: &[Event]) -> Entry {
        let count = events.iter().find_map(|e| match e {
            Event::Admitted => Some(ClientCount::Admitted),
            Event::Refused(_) => Some(ClientCount::Refused),
            _ => None,
        });
        let bytes = events.iter().find_map(|e| match e {
            Event::Bytes(n) => Some((ClientCount::Bytes, *n)),
            _ => None,
        });
        Entry {
            hour: hour_of(at_ms),
            totals: events.iter().map(|e| (e.name(), e.amount())).collect(),
            clients: client
                .map(|c| {
                    (count.map(|n| (n, 1)).into_iter().chain(bytes))
                        .map(|(count, n)| (c.to_owned(), count, n))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Whether it adds nothing.
    pub fn is_empty(&self) -> bool {
        self.totals.is_empty() && self.clients.is_empty()
    }
}

/// Requests' entries gathered in memory to be added in one go: the sums per hour, each name
/// and client once. What a long-lived process keeps between writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    hours: BTreeMap<u32, Sums>,
    entries: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Sums {
    totals: BTreeMap<String, u64>,
    clients: BTreeMap<(String, ClientCount), u64>,
}

impl Batch {
    /// Adds an entry's amounts.
    pub fn add(&mut self, entry: &Entry) {
        if entry.is_empty() {
            return;
        }
        let sums = self.hours.entry(entry.hour).or_default();
        for (name, n) in &entry.totals {
            *sums.totals.entry(name.clone()).or_default() += n;
        }
        for (client, count, n) in &entry.clients {
            *sums.clients.entry((client.clone(), *count)).or_default() += n;
        }
        self.entries += 1;
    }

    /// How many entries were added since the batch was last taken.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Distinct totals and client counts held: what bounds its memory.
    pub fn len(&self) -> usize {
        self.hours
            .values()
            .map(|s| s.totals.len() + s.clients.len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.hours.is_empty()
    }

    /// The sums as one entry per hour, oldest first, leaving the batch empty.
    pub fn take(&mut self) -> Vec<Entry> {
        self.entries = 0;
        std::mem::take(&mut self.hours)
            .into_iter()
            .map(|(hour, sums)| Entry {
                hour,
                totals: sums.totals.into_iter().collect(),
                clients: sums
                    .clients
                    .into_iter()
                    .map(|((client, count), n)| (client, count, n))
                    .collect(),
            })
            .collect()
    }
}

/// One row a store returns: a total of an hour, or a client's count of an hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Total {
        hour: u32,
        name: String,
        count: u64,
    },
    Client {
        hour: u32,
        client: String,
        count: ClientCount,
        n: u64,
    },
}

/// An `ACTION NEEDED` event kept by the store: when, and the log line's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub at_ms: u64,
    pub text: String,
}

/// The kind of event a note tells: its text up to the first `"`, that is the owner's cause
/// and fix, which are written before anything quoted from a visitor (the link) or a provider.
/// A note with nothing quoted is a kind of its own.
pub fn note_kind(text: &str) -> &str {
    text.split('"').next().unwrap_or(text)
}

/// Which notes to keep, given the texts of a store's notes newest first: the newest
/// [`KEEP_NOTES_PER_KIND`] of each kind, and of those the newest [`KEEP_NOTES`]. True for a
/// note kept.
pub fn notes_kept<'a>(newest_first: impl IntoIterator<Item = &'a str>) -> Vec<bool> {
    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let mut kept = 0;
    newest_first
        .into_iter()
        .map(|text| {
            let seen = per_kind.entry(note_kind(text)).or_insert(0);
            let keep = *seen < KEEP_NOTES_PER_KIND && kept < KEEP_NOTES;
            if keep {
                *seen += 1;
                kept += 1;
            }
            keep
        })
        .collect()
}

/// One client's counts over a period.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFigures {
    pub client: String,
    pub admitted: u64,
    pub refused: u64,
    /// Bytes of the files it was served.
    pub bytes: u64,
}

/// The site's figures over the hours `from..to` (the end excluded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Figures {
    pub from_hour: u32,
    pub to_hour: u32,
    pub requests: u64,
    pub admitted: u64,
    pub paid_calls: u64,
    /// Bytes of the files served (their sizes as the service gave them).
    pub bytes: u64,
    pub refunds: u64,
    pub cache_hits: u64,
    pub store_failures: u64,
    /// 403s of the block lists.
    pub blocked: u64,
    /// Clients blocked by `auto_block`.
    pub auto_blocks: u64,
    /// Dashboard sign-ins with a wrong password.
    pub signin_failed: u64,
    /// Dashboard sign-ins refused past a budget of failures, their password not checked.
    pub signin_refused: u64,
    /// Requests each shadow rule would have refused, by rule name.
    pub would_refuse: BTreeMap<String, u64>,
    /// Requests from known networks' edges that are not trusted, by network.
    pub untrusted_networks: BTreeMap<String, u64>,
    /// 429s by rule name.
    pub refused: BTreeMap<String, u64>,
    /// Spend refusals (503) by spend rule name.
    pub spend_refused: BTreeMap<String, u64>,
    /// Provider failures by class.
    pub provider_failures: BTreeMap<String, u64>,
    /// Requests refused before counting (4xx), by reason.
    pub bad_requests: BTreeMap<String, u64>,
    /// With several services, each one's calls and failures, by its name.
    pub services: BTreeMap<String, ServiceFigures>,
    /// Totals the model does not know (written by a later version): kept, not dropped.
    pub other: BTreeMap<String, u64>,
    /// Paid calls per hour, oldest first, one per hour of the period.
    pub paid_per_hour: Vec<u64>,
    /// Every client with a count in the period.
    pub clients: Vec<ClientFigures>,
}

/// One service's figures, when the site lists several.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceFigures {
    /// Calls that reached it.
    pub calls: u64,
    /// Bytes of the files it served (their sizes as it gave them).
    pub bytes: u64,
    /// Its failures by class.
    pub failures: BTreeMap<String, u64>,
}

impl Figures {
    /// Sums the rows that fall in `from..to`; rows outside are ignored.
    pub fn from_rows(rows: &[Row], from_hour: u32, to_hour: u32) -> Figures {
        let span = usize::try_from(to_hour.saturating_sub(from_hour)).unwrap_or(0);
        let mut f = Figures {
            from_hour,
            to_hour,
            paid_per_hour: vec![0; span],
            ..Figures::default()
        };
        let mut clients: BTreeMap<&str, ClientFigures> = BTreeMap::new();
        let within = |hour: u32| (from_hour..to_hour).contains(&hour);
        for row in rows {
            match row {
                Row::Total { hour, name, count } if within(*hour) => {
                    f.add_total(name, *count);
                    if name == "paid" {
                        f.paid_per_hour[(hour - from_hour) as usize] += count;
                    }
                }
                Row::Client {
                    hour,
                    client,
                    count,
                    n,
                } if within(*hour) => {
                    let c = clients
                        .entry(client.as_str())
                        .or_insert_with(|| ClientFigures {
                            client: client.clone(),
                            ..ClientFigures::default()
                        });
                    match count {
                        ClientCount::Admitted => c.admitted += n,
                        ClientCount::Refused => c.refused += n,
                        ClientCount::Bytes => c.bytes += n,
                    }
                }
                _ => {}
            }
        }
        f.clients = clients.into_values().collect();
        f
    }

    /// The figures of `from..to` cut where `start_of` changes ([`day_start`],
    /// [`month_start`], or each hour its own): one for each day or month the period touches,
    /// in order, the first and the last as far as the period reaches. Without client counts.
    pub fn split(
        rows: &[Row],
        from_hour: u32,
        to_hour: u32,
        start_of: impl Fn(u32) -> u32,
    ) -> Vec<Figures> {
        let mut stretches: Vec<(u32, u32)> = Vec::new();
        for hour in from_hour..to_hour {
            match stretches.last_mut() {
                Some((start, end)) if start_of(*start) == start_of(hour) => *end = hour + 1,
                _ => stretches.push((hour, hour + 1)),
            }
        }
        let mut groups: Vec<Vec<Row>> = vec![Vec::new(); stretches.len()];
        for row in rows {
            if let Row::Total { hour, .. } = row
                && (from_hour..to_hour).contains(hour)
            {
                groups[stretches.partition_point(|(_, end)| end <= hour)].push(row.clone());
            }
        }
        stretches
            .iter()
            .zip(groups)
            .map(|((from, to), rows)| Figures::from_rows(&rows, *from, *to))
            .collect()
    }

    fn add_total(&mut self, name: &str, count: u64) {
        let into = |map: &mut BTreeMap<String, u64>, key: &str| {
            *map.entry(key.to_owned()).or_default() += count;
        };
        match name.split_once(':') {
            None => match name {
                "requests" => self.requests += count,
                "admitted" => self.admitted += count,
                "paid" => self.paid_calls += count,
                "bytes" => self.bytes += count,
                "refunds" => self.refunds += count,
                "cache_hits" => self.cache_hits += count,
                "store_failed" => self.store_failures += count,
                "blocked" => self.blocked += count,
                "auto_blocked" => self.auto_blocks += count,
                "signin_failed" => self.signin_failed += count,
                "signin_refused" => self.signin_refused += count,
                _ => into(&mut self.other, name),
            },
            Some(("refused", rule)) => into(&mut self.refused, rule),
            Some(("spend_refused", rule)) => into(&mut self.spend_refused, rule),
            Some(("provider_failure", class)) => into(&mut self.provider_failures, class),
            Some(("bad", reason)) => into(&mut self.bad_requests, reason),
            Some(("would_refuse", rule)) => into(&mut self.would_refuse, rule),
            Some(("untrusted_network", name)) => into(&mut self.untrusted_networks, name),
            Some(("service_calls", service)) => {
                self.services.entry(service.to_owned()).or_default().calls += count;
            }
            Some(("service_bytes", service)) => {
                self.services.entry(service.to_owned()).or_default().bytes += count;
            }
            Some(("service_failure", rest)) if rest.contains(':') => {
                let (service, class) = rest.split_once(':').unwrap_or((rest, ""));
                into(
                    &mut self
                        .services
                        .entry(service.to_owned())
                        .or_default()
                        .failures,
                    class,
                );
            }
            Some(_) => into(&mut self.other, name),
        }
    }

    /// Every 429, whichever rule.
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }

    /// The `n` clients with most refusals (then most admitted, then by name).
    pub fn top_refused(&self, n: usize) -> Vec<ClientFigures> {
        self.top(n, |c| (c.refused, c.admitted))
    }

    /// The `n` clients with most admitted requests (then most refusals, then by name).
    pub fn top_admitted(&self, n: usize) -> Vec<ClientFigures> {
        self.top(n, |c| (c.admitted, c.refused))
    }

    /// The `n` clients served the most bytes (then most admitted, then by name); none served
    /// no bytes.
    pub fn top_bytes(&self, n: usize) -> Vec<ClientFigures> {
        let mut list = self.top(self.clients.len(), |c| (c.bytes, c.admitted));
        list.retain(|c| c.bytes > 0);
        list.truncate(n);
        list
    }

    /// The `n` clients with the largest `rank`, then by name.
    fn top(&self, n: usize, rank: impl Fn(&ClientFigures) -> (u64, u64)) -> Vec<ClientFigures> {
        let mut list = self.clients.clone();
        list.sort_by(|a, b| rank(b).cmp(&rank(a)).then_with(|| a.client.cmp(&b.client)));
        list.truncate(n);
        list
    }
}

/// Where a store's journal keeps nothing more: totals before `totals_before`, client counts
/// before `clients_before` may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub totals_before: u32,
    pub clients_before: u32,
}

impl Expiry {
    /// What may go at `now_ms`.
    pub fn at(now_ms: u64) -> Expiry {
        let now = hour_of(now_ms);
        Expiry {
            totals_before: now.saturating_sub(KEEP_HOURS),
            clients_before: now.saturating_sub(CLIENT_HOURS),
        }
    }
}

#[cfg(test)]
impl Entry {
    /// A refusal of `client` at `hour` whose `requests` total is named twice, as the stores'
    /// tests write it: they must sum it.
    pub fn refused_with_a_total_twice(hour: u32, client: &str) -> Entry {
        Entry {
            hour,
            totals: vec![
                ("requests".into(), 1),
                ("refused:ip".into(), 1),
                ("requests".into(), 1),
            ],
            clients: vec![(client.into(), ClientCount::Refused, 1)],
        }
    }
}

#[cfg(test)]
mod tests;

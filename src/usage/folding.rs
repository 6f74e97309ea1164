//! A full data directory as the owner is told it: while new visitors are counted by shared
//! (folded) keys, one `ACTION NEEDED` line saying so and what to do (raise the budget, block
//! the networks that had the most new clients), for `resolve report`, `resolve stats` and the
//! dashboard alike.

use std::collections::BTreeMap;

use crate::core::journal::{self, Figures};
use crate::store::StoreError;
use crate::store::file::budget;
use crate::store::roles::Store;
use crate::store::upkeep::Folding;

/// The networks listed as the ones to block.
pub const NETWORKS_LISTED: usize = 5;

/// New visitors counted by shared keys now, and the networks that had the most clients in the
/// last 24 hours (whatever period the figures around it cover).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldingNow {
    pub store: Folding,
    pub networks: Vec<(String, u64)>,
}

/// Whether `store` counts new visitors by shared keys now; the last 24 hours of the journal
/// are read only when it does.
pub fn gather(store: &Store, now_ms: u64) -> Result<Option<FoldingNow>, StoreError> {
    let Some(folding) = store.upkeep.folding()? else {
        return Ok(None);
    };
    let to = journal::hour_of(now_ms).saturating_add(1);
    let from = to.saturating_sub(24);
    let rows = store.journal.journal_rows(from, to)?;
    Ok(Some(FoldingNow {
        store: folding,
        networks: busiest_networks(&Figures::from_rows(&rows, from, to), NETWORKS_LISTED),
    }))
}

/// The networks (an IPv4 /24, an IPv6 /48: what chooses a folded key) with the most clients
/// in the period, most first, with how many each had; those with one client only are left
/// out when others had more.
pub fn busiest_networks(f: &Figures, n: usize) -> Vec<(String, u64)> {
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    for c in &f.clients {
        let network = budget::network_of(&c.client).unwrap_or_else(|| c.client.clone());
        *by.entry(network).or_default() += 1;
    }
    let mut list: Vec<(String, u64)> = by.into_iter().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if list.first().is_some_and(|(_, most)| *most > 1) {
        list.retain(|(_, clients)| *clients > 1);
    }
    list.truncate(n);
    list
}

impl FoldingNow {
    /// The `ACTION NEEDED` line: the state, and what to do.
    pub fn line(&self) -> String {
        let FoldingNow {
            store: folding,
            networks,
        } = self;
        let block = if networks.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = networks
                .iter()
                .map(|(network, clients)| {
                    format!(
                        "{network} ({clients} client{})",
                        if *clients == 1 { "" } else { "s" }
                    )
                })
                .collect();
            format!(
                ", or block the networks that made the most new keys (`resolve block RANGE`): {}",
                list.join(", ")
            )
        };
        format!(
            "ACTION NEEDED: the data directory is full ({} entries, {} allowed before new \
             visitors share counters; store.max_files {}, store.max_bytes {}): new visitors \
             are counted by shared counters ({} per rule, {} counting now), a few networks' \
             new visitors to each. Raise store.max_files and store.max_bytes in the \
             configuration{block}. The dashboard's \"Clear the shared counters\" starts them \
             afresh.",
            folding.entries,
            folding.cap,
            folding.max_files,
            folding.max_bytes,
            folding.buckets,
            folding.folded_keys
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::journal::ClientFigures;

    fn client(name: &str) -> ClientFigures {
        ClientFigures {
            client: name.into(),
            admitted: 1,
            refused: 0,
            bytes: 0,
        }
    }

    #[test]
    fn the_networks_with_most_clients_are_listed_and_the_line_says_what_to_do() {
        let mut clients: Vec<ClientFigures> =
            (1..=7).map(|i| client(&format!("203.0.113.{i}"))).collect();
        clients.extend((1..=3).map(|i| client(&format!("2001:db8:5:{i}::/64"))));
        clients.push(client("198.51.100.9"));
        let figures = Figures {
            clients,
            ..Figures::default()
        };
        assert_eq!(
            busiest_networks(&figures, 5),
            [
                ("203.0.113.0/24".to_owned(), 7),
                ("2001:db8:5::/48".to_owned(), 3)
            ]
        );
        let now = FoldingNow {
            store: Folding {
                entries: 6_400,
                cap: 6_375,
                max_files: 10_000,
                max_bytes: 64 << 20,
                folded_keys: 40,
                buckets: 256,
            },
            networks: busiest_networks(&figures, NETWORKS_LISTED),
        };
        let line = now.line();
        assert!(
            line.starts_with("ACTION NEEDED: the data directory is full"),
            "{line}"
        );
        for part in [
            "Raise store.max_files and store.max_bytes",
            "203.0.113.0/24 (7 clients), 2001:db8:5::/48 (3 clients)",
            "Clear the shared counters",
        ] {
            assert!(line.contains(part), "{part}: {line}");
        }
    }
}

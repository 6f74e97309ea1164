//! The owner's controls over who gets through, applied around the limiter: block lists (the
//! configuration's and the store's temporary blocks) refuse before anything is counted, the
//! allow list exempts from the `ip` rules, `auto_block` blocks a client refused too often, and
//! shadow rules count what they would refuse without refusing.

pub mod auto_blocks;
pub mod blocks;
pub mod reach;

use crate::app::request::Asked;
use crate::app::{App, Tally};
use crate::core::decision::Decision;
use crate::core::journal::Event;
use crate::core::key::Reserved;
use crate::core::rule::{KeyKind, Rule};
use crate::http::problem::{Kind, Problem};
use crate::net::cidr::Cidr;
use crate::store::StoreError;
use crate::support::defaults;
use crate::support::log::Level;
use auto_blocks::Added;
use blocks::Block;

/// What a blocked client reads.
pub const BLOCKED: &str = "Requests from your address are blocked on this service.";

impl App<'_> {
    /// The 403 for a blocked client, before anything is counted or spent; logged at most once
    /// a minute per client. An error when the store's blocks cannot be read.
    pub(super) fn refuse_blocked(
        &self,
        asked: &Asked<'_>,
        tally: &mut Tally,
    ) -> Result<Option<Problem>, StoreError> {
        let why = if self.config.block.contains(asked.address) {
            "it is in the configuration's block list".to_owned()
        } else {
            let now = self.clock.now_ms();
            let copy = blocks::copy_path(self.config);
            let list = blocks::read_for_request(&*self.store.cache, copy.as_deref(), now)?;
            match blocks::find(&list, asked.address, now) {
                Some(block) => describe(block),
                None => return Ok(None),
            }
        };
        tally.add(Event::Blocked);
        if self.store.counters.first_within(
            &Reserved::BlockedLog(&asked.identity).key(),
            defaults::BLOCKED_LOG_INTERVAL_SECS,
        ) {
            self.log.line(
                Level::Warn,
                &format!(
                    "403 {}: blocked, {why} (logged at most once a minute per client)",
                    asked.identity
                ),
            );
        }
        Ok(Some(Problem::new(403, Kind::Blocked, BLOCKED)))
    }

    /// The client's rules without the `ip` ones when the allow list holds its address.
    pub(super) fn unless_allowed<'r>(
        &self,
        asked: &Asked<'_>,
        rules: Vec<&'r Rule>,
    ) -> Vec<&'r Rule> {
        if self.config.allow.contains(asked.address) {
            rules.into_iter().filter(|r| r.key != KeyKind::Ip).collect()
        } else {
            rules
        }
    }

    /// After a 429 by a rule that counts the client by its own key (`ip` or `api_key`; a
    /// site-wide `global` rule refuses everyone alike when the site is busy, and a full store's
    /// folded key the new clients that share it): counts the client's refusals, and
    /// blocks it when they reach `auto_block`'s threshold (exactly once: the refusal that fills
    /// the count).
    pub(super) fn count_refusal(&self, asked: &Asked<'_>, tally: &mut Tally) {
        let Some(auto) = self.config.auto_block else {
            return;
        };
        let filled = self.store.counters.count_reaches(
            &Reserved::Refusals(&asked.identity).key(),
            auto.refusals,
            auto.window_secs,
        );
        let Some(own) = Cidr::parse(&asked.identity) else {
            return;
        };
        // The network is counted too: addresses that each stay below the threshold, many of
        // them in one network, block the network.
        let network = auto_blocks::network_of(&own);
        let network_filled = network != own
            && self.store.counters.count_reaches(
                &Reserved::NetworkRefusals(&network).key(),
                auto.refusals
                    .saturating_mul(defaults::AUTO_BLOCK_NETWORK_FACTOR),
                auto.window_secs,
            );
        let (range, why) = match (filled, network_filled) {
            (true, _) => (
                own,
                format!("{} refusals within {} s", auto.refusals, auto.window_secs),
            ),
            (false, true) => (
                network,
                format!(
                    "{} refusals of its addresses within {} s",
                    auto.refusals
                        .saturating_mul(defaults::AUTO_BLOCK_NETWORK_FACTOR),
                    auto.window_secs
                ),
            ),
            (false, false) => return,
        };
        let now = self.clock.now_ms();
        let block = Block {
            range,
            until_ms: Some(now + u64::from(auto.block_secs) * 1000),
            reason: format!("automatic: {why}"),
            auto: true,
        };
        let copy = blocks::copy_path(self.config);
        let result = blocks::update(&*self.store.cache, copy.as_deref(), now, |list| {
            auto_blocks::add(list, block, now)
        });
        let blocked = match result {
            Ok(Added::Block) => range,
            Ok(Added::Network(network)) => network,
            Ok(Added::Covered) => return,
            Ok(Added::Full) => {
                if self.store.counters.first_within(
                    &Reserved::BlocksFullLog.key(),
                    defaults::BLOCKED_LOG_INTERVAL_SECS,
                ) {
                    self.log.line(
                        Level::Warn,
                        &format!(
                            "auto_block did not block {range} ({why}): the list of blocks is \
                             full ({} blocks), and the blocks in it stay until they end \
                             (`resolve blocks` lists them; logged at most once a minute)",
                            blocks::MAX_BLOCKS
                        ),
                    );
                }
                return;
            }
            Err(e) => {
                self.log.line(
                    Level::Warn,
                    &format!("auto_block could not block {}: {e}", asked.identity),
                );
                return;
            }
        };
        tally.add(Event::AutoBlocked);
        let shown = if blocked == own {
            asked.identity.to_string()
        } else {
            blocked.to_string()
        };
        self.log.line(
            Level::Warn,
            &format!(
                "blocked {shown} for {} s: {why} (auto_block; `resolve unblock {blocked}` lifts \
                 it)",
                auto.block_secs
            ),
        );
    }

    /// After an admitted request: each shadow rule counts it, and reports when it would have
    /// refused it (logged at most once per client per window of the rule).
    pub(super) fn shadow(&self, asked: &Asked<'_>, tally: &mut Tally) {
        for rule in &self.config.shadow_rules {
            if rule.key == KeyKind::ApiKey && asked.key.is_none() {
                continue;
            }
            let checks = asked.checks(&[rule]);
            if !matches!(
                self.store.counters.decide(&checks),
                Ok(Decision::Refuse { .. })
            ) {
                continue;
            }
            tally.add(Event::WouldRefuse(rule.name.as_str().into()));
            if self.store.counters.first_within(
                &Reserved::ShadowLog {
                    rule: &rule.name,
                    client: &asked.identity,
                }
                .key(),
                rule.window_secs.get(),
            ) {
                self.log.line(
                    Level::Notice,
                    &format!(
                        "shadow rule {} would have refused {} ({} per {} s; it refuses nothing while \"mode\" is \"shadow\"; logged once per window per client)",
                        rule.name, asked.identity, rule.limit, rule.window_secs
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;

fn describe(block: &Block) -> String {
    let until = match block.until_ms {
        Some(ms) => format!("until {}", crate::core::calendar::iso(ms)),
        None => "until unblocked".to_owned(),
    };
    let by = if block.auto {
        "auto_block"
    } else {
        "resolve block"
    };
    format!(
        "{} is blocked {until} by {by}: {}",
        block.range, block.reason
    )
}

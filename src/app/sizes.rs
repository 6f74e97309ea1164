//! A file's size against the site's limits: a file larger than `max_file_bytes` refused (422
//! `too_large`, its size in words), and the size the service gave charged to the request's
//! rules of bytes, to the window that admitted the request.

use crate::app::request::Asked;
use crate::app::{Admitted, App, Tally};
use crate::core::decision::Decision;
use crate::core::limiter;
use crate::core::rule::{Rule, Unit};
use crate::http::problem::{Kind, Problem};
use crate::http::render;
use crate::store::Check;
use crate::support::log::Level;

impl App<'_> {
    /// A refusal of a file over `max_file_bytes`, once its size is known; `paid`: the answer
    /// was paid for and is not handed out (the owner's log line says so).
    pub(super) fn too_large(&self, link: &str, size: Option<u64>, paid: bool) -> Option<Problem> {
        let (max, size) = (self.config.max_file_bytes?, size?);
        (size > max).then(|| {
            let when = if paid {
                "the service answered it (a paid call), and the answer is not handed out"
            } else {
                "refused before any paid call"
            };
            Problem::new(422, Kind::TooLarge, too_large_sentence(size, max)).log(format!(
                "{link:?} is a file of {size} bytes, over max_file_bytes ({max}): {when}"
            ))
        })
    }

    /// Counts a file of `size` bytes, known before the paid call, by the rules of bytes among
    /// `checks`: one atomic decision of those rules alone (`Counters::decide_sized`; the
    /// request's other rules already counted it), which admits it only when the whole file
    /// fits, else the 429 of the rule that refuses. Ok(true): counted, not to be charged
    /// again; Ok(false): nothing to count (no size, no rule of bytes, the store not counting
    /// the request, or failing now: then the size is charged after the answer).
    pub(super) fn count_size_before(
        &self,
        checks: &[Check<'_>],
        admitted: Option<&Admitted>,
        size: Option<u64>,
    ) -> Result<bool, Problem> {
        let (Some(_), Some(size)) = (admitted, size) else {
            return Ok(false);
        };
        let bytes: Vec<Check<'_>> = checks
            .iter()
            .filter(|c| c.rule.unit == Unit::Bytes)
            .cloned()
            .collect();
        if bytes.is_empty() {
            return Ok(false);
        }
        match self
            .store
            .counters
            .decide_sized(&bytes, bytes.len(), Some(size))
        {
            Ok(Decision::Admit { .. }) => Ok(true),
            Ok(refused @ Decision::Refuse { rule, .. }) => {
                let secs = refused.retry_after_secs().unwrap_or(1);
                let rule = bytes[rule].rule;
                let mut p = Problem::new(429, Kind::RateLimited, limited_sentence(rule, secs))
                    .retry_after(secs);
                p.rule = Some(rule.name.as_str().into());
                Err(p)
            }
            Err(e) => {
                self.log.line(
                    Level::Warn,
                    &format!("counting a file's {size} bytes before paying failed, it is counted after the answer: {e}"),
                );
                Ok(false)
            }
        }
    }

    /// A 429 of a rule of bytes decided before paying (the free check gave a size over what
    /// is left) counts towards `auto_block` as any refusal by the client's own key does: the
    /// rule counts the visitor (its address or its key), never a site-wide one.
    pub(super) fn count_own_bytes_refusal(
        &self,
        asked: &Asked<'_>,
        client_rules: &[&Rule],
        refused: &Problem,
        tally: &mut Tally,
    ) {
        let own = refused.status == 429
            && refused.rule.as_deref().is_some_and(|name| {
                client_rules.iter().any(|r| {
                    r.name.as_str() == name
                        && r.unit == Unit::Bytes
                        && r.key != crate::core::rule::KeyKind::Global
                })
            });
        if own {
            self.count_refusal(asked, tally);
        }
    }

    /// Charges a file of `size` bytes to the rules of bytes among `checks` (`Counters::charge`),
    /// once the service answered. Nothing when no rule counts bytes, when the store did not
    /// count the request (it failed, and the policy let it through), or when the answer gave no
    /// size; a store failing now costs the charge only, said in the log.
    pub(super) fn charge_size(
        &self,
        checks: &[Check<'_>],
        admitted: Option<&Admitted>,
        size: Option<u64>,
    ) {
        let (Some(admitted), Some(size)) = (admitted, size) else {
            return;
        };
        let rules: Vec<&Rule> = checks.iter().map(|c| c.rule).collect();
        if !limiter::charges_any(&rules) {
            return;
        }
        if let Err(e) = self.store.counters.charge(checks, admitted.at_ms, size) {
            self.log.line(
                Level::Warn,
                &format!("counting a file's {size} bytes against the rules of bytes failed: {e}"),
            );
        }
    }
}

/// What a client refused by `rule` reads: a rule of bytes says its allowance in words
/// (`20 GB`), never in the kibibytes it counts.
pub fn limited_sentence(rule: &Rule, retry_after: u32) -> String {
    match rule.unit {
        Unit::Bytes => render::limited_bytes_sentence(retry_after, &limit_in_words(rule)),
        Unit::Requests => render::limited_sentence(retry_after),
    }
}

/// A rule of bytes' limit in words, rounded up: counted in whole kibibytes, a limit of 20 GB
/// is 19999997952 bytes, and reads as the 20 GB the owner wrote.
fn limit_in_words(rule: &Rule) -> String {
    in_words(rule.configured_limit(), true)
}

/// A limit in words: `20 GB` for a rule of bytes, `30 paid calls` for the others.
pub fn spend_words(rule: &Rule) -> String {
    match rule.unit {
        Unit::Bytes => format!("{} of files", limit_in_words(rule)),
        Unit::Requests => format!("{} paid calls", rule.limit),
    }
}

/// What the visitor reads: the file's size and the site's largest, in words.
fn too_large_sentence(size: u64, max: u64) -> String {
    format!(
        "This file is {}; this site serves files up to {}.",
        in_words(size, true),
        in_words(max, false)
    )
}

/// `bytes` in decimal units (kB, MB, GB, TB) with at most one decimal, rounded up (`up`) or
/// down, so that a file just over a limit never reads as the limit itself.
pub fn in_words(bytes: u64, up: bool) -> String {
    crate::http::allowance::bytes_words(bytes, up)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_words_the_file_up_and_the_limit_down() {
        assert_eq!(
            too_large_sentence(12_400_000_000, 10_000_000_000),
            "This file is 12.4 GB; this site serves files up to 10 GB."
        );
        for (bytes, up, words) in [
            (10_000_000_001, true, "10.1 GB"),
            (10_099_999_999, false, "10 GB"),
            (1_500_000, true, "1.5 MB"),
            (2_000_000_000_000, false, "2 TB"),
            (999, true, "999 bytes"),
            (1_000, true, "1 kB"),
            (u64::MAX, true, "18446744.1 TB"),
        ] {
            assert_eq!(in_words(bytes, up), words, "{bytes}");
        }
    }
}

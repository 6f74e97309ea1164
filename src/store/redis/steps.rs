//! A decision in a Redis Cluster, where one script may only touch the keys of one slot: the
//! keys as a cluster store writes them (a client's identity in braces, so that every rule of
//! one client shares its slot), and the request decided in steps, a script per slot: the
//! client's own keys first, then each site-wide key's slot in a fixed order. A step that
//! refuses ends it; what the earlier steps took is given back, and the steps not yet run are
//! only read (peeked), so that the refusal tells every rule and the longest wait, as one
//! script on a single Redis does.

use std::borrow::Cow;

use crate::core::decision::{Decision, RuleStatus};
use crate::core::rule::{Algorithm, Unit};
use crate::core::slot;
use crate::store::redis::{RedisStore, decision_from};
use crate::store::{Check, StoreError};

/// The key of `check` in a cluster: the identity its rule's template put in it, in braces
/// (`resolve:ip:{203.0.113.7}`), so that every rule of one client hashes to one slot; a key
/// without one (a site-wide rule's, a count of resolve's own) as it is.
pub fn cluster_key<'c>(check: &'c Check<'_>) -> Cow<'c, str> {
    let rule = check.rule.name.as_str();
    let template = &check.rule.key_template;
    match template.identity_in(rule, &check.key) {
        Some(identity) if !identity.is_empty() => Cow::Owned(slot::tagged(
            &check.key,
            template.prefix(rule).len(),
            identity,
        )),
        _ => Cow::Borrowed(&check.key),
    }
}

/// The steps a cluster decides `keys` in, each the indices of the keys of one slot: first the
/// client's own (the first `own`), slot after slot in the order they come, then the site's,
/// each slot in turn in a fixed order (by slot), so that every request takes the site's keys
/// in the same order.
pub fn cluster_steps(keys: &[Cow<'_, str>], own: usize) -> Vec<Vec<usize>> {
    let group = |range: std::ops::Range<usize>, sorted: bool| {
        let mut steps: Vec<(u16, Vec<usize>)> = Vec::new();
        for i in range {
            let s = slot::slot_of(keys[i].as_bytes());
            match steps.iter_mut().find(|(t, _)| *t == s) {
                Some((_, list)) => list.push(i),
                None => steps.push((s, vec![i])),
            }
        }
        if sorted {
            steps.sort_by_key(|(s, _)| *s);
        }
        steps.into_iter().map(|(_, list)| list)
    };
    let own = own.min(keys.len());
    group(0..own, false)
        .chain(group(own..keys.len(), true))
        .collect()
}

/// The status a key admitted by an earlier step had before it counted the request (`amount`
/// of it): what one script that refused would have told.
fn before_counting(status: RuleStatus, limit: u32, amount: u32) -> RuleStatus {
    let remaining = status.remaining.saturating_add(amount).min(limit);
    RuleStatus {
        remaining,
        // A window the request opened was not there before it.
        reset_ms: if remaining == limit {
            0
        } else {
            status.reset_ms
        },
        shared: status.shared,
    }
}

/// What a peek read: each key's status, and the refusing key with its wait, if one refuses.
type Peeked = (Vec<RuleStatus>, Option<(usize, u64)>);

impl RedisStore {
    /// `checks` with their keys as the store writes them (in a cluster, tagged).
    pub(super) fn written<'a, 'r>(&self, checks: &'a [Check<'r>]) -> Cow<'a, [Check<'r>]> {
        if !self.settings.is_cluster() {
            return Cow::Borrowed(checks);
        }
        Cow::Owned(
            checks
                .iter()
                .map(|c| Check {
                    rule: c.rule,
                    key: cluster_key(c).into_owned(),
                })
                .collect(),
        )
    }

    /// A decision in a cluster: the keys of each slot decided by one script, a step, in the
    /// order of [`cluster_steps`], every step at the first one's time (one time in every key,
    /// what a refund names). A step that refuses ends the decision: what the steps before it
    /// took is given back, so a request refused anywhere is counted nowhere, and the steps
    /// left of its kind (the client's own, or the site's) are peeked for their statuses and
    /// waits. Meanwhile another request may see the counts given back and be refused by
    /// them: never admitted past a limit, since each key's step is atomic.
    pub(super) fn decide_in_steps(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        let written = self.written(checks);
        let checks: &[Check<'_>] = &written;
        let keys: Vec<Cow<'_, str>> = checks
            .iter()
            .map(|c| Cow::Borrowed(c.key.as_str()))
            .collect();
        let steps = cluster_steps(&keys, own);
        if steps.len() == 1 {
            return self.run_decide(checks, own, size, None);
        }
        let part = |step: &[usize]| -> Vec<Check<'_>> {
            step.iter().map(|&i| checks[i].clone()).collect()
        };
        let mut statuses: Vec<Option<RuleStatus>> = vec![None; checks.len()];
        let mut taken: Vec<usize> = Vec::new();
        let mut at: Option<u64> = None;
        for (k, step) in steps.iter().enumerate() {
            match self.run_decide(&part(step), step.len(), size, at)? {
                Decision::Admit {
                    statuses: got,
                    at_ms,
                } => {
                    at.get_or_insert(at_ms);
                    for (&i, status) in step.iter().zip(got) {
                        statuses[i] = Some(status);
                    }
                    taken.extend(step);
                }
                Decision::Refuse {
                    rule,
                    wait_ms,
                    statuses: got,
                } => {
                    if let Some(at) = at {
                        let back: Vec<Check<'_>> =
                            taken.iter().map(|&i| checks[i].clone()).collect();
                        // If this fails, the keys count one request too many until their
                        // windows end: refused more, never admitted more.
                        let _ = self.give_back(&back, at, size);
                        for &i in &taken {
                            let c = &checks[i];
                            statuses[i] = statuses[i].map(|s| {
                                before_counting(s, c.rule.limit.get(), c.rule.unit.amount(size))
                            });
                        }
                    }
                    for (&i, status) in step.iter().zip(got) {
                        statuses[i] = Some(status);
                    }
                    let own_step = step[0] < own;
                    let mut best = (wait_ms, step[rule]);
                    for later in &steps[k + 1..] {
                        if own_step && later[0] >= own {
                            break;
                        }
                        let (got, refusal) = self.peek(&part(later), size)?;
                        for (&i, status) in later.iter().zip(got) {
                            statuses[i] = Some(status);
                        }
                        if let Some((r, w)) = refusal
                            && (w > best.0 || (w == best.0 && later[r] < best.1))
                        {
                            best = (w, later[r]);
                        }
                    }
                    let read = if own_step { own } else { checks.len() };
                    let statuses = statuses[..read.min(checks.len())]
                        .iter()
                        .zip(checks)
                        .map(|(s, c)| {
                            s.unwrap_or(RuleStatus {
                                remaining: c.rule.limit.get(),
                                reset_ms: 0,
                                shared: false,
                            })
                        })
                        .collect();
                    return Ok(Decision::Refuse {
                        rule: best.1,
                        wait_ms: best.0,
                        statuses,
                    });
                }
            }
        }
        Ok(Decision::Admit {
            statuses: statuses
                .into_iter()
                .map(|s| {
                    s.unwrap_or(RuleStatus {
                        remaining: 0,
                        reset_ms: 0,
                        shared: false,
                    })
                })
                .collect(),
            at_ms: at.unwrap_or(0),
        })
    }

    /// The statuses of `checks` (keys of one slot) and, when one refuses, which and its
    /// wait, counting nothing.
    fn peek(&self, checks: &[Check<'_>], size: Option<u64>) -> Result<Peeked, StoreError> {
        let reply = self.decide_reply(checks, checks.len(), size, None, true)?;
        // The peek's own key is read last, with the first check's rule for its status.
        let mut with_peek = checks.to_vec();
        with_peek.push(checks[0].clone());
        let decision = decision_from(&reply, &with_peek, with_peek.len())
            .map_err(|e| StoreError::unavailable(format!("{}: {e}", self.at())))?;
        let Decision::Refuse {
            rule,
            wait_ms,
            mut statuses,
        } = decision
        else {
            return Err(StoreError::unavailable(format!(
                "{}: a peek was admitted",
                self.at()
            )));
        };
        statuses.truncate(checks.len());
        Ok((statuses, (rule < checks.len()).then_some((rule, wait_ms))))
    }

    /// Takes back from `checks` (keys as written) what a decision at `at_ms` counted: a
    /// request, or a known size's kibibytes on a rule of bytes.
    fn give_back(
        &self,
        checks: &[Check<'_>],
        at_ms: u64,
        size: Option<u64>,
    ) -> Result<(), StoreError> {
        let changes = checks
            .iter()
            .filter_map(|c| match (c.rule.unit, c.rule.algorithm) {
                (Unit::Requests, Algorithm::Fixed) => Some((c, "f".to_owned())),
                (Unit::Requests, Algorithm::Sliding) => Some((c, "s".to_owned())),
                (Unit::Bytes, Algorithm::Fixed) => {
                    let amount = c.rule.unit.amount(size);
                    (amount > 0).then(|| (c, format!("+-{amount}")))
                }
                (Unit::Bytes, Algorithm::Sliding) => None,
            });
        self.change(changes.collect(), at_ms)
    }
}

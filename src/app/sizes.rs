//! A file's size against the rules of bytes: the size the service gave in its answer, charged
//! to the request's rules of bytes, to the window that admitted the request.

use crate::app::{Admitted, App};
use crate::core::limiter;
use crate::core::rule::Rule;
use crate::store::Check;
use crate::support::log::Level;

impl App<'_> {
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

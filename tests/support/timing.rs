//! Time bounds in tests that a busy machine does not break. A bound on the program's behaviour
//! (a store's or a provider's time limit kept) is checked on what the program itself spent,
//! its `Server-Timing` (see `Response::program_took`), not on the client's wall clock: under
//! load, starting the program, Apache's queue and the client stretch by seconds. The client's
//! wall clock only has a backstop, wide enough for a busy machine and still far short of what a
//! request that waits for a hung store or provider without a time limit takes (forever: until
//! the test lets the server go).

use std::time::Duration;

/// How long the client waits for an answer whose program time is bounded by `bound`.
pub fn backstop(bound: Duration) -> Duration {
    bound * 3 + Duration::from_secs(10)
}

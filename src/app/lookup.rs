//! The result cache in front of a paid call: a link's cached answer, or this request's claim
//! to resolve it while others asking for the same link wait for its answer.

use std::time::{Duration, Instant};

use crate::app::{App, Claim, Lookup};
use crate::support::defaults;

/// How often a request waiting for another's answer to the same link looks again.
const CLAIM_POLL: Duration = Duration::from_millis(100);

impl App<'_> {
    /// Finds a link's cached answer. When another request is resolving the same link, waits for
    /// its answer (so a link asked twice at once is paid once); when none is, claims the link
    /// for this request.
    pub(super) fn look_up(&self, key: &str) -> Lookup<'_> {
        let deadline = match self.config.provider.as_ref() {
            Some(crate::provider::described::ProviderSpec::Http(h)) => h.deadline,
            _ => Duration::from_millis(defaults::PROVIDER_DEADLINE_MS),
        };
        let give_up = Instant::now() + deadline;
        loop {
            match self.store.cache.cache_get(key) {
                Err(e) => return Lookup::Failed(e),
                Ok(Some(bytes)) if bytes == crate::provider::cache::PENDING => {
                    if Instant::now() >= give_up {
                        return Lookup::Miss(None);
                    }
                    std::thread::sleep(CLAIM_POLL);
                }
                Ok(Some(bytes)) => {
                    return match crate::provider::cache::decode(&bytes) {
                        Some(r) => Lookup::Hit(r),
                        None => Lookup::Miss(None),
                    };
                }
                // A claim outlives the resolution it covers by a little, in case its owner dies.
                Ok(None) => match self.store.cache.cache_claim(
                    key,
                    crate::provider::cache::PENDING,
                    deadline + CLAIM_POLL * 10,
                ) {
                    Ok(true) => {
                        return Lookup::Miss(Some(Claim {
                            store: &*self.store.cache,
                            key: key.to_owned(),
                        }));
                    }
                    Ok(false) => {}
                    Err(e) => return Lookup::Failed(e),
                },
            }
        }
    }
}

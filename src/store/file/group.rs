//! A decision's checks in groups, the client's own first: each group placed, its files locked
//! in name order and read, held until the decision is written (see the locking order in
//! [`super`]).

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::core::clock::Clock;
use crate::core::decision::Decision;
use crate::core::limiter::{Outcome, State, Write};
use crate::store::file::FileStore;
use crate::store::file::lock::Locked;
use crate::store::file::place::Placed;
use crate::store::file::record::Loaded;
use crate::store::{Check, StoreError};

/// One group of a decision's checks (the client's own, or the others), placed, their files
/// locked in name order and read; in the checks' order. Dropping it releases the locks.
pub(super) struct Group {
    pub(super) placed: Vec<Placed>,
    locked: Vec<Locked>,
    loaded: Vec<Loaded>,
}

impl Group {
    pub(super) fn states(&self) -> Vec<State> {
        self.loaded
            .iter()
            .map(|l| State::Fixed(l.counter))
            .collect()
    }
}

/// A placement's path as bytes, to sort and compare placements by: the store's paths differ only in
/// their shard directories and names, hex digits of one length each (or the folded keys'
/// directory, which no shard's name is the start of), so bytes sort them as `Path`'s
/// comparison does, without taking each apart component by component.
fn name(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

impl<C: Clock> FileStore<C> {
    /// Places `checks`, locks their files in name order and reads them; None when a placement
    /// no longer held once its file was locked (the caller starts over). `taken`: the files
    /// of the group already locked, which no check of this one may share.
    pub(super) fn lock_group(
        &self,
        checks: &[Check<'_>],
        taken: &[Placed],
    ) -> Result<Option<Group>, StoreError> {
        let mut placed = checks
            .iter()
            .map(|c| self.place(c))
            .collect::<Result<Vec<_>, _>>()?;
        let mut order: Vec<usize> = (0..placed.len()).collect();
        order.sort_by(|&a, &b| name(&placed[a].path).cmp(name(&placed[b].path)));
        order.dedup_by(|a, b| name(&placed[*a].path) == name(&placed[*b].path));
        let shared = order
            .iter()
            .any(|&i| taken.iter().any(|t| name(&t.path) == name(&placed[i].path)));
        if order.len() != checks.len() || shared {
            return Err(StoreError::unavailable("two rules share one key"));
        }
        let mut locked: Vec<Option<Locked>> = (0..checks.len()).map(|_| None).collect();
        for &i in &order {
            let opened = placed[i].opened.take();
            locked[i] = Some(self.lock_opened(&placed[i].path, opened)?);
        }
        let locked: Vec<Locked> = locked.into_iter().flatten().collect();
        let loaded = locked
            .iter()
            .map(|l| self.load(l))
            .collect::<Result<Vec<_>, _>>()?;
        if !placed.iter().all(|p| self.still_placed(p)) {
            return Ok(None);
        }
        Ok(Some(Group {
            placed,
            locked,
            loaded,
        }))
    }

    /// Writes a decision's counters into the locked files of `groups` (in the checks' order,
    /// as the outcome's writes are) and marks the statuses of folded keys.
    pub(super) fn finish(
        &self,
        mut outcome: Outcome,
        groups: &[Group],
    ) -> Result<Decision, StoreError> {
        let files = groups.iter().flat_map(|g| g.locked.iter().zip(&g.loaded));
        for ((l, before), write) in files.zip(&outcome.writes) {
            match write {
                Write::Counter(counter) => self.store(l, before, counter)?,
                // A file made for this request and left empty (it was refused) goes, still
                // locked: a refused request leaves no file behind.
                _ if before.counter.is_none() => {
                    let _ = fs::remove_file(&l.path);
                }
                _ => {}
            }
        }
        let placed: Vec<&Placed> = groups.iter().flat_map(|g| &g.placed).collect();
        self.mark_shared(&mut outcome.decision, &placed);
        Ok(outcome.decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::FakeClock;
    use std::time::Duration;

    #[test]
    fn paths_sort_as_bytes_as_they_sort_as_paths() {
        let store = FileStore::new("/data", FakeClock::at(0), Duration::ZERO);
        let mut paths: Vec<_> = (0..600)
            .map(|i| store.path_for(&format!("resolve:ip:192.0.2.{i}")))
            .chain((0..50).map(|i| store.fold_path(&format!("resolve:ip:{i}"))))
            .collect();
        paths.sort();
        assert!(paths.windows(2).all(|w| name(&w[0]) < name(&w[1])));
        assert!(
            paths
                .iter()
                .any(|p| p.starts_with(Path::new("/data/folded")))
        );
    }
}

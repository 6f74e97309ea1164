//! The store as a site holds it: one piece for each role, each either the backend itself or
//! what a process puts in front of it (a spooled journal, a FastCGI process's memory), so that
//! a piece in front serves only the role it changes and passes nothing on for the others.

use std::rc::Rc;

use crate::store::cache::Cache;
use crate::store::counters::Counters;
use crate::store::journal::Journal;
use crate::store::notes::Notes;
use crate::store::upkeep::Upkeep;

/// A store that serves every role: what the file, MySQL, Redis and memory stores are.
pub trait Backend: Counters + Cache + Journal + Notes + Upkeep {}

impl<T: Counters + Cache + Journal + Notes + Upkeep + ?Sized> Backend for T {}

/// The store as a site uses it: each role served by the piece in front of the backend for it
/// (a spooled or held journal, remembered refusals) or by the backend itself.
#[derive(Clone)]
pub struct Store {
    pub counters: Rc<dyn Counters>,
    pub cache: Rc<dyn Cache>,
    pub journal: Rc<dyn Journal>,
    pub notes: Rc<dyn Notes>,
    pub upkeep: Rc<dyn Upkeep>,
}

impl Store {
    /// Every role served by `backend` itself.
    pub fn whole(backend: impl Backend + 'static) -> Store {
        Store::shared(Rc::new(backend))
    }

    /// Every role served by one backend already shared.
    pub fn shared(backend: Rc<dyn Backend>) -> Store {
        Store {
            counters: backend.clone(),
            cache: backend.clone(),
            journal: backend.clone(),
            notes: backend.clone(),
            upkeep: backend,
        }
    }

    /// The same store with its journal served by `journal` (which writes to the old one).
    pub fn with_journal(self, journal: impl FnOnce(Rc<dyn Journal>) -> Rc<dyn Journal>) -> Store {
        Store {
            journal: journal(self.journal),
            ..self
        }
    }

    /// The same store with its counters served by `counters` (which asks the old ones).
    pub fn with_counters(
        self,
        counters: impl FnOnce(Rc<dyn Counters>) -> Rc<dyn Counters>,
    ) -> Store {
        Store {
            counters: counters(self.counters),
            ..self
        }
    }
}

//! What answers the links of one request on threads of their own: a worker per thread, made
//! on that thread (a site opened again, with its own store connection, as `site` makes it),
//! and the turns that count the links in the order they were pasted.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::http::request::Env;
use crate::http::response::Response;

/// Answers one link's request, as the one-link way answers it; `turn`: its place in the order
/// its list is counted in (None for a link alone).
pub trait Worker {
    fn answer(&self, env: &Env, turn: Option<Turn<'_>>) -> Response;
}

/// Makes a worker on the thread that uses it, and says how long the links may take.
pub trait Workers: Sync {
    fn worker(&self) -> Box<dyn Worker + '_>;

    /// The time the web server gives the whole request: no link starts that could not end
    /// before it.
    fn budget(&self) -> std::time::Duration;
}

/// The order in which the links of one request are counted: the paste's. Links run a few at
/// a time, and without turns whichever thread reached the store first took the visitor's
/// last requests, so that with five left the sixth link could be served and the fifth
/// refused. Each link is counted (looked up, decided) only once every link before it has
/// been counted or has left the way; its call to the provider still runs beside the others'.
#[derive(Debug)]
pub struct Turns {
    /// Which links are counted or gone, and the first that is not.
    state: Mutex<(Vec<bool>, usize)>,
    moved: Condvar,
}

impl Turns {
    /// Turns for `links` links, none taken.
    pub fn new(links: usize) -> Turns {
        Turns {
            state: Mutex::new((vec![false; links], 0)),
            moved: Condvar::new(),
        }
    }

    /// Link `at`'s turn.
    pub fn of(&self, at: usize) -> Turn<'_> {
        Turn { turns: self, at }
    }

    /// Link `at` is counted, or will never be (it left the way before, or was not started):
    /// the links after it may go. Saying it again changes nothing.
    pub fn done(&self, at: usize) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let (done, next) = &mut *state;
        if let Some(d) = done.get_mut(at) {
            *d = true;
        }
        while done.get(*next).copied().unwrap_or(false) {
            *next += 1;
        }
        self.moved.notify_all();
    }

    /// Waits until every link before `at` is counted or gone, for at most `limit`: a link
    /// that never says so (it cannot, short of a bug) delays the others, it does not stop
    /// them.
    fn wait(&self, at: usize, limit: Duration) {
        let until = Instant::now() + limit;
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        while state.1 < at {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            match self.moved.wait_timeout(state, left) {
                Ok((s, _)) => state = s,
                Err(_) => return,
            }
        }
    }
}

/// One link's place in its request's order ([`Turns`]).
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    turns: &'a Turns,
    at: usize,
}

impl Turn<'_> {
    /// Waits for this link's turn to be counted (at most `limit`).
    pub fn wait(&self, limit: Duration) {
        self.turns.wait(self.at, limit);
    }

    /// This link is counted: the next may go.
    pub fn done(&self) {
        self.turns.done(self.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_counted_in_their_order_whatever_order_they_arrive_in() {
        let turns = Turns::new(4);
        let order = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            // The last link first, then the others backwards: each waits for those before it.
            for at in (0..4).rev() {
                let (turns, order) = (&turns, &order);
                scope.spawn(move || {
                    let turn = turns.of(at);
                    turn.wait(Duration::from_secs(10));
                    order.lock().unwrap().push(at);
                    turn.done();
                });
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
    }

    #[test]
    fn a_link_gone_before_its_turn_lets_the_next_go_once_those_before_it_have() {
        let turns = Turns::new(3);
        // Link 1 left the way early; link 2 still waits for link 0.
        turns.done(1);
        let started = Instant::now();
        turns.of(2).wait(Duration::from_millis(200));
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "waited for link 0"
        );
        turns.done(0);
        let started = Instant::now();
        turns.of(2).wait(Duration::from_secs(10));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "links 0 and 1 are done"
        );
        // Said twice, or of a link past the end: nothing changes.
        turns.done(0);
        turns.done(7);
        assert_eq!(turns.state.lock().unwrap().1, 2);
    }
}

//! Several links in one request: each asked as a request of its own (one link through the
//! whole way: the same rules, cache, jobs and journal entry as a link sent alone), so a
//! visitor with five requests left gets five links and the wait for the rest. Up to
//! `LINKS_AT_ONCE` run at a time: this thread with the site it has, and threads that each
//! open the site again (a store's connection is not shared between threads). No link starts
//! that could not end within the time of one request; the answers are gathered into one list
//! with each link's state and what is left of the visitor's allowance.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::app::App;
use crate::app::workers::{Turn, Turns, Worker, Workers};
use crate::core::rule::Rule;
use crate::http::allowance::{self, Left};
use crate::http::link_list::{self, Allowance, Entry};
use crate::http::negotiate::Format;
use crate::http::render::Frame;
use crate::http::request::Env;
use crate::http::response::Response;
use crate::net::form;
use crate::provider::described::ProviderSpec;
use crate::support::defaults;

impl Worker for App<'_> {
    fn answer(&self, env: &Env, turn: Option<Turn<'_>>) -> Response {
        App { turn, ..*self }
            .handle(env, &mut std::io::empty())
            .response
    }
}

/// The request of one link of the list: the same request (address, headers, key, origin) as
/// a GET (HEAD for HEAD) of that link alone, its answer asked in JSON.
fn one_link(env: &Env, link: &[u8], head: bool) -> Env {
    env.clone()
        .with("REQUEST_METHOD", if head { "HEAD" } else { "GET" })
        .with("QUERY_STRING", format!("link={}", form::encode(link)))
        .with("HTTP_ACCEPT", "application/json")
}

impl App<'_> {
    /// The list's answer: every link asked, each answer read into its entry; and whether any
    /// was admitted (served or under way).
    pub(super) fn several(
        &self,
        env: &Env,
        links: &[Vec<u8>],
        (format, frame, head): (Format, &Frame<'_>, bool),
        workers: Option<&dyn Workers>,
    ) -> (Response, bool) {
        let envs: Vec<Env> = links.iter().map(|l| one_link(env, l, head)).collect();
        let answers = self.ask_each(&envs, workers);
        let mut lefts = Vec::new();
        let entries: Vec<Entry> = links
            .iter()
            .zip(answers)
            .map(|(link, answer)| {
                let link = String::from_utf8_lossy(link).into_owned();
                match answer {
                    Some(answer) => {
                        if let (Some(p), Some(s)) = (
                            answer.header_value("RateLimit-Policy"),
                            answer.header_value("RateLimit"),
                        ) {
                            lefts.extend(allowance::read(p, s));
                        }
                        Entry::from_answer(link, &answer)
                    }
                    None => Entry::not_tried(link),
                }
            })
            .collect();
        let admitted = entries.iter().any(|e| matches!(e.status, Some(200 | 202)));
        let lefts = allowance::merge(lefts);
        let told: Vec<Allowance> = lefts
            .iter()
            .filter_map(|left| {
                let unit = self.rule_named(&left.rule)?.unit;
                Some(Allowance {
                    words: allowance::words(left, unit),
                    unit: unit.as_str(),
                    left: left.clone(),
                })
            })
            .collect();
        let mut response = link_list::render(format, &entries, &told, frame);
        if !lefts.is_empty() {
            response.headers.extend(limit_headers(&lefts));
        }
        (response, admitted)
    }

    /// A client's rule by its name: the configuration's, or an API key's own.
    fn rule_named(&self, name: &str) -> Option<&Rule> {
        let keys = self.config.api_keys.keys.iter();
        self.config
            .rules
            .iter()
            .chain(keys.flat_map(|k| k.rules.iter().flatten()))
            .find(|r| r.name.as_str() == name)
    }

    /// Each request answered, in order; None for a link not started in time. This thread
    /// answers with this site; up to `LINKS_AT_ONCE - 1` more threads each with a worker of
    /// their own. A thread that cannot be started leaves its share to the others.
    fn ask_each(&self, envs: &[Env], workers: Option<&dyn Workers>) -> Vec<Option<Response>> {
        let started = Instant::now();
        let at_once = if workers.is_some() {
            defaults::LINKS_AT_ONCE.min(envs.len())
        } else {
            1
        };
        let deadline = self.longest_call();
        let budget = workers.map_or(
            Duration::from_millis(defaults::LINKS_TIME_BUDGET_MS),
            Workers::budget,
        );
        // The first round always starts; a later link only when its call could end in time.
        let may_start = |i: usize| i < at_once || started.elapsed() + deadline <= budget;
        answer_in_turns(envs, (self, workers), at_once, &may_start)
    }

    /// The longest a link waits for its turn to be counted ([`Turns`]).
    pub(super) fn turn_limit(&self) -> Duration {
        Duration::from_millis(defaults::LINK_TURN_WAIT_MS)
    }

    /// The longest one link's paid call may take: the slowest service's deadline (none for the
    /// echo provider).
    fn longest_call(&self) -> Duration {
        let deadline = |spec: &ProviderSpec| match spec {
            ProviderSpec::Http(h) => h.deadline,
            ProviderSpec::Echo => Duration::ZERO,
        };
        self.config
            .services
            .iter()
            .map(|s| deadline(&s.spec))
            .chain(self.config.provider.as_ref().map(deadline))
            .max()
            .unwrap_or(Duration::ZERO)
    }
}

/// Each request answered, in order; None for a link not started (`may_start` says no). This
/// thread answers with `here`; `at_once - 1` more threads each with a worker of `workers`'.
/// A thread that cannot be started leaves its share to the others. With more than one at
/// once, the links are counted in their order ([`Turns`]).
fn answer_in_turns(
    envs: &[Env],
    (here, workers): (&dyn Worker, Option<&dyn Workers>),
    at_once: usize,
    may_start: &(dyn Fn(usize) -> bool + Sync),
) -> Vec<Option<Response>> {
    let next = AtomicUsize::new(0);
    let answers: Vec<Mutex<Option<Response>>> = envs.iter().map(|_| Mutex::new(None)).collect();
    // Counted in the paste's order, each link in its turn, whichever thread runs it.
    let turns = Turns::new(envs.len());
    let serve = |worker: &dyn Worker| {
        loop {
            let i = next.fetch_add(1, Ordering::SeqCst);
            if i >= envs.len() || !may_start(i) {
                // Not started: none after it will be, and none waits for it.
                (i..envs.len()).for_each(|j| turns.done(j));
                break;
            }
            let answer = worker.answer(&envs[i], (at_once > 1).then(|| turns.of(i)));
            // Counted in its turn, or gone before it: the next may go.
            turns.done(i);
            if let Ok(mut slot) = answers[i].lock() {
                *slot = Some(answer);
            }
        }
    };
    std::thread::scope(|scope| {
        if let Some(workers) = workers {
            for _ in 1..at_once {
                let spawned = std::thread::Builder::new()
                    .name("link".into())
                    .spawn_scoped(scope, || serve(&*workers.worker()));
                if spawned.is_err() {
                    break;
                }
            }
        }
        serve(here);
    });
    answers
        .into_iter()
        .map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// `RateLimit-Policy` and `RateLimit` for the list: each rule as the last link left it.
fn limit_headers(lefts: &[Left]) -> [(&'static str, String); 2] {
    let policy = lefts
        .iter()
        .map(|l| {
            let unit = if l.bytes {
                format!(";qu={}", allowance::BYTES_UNIT)
            } else {
                String::new()
            };
            format!("\"{}\";q={};w={}{unit}", l.rule, l.limit, l.window_secs)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let state = lefts
        .iter()
        .map(|l| format!("\"{}\";r={};t={}", l.rule, l.remaining, l.reset_secs))
        .collect::<Vec<_>>()
        .join(", ");
    [("RateLimit-Policy", policy), ("RateLimit", state)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link's worker that reaches the store later the earlier its link is in the paste, and
    /// writes down the order in which the links were counted there.
    struct Backwards<'a> {
        counted: &'a Mutex<Vec<usize>>,
    }

    impl Worker for Backwards<'_> {
        fn answer(&self, env: &Env, turn: Option<Turn<'_>>) -> Response {
            let at: usize = env.text("QUERY_STRING").unwrap().parse().unwrap();
            std::thread::sleep(Duration::from_millis(60 - 10 * at as u64));
            if let Some(turn) = &turn {
                turn.wait(Duration::from_secs(10));
            }
            self.counted.lock().unwrap().push(at);
            if let Some(turn) = &turn {
                turn.done();
            }
            Response::new(200, "text/plain", at.to_string())
        }
    }

    struct Each<'a> {
        counted: &'a Mutex<Vec<usize>>,
    }

    impl Workers for Each<'_> {
        fn worker(&self) -> Box<dyn Worker + '_> {
            Box::new(Backwards {
                counted: self.counted,
            })
        }

        fn budget(&self) -> Duration {
            Duration::from_secs(55)
        }
    }

    #[test]
    fn several_links_are_counted_in_the_order_they_were_pasted() {
        let envs: Vec<Env> = (0..6)
            .map(|i| Env::method("GET").with("QUERY_STRING", i.to_string()))
            .collect();
        let counted = Mutex::new(Vec::new());
        let here = Backwards { counted: &counted };
        let each = Each { counted: &counted };
        let answers = answer_in_turns(&envs, (&here, Some(&each)), 4, &|_| true);
        assert_eq!(*counted.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
        let bodies: Vec<String> = answers
            .iter()
            .map(|a| String::from_utf8(a.as_ref().unwrap().body.clone()).unwrap())
            .collect();
        assert_eq!(bodies, ["0", "1", "2", "3", "4", "5"]);
        // A link not started lets none wait for it.
        let counted = Mutex::new(Vec::new());
        let here = Backwards { counted: &counted };
        let each = Each { counted: &counted };
        let answers = answer_in_turns(&envs, (&here, Some(&each)), 4, &|i| i < 4);
        assert_eq!(*counted.lock().unwrap(), [0, 1, 2, 3]);
        assert!(answers[4..].iter().all(Option::is_none));
    }
}

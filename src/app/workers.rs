//! What answers the links of one request on threads of their own: a worker per thread, made
//! on that thread (a site opened again, with its own store connection, as `site` makes it).

use crate::http::request::Env;
use crate::http::response::Response;

/// Answers one link's request, as the one-link way answers it.
pub trait Worker {
    fn answer(&self, env: &Env) -> Response;
}

/// Makes a worker on the thread that uses it, and says how long the links may take.
pub trait Workers: Sync {
    fn worker(&self) -> Box<dyn Worker + '_>;

    /// The time the web server gives the whole request: no link starts that could not end
    /// before it.
    fn budget(&self) -> std::time::Duration;
}

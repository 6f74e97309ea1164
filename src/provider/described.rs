//! Which provider the site uses, and its description in a form a refused request never
//! builds: what deciding needs (the preset, the token, which steps each published rate counts,
//! the time limit) is known at once; the rest (steps, error tables, advice, host list) is built
//! from the owner's section at its first use, which under CGI is the first paid call, if any.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::provider::spec::HttpSpec;
use crate::support::secret::Secret;

/// Which provider the site uses.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ProviderSpec {
    Echo,
    Http(#[serde(serialize_with = "whole")] Arc<LazySpec>),
}

/// The description as it is built (the summary alone would leave most of it out).
fn whole<S: serde::Serializer>(spec: &Arc<LazySpec>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&**spec, s)
}

/// Builds the whole description from the owner's `provider` section. It cannot fail on a
/// section that was checked as it was read (see [`LazySpec::deferred`]); should it fail, the
/// text says why.
pub type Build = fn(Value) -> Result<HttpSpec, String>;

/// What a decision needs of the description, without building it.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The preset it came from, if any.
    pub preset: Option<String>,
    pub token: Option<Secret>,
    /// For each of the provider's `rate_limits`, in order, the steps (from 0) whose calls it
    /// counts; None: every call.
    pub rate_steps: Vec<Option<Vec<usize>>>,
    /// Time for all the calls of one resolution, polling included.
    pub deadline: Duration,
}

/// The description, whole or still to build. It reads as an [`HttpSpec`] (`Deref`); the
/// fields of [`Summary`] are its own, so that reading them builds nothing.
pub struct LazySpec {
    pub preset: Option<String>,
    pub token: Option<Secret>,
    pub rate_steps: Vec<Option<Vec<usize>>>,
    pub deadline: Duration,
    built: OnceLock<Result<HttpSpec, String>>,
    /// The owner's section and how to build from it, until built.
    source: Option<(Value, Build)>,
}

impl LazySpec {
    /// A description already built.
    pub fn built(spec: HttpSpec) -> Arc<LazySpec> {
        let built = OnceLock::new();
        let summary = Summary {
            preset: spec.preset.clone(),
            token: spec.token.clone(),
            rate_steps: spec.rate_steps.clone(),
            deadline: spec.deadline,
        };
        let _ = built.set(Ok(spec));
        Arc::new(LazySpec::with(summary, built, None))
    }

    /// A description to build from `section` at its first use. The caller has checked the
    /// section as far as the owner wrote it (the rest is a preset's, checked by the tests), so
    /// that building it succeeds.
    pub fn deferred(summary: Summary, section: Value, build: Build) -> Arc<LazySpec> {
        Arc::new(LazySpec::with(
            summary,
            OnceLock::new(),
            Some((section, build)),
        ))
    }

    fn with(
        summary: Summary,
        built: OnceLock<Result<HttpSpec, String>>,
        source: Option<(Value, Build)>,
    ) -> LazySpec {
        LazySpec {
            preset: summary.preset,
            token: summary.token,
            rate_steps: summary.rate_steps,
            deadline: summary.deadline,
            built,
            source,
        }
    }

    /// The whole description, built now if it was not yet; the error says why it could not be.
    pub fn spec(&self) -> Result<&HttpSpec, &str> {
        self.built
            .get_or_init(|| match &self.source {
                Some((section, build)) => build(section.clone()),
                None => Err("the provider's description was never given".to_owned()),
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Whether the whole description has been built (a refused request leaves it unbuilt).
    pub fn is_built(&self) -> bool {
        self.built.get().is_some()
    }

    /// Whether rate `rate` (an index into the provider's `rate_limits`) counts the calls of
    /// step `step` (from 0).
    pub fn rate_counts(&self, rate: usize, step: usize) -> bool {
        self.rate_steps
            .get(rate)
            .is_none_or(|s| s.as_ref().is_none_or(|steps| steps.contains(&step)))
    }
}

/// What a section that could not be built reads as (a safety net: a call checks the build
/// first and fails with its reason).
static UNBUILT: OnceLock<HttpSpec> = OnceLock::new();

/// A description with no steps, tables or lists: what one that could not be built reads
/// as (see [`LazySpec`]); a call with it fails before anything is sent.
fn empty(deadline: Duration) -> HttpSpec {
    HttpSpec {
        preset: None,
        base_url: None,
        token: None,
        steps: Vec::new(),
        errors: Vec::new(),
        error_messages: Vec::new(),
        statuses: Vec::new(),
        generic_codes: Vec::new(),
        advice: Vec::new(),
        rate_steps: Vec::new(),
        hosts: None,
        link_check: None,
        account: None,
        connect_timeout: deadline,
        timeout: deadline,
        deadline,
    }
}

impl std::ops::Deref for LazySpec {
    type Target = HttpSpec;

    fn deref(&self) -> &HttpSpec {
        match self.spec() {
            Ok(spec) => spec,
            // Checked as it was read, a section always builds (a unit test builds every
            // preset so); were it not, the description reads as one with no steps.
            Err(_) => UNBUILT.get_or_init(|| empty(self.deadline)),
        }
    }
}

impl Clone for LazySpec {
    fn clone(&self) -> LazySpec {
        LazySpec {
            preset: self.preset.clone(),
            token: self.token.clone(),
            rate_steps: self.rate_steps.clone(),
            deadline: self.deadline,
            built: self.built.clone(),
            source: self.source.clone(),
        }
    }
}

impl std::fmt::Debug for LazySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.built.get() {
            Some(Ok(spec)) => spec.fmt(f),
            _ => f
                .debug_struct("LazySpec")
                .field("preset", &self.preset)
                .field("rate_steps", &self.rate_steps)
                .field("deadline", &self.deadline)
                .finish_non_exhaustive(),
        }
    }
}

/// Two descriptions are equal when what they build is.
impl PartialEq for LazySpec {
    fn eq(&self, other: &LazySpec) -> bool {
        self.spec() == other.spec()
    }
}

impl serde::Serialize for LazySpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

//! What a failed provider call becomes: the visitor's answer (status, code, one sentence, the
//! provider's own words where they help) and the owner's log line, `ACTION NEEDED` when the
//! owner must act.

use crate::http::problem::{Kind, Problem};
use crate::provider::{Failure, ProviderError};
use crate::support::defaults;

pub(super) const UNAVAILABLE: &str =
    "The download service is not available right now. Please try again later.";
/// The visitor's sentence for a host the provider does not support.
pub(super) const UNSUPPORTED_HOST: &str = "This file host is not supported.";
/// The visitor's sentence for a file the provider cannot get.
pub(super) const DEAD_LINK: &str = "This file is no longer available: the link is dead.";

pub(super) fn provider_problem(e: &ProviderError, link: &str) -> Problem {
    let log = format!("provider call for {link:?} failed: {e}");
    let refused = |kind: Kind, detail: &str| Problem::new(422, kind, detail).log(log.clone());
    // Busy for now: again after the provider's own wait when it gave one, else `default_secs`.
    let busy = |kind: Kind, detail: &str, default_secs| {
        Problem::new(503, kind, detail)
            .retry_after(e.retry_after.unwrap_or(default_secs))
            .log(log.clone())
    };
    // The owner's account or server is the problem: a neutral sentence for the visitor, and an
    // `ACTION NEEDED` line with the cause and what to do: the provider's own fix where its
    // description has one, else the program's.
    let owner_must_act = |status: u16, cause: &str, what_to_do: Option<&str>| {
        let fix = e
            .advice
            .as_deref()
            .or(what_to_do)
            .map(|a| format!("; {a}"))
            .unwrap_or_default();
        Problem::new(status, Kind::ProviderUnavailable, UNAVAILABLE)
            .action_needed(format_args!("{cause}{fix}: {log}"))
    };
    match e.failure {
        Failure::Rejected => {
            let detail = match &e.message {
                Some(m) if m.ends_with(['.', '!', '?']) => {
                    format!("The provider could not resolve this link: {m}")
                }
                Some(m) => format!("The provider could not resolve this link: {m}."),
                None => "The provider could not resolve this link (it may be dead, or its host unsupported).".to_owned(),
            };
            Problem::new(422, Kind::LinkRefused, detail).log(log)
        }
        Failure::Unsupported => refused(Kind::UnsupportedHost, UNSUPPORTED_HOST),
        Failure::DeadLink => refused(Kind::DeadLink, DEAD_LINK),
        Failure::Password => refused(
            Kind::PasswordRequired,
            "This file is protected by a password.",
        ),
        Failure::Temporary => busy(
            Kind::HostUnavailable,
            "The file host is unavailable for now. Please try again later.",
            defaults::PROVIDER_TEMPORARY_RETRY_AFTER_SECS,
        ),
        Failure::RateLimited => busy(
            Kind::ProviderBusy,
            "The download service is busy. Please try again shortly.",
            defaults::PROVIDER_BUSY_RETRY_AFTER_SECS,
        ),
        // A job that could not be kept (no store to keep it in) ends as a timeout did.
        Failure::Timeout | Failure::InProgress => Problem::new(
            504,
            Kind::ProviderTimeout,
            "The download service took too long to answer. Please try again.",
        )
        .log(log),
        Failure::Auth => owner_must_act(
            502,
            "the provider refused the site's credentials; check provider.token and the account",
            None,
        ),
        Failure::ServerRefused => owner_must_act(
            502,
            "the provider refuses calls from this server's address (a server, datacenter or VPN \
             address): the token is not at fault, nor the visitor's link",
            Some(
                "ask the provider how to allow calls from a server (some have a setting for it), or \
             choose a provider that allows them",
            ),
        ),
        Failure::Plan => owner_must_act(
            502,
            "the provider account's plan does not cover this (not premium, not for this file \
             host, or a top-up is needed): the visitor's link is not at fault",
            Some("renew or upgrade the plan on the provider's site"),
        ),
        Failure::Quota => owner_must_act(
            503,
            "the provider account has no quota left (traffic, links or fair use)",
            Some(
                "see the account's limits on the provider's site: wait for them to renew or top \
             up, and lower the spend limits to stay within them",
            ),
        )
        .retry_after(defaults::PROVIDER_QUOTA_RETRY_AFTER_SECS),
        // Nothing in the visitor's link or the account: the program calls what the service no
        // longer answers, and no visitor is served until the owner upgrades it.
        Failure::Retired => owner_must_act(
            502,
            "the service retired an endpoint this version of resolve uses: the visitor's link \
             and the account are not at fault",
            Some("upgrade resolve to a version that calls the service's current endpoints"),
        ),
        // Nothing was sent, so nothing was charged; but no visitor is served until it is.
        Failure::Unreachable => owner_must_act(
            502,
            "the provider could not be reached from this server (its name did not resolve or \
             no connection was made), so nothing was sent or charged",
            Some(
                "if it lasts more than a few minutes, look at the provider's status page; if the \
             provider is up, ask the host whether this account may make outgoing HTTPS \
             connections (some hosts block them until asked) and whether its DNS works, and \
             check provider.base_url if you set it yourself",
            ),
        ),
        Failure::Unavailable | Failure::BadAnswer => {
            Problem::new(502, Kind::ProviderUnavailable, UNAVAILABLE).log(log)
        }
    }
}

//! The provider section's `account`: where the owner's account is read (one GET with the
//! token) and the JSON Pointers of the facts its answer gives, checked.

use crate::config::error::{ConfigError, err};
use crate::config::provider::raw::RawAccount;
use crate::provider::account::{AccountCall, FairUse, Share, ValueTest};
use crate::provider::spec::Template;

/// `account`: one GET with the token, and the JSON Pointers of the facts its answer gives.
pub(super) fn account(
    raw: Option<RawAccount>,
    has_base: bool,
) -> Result<Option<AccountCall>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let mut known = vec!["token".to_owned()];
    if has_base {
        known.push("base".into());
    }
    let url = Template(raw.url);
    super::steps::check_names("provider.account.url", &url, &known)?;
    super::urls::check_step_url("provider.account.url", &url.0)?;
    let mut headers = Vec::new();
    for (name, value) in raw.headers.unwrap_or_default() {
        let value = Template(value);
        super::steps::check_names("provider.account.headers", &value, &known)?;
        headers.push((name, value.0));
    }
    let field = |name: &str, p: Option<String>| {
        super::steps::pointer(&format!("provider.account.{name}"), p)
    };
    let fair_use = match raw.fair_use {
        None => None,
        Some(f) => Some(FairUse {
            pointer: field("fair_use.pointer", Some(f.pointer))?.unwrap_or_default(),
            unit: Share::from_name(&f.unit).ok_or_else(|| {
                err(
                    "provider.account.fair_use.unit",
                    "is \"used_fraction\" (0 to 1 spent), \"used_percent\" or \"left_fraction\" (0 to 1 left)",
                )
            })?,
        }),
    };
    let test = |name: &str, t| {
        super::steps::test(&format!("provider.account.{name}"), t).map(|t| {
            t.map(|t| ValueTest {
                pointer: t.pointer,
                equals: t.equals,
            })
        })
    };
    let call = AccountCall {
        url: url.0,
        headers,
        success: test("success", raw.success)?,
        premium: test("premium", raw.premium)?,
        premium_until: field("premium_until", raw.premium_until)?,
        premium_seconds_left: field("premium_seconds_left", raw.premium_seconds_left)?,
        fair_use,
        host_quotas: field("host_quotas", raw.host_quotas)?,
    };
    if call.premium.is_none()
        && call.premium_until.is_none()
        && call.premium_seconds_left.is_none()
        && call.fair_use.is_none()
        && call.host_quotas.is_none()
    {
        return Err(err(
            "provider.account",
            "names no fact to read: give at least one of premium, premium_until, premium_seconds_left, fair_use, host_quotas",
        ));
    }
    Ok(Some(call))
}

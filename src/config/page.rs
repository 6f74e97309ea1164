//! `page`: what the owner shows visitors around the form (the site's name, a contact, a terms
//! link). It lives in the configuration, outside the installed page, so that installing a new
//! version of the page never undoes it. Shown in the footer of the program's own HTML pages and
//! served to the page's script by `?about=1`.

use crate::config::error::{ConfigError, err};
use crate::config::raw::RawPage;
use crate::http::footer::{Contact, Page};

/// Longest site name, in characters: it shares a footer line with the contact and terms link.
pub const SITE_NAME_MAX_CHARS: usize = 80;
/// Longest contact address or terms URL, in bytes.
pub const URL_MAX_BYTES: usize = 512;
/// Longest e-mail address (RFC 5321's limit on a path).
pub const EMAIL_MAX_BYTES: usize = 254;

/// Checks the `page` section.
pub(crate) fn page(raw: Option<RawPage>) -> Result<Page, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Page::default());
    };
    let site_name = match raw.site_name {
        None => None,
        Some(name) => {
            let name = name.trim();
            let chars = name.chars().count();
            if chars == 0 || chars > SITE_NAME_MAX_CHARS || name.chars().any(char::is_control) {
                return Err(err(
                    "page.site_name",
                    format!(
                        "must be 1 to {SITE_NAME_MAX_CHARS} characters on one line, e.g. \"Example Links\""
                    ),
                ));
            }
            Some(name.to_owned())
        }
    };
    let contact = match raw.contact {
        None => None,
        Some(text) => Some(contact(text.trim()).ok_or_else(|| {
            err(
                "page.contact",
                "must be an e-mail address (\"owner@example.com\") or an https address \
                 (\"https://example.com/contact\")",
            )
        })?),
    };
    let terms_url = match raw.terms_url {
        None => None,
        Some(text) => Some(https_url(text.trim()).ok_or_else(|| {
            err(
                "page.terms_url",
                format!(
                    "must be an https address of at most {URL_MAX_BYTES} bytes, e.g. \"https://example.com/terms\""
                ),
            )
        })?),
    };
    Ok(Page {
        site_name,
        contact,
        terms_url,
    })
}

fn contact(text: &str) -> Option<Contact> {
    if text.contains("://") {
        return https_url(text).map(Contact::Url);
    }
    is_email(text).then(|| Contact::Email(text.to_owned()))
}

fn https_url(text: &str) -> Option<String> {
    if text.len() > URL_MAX_BYTES {
        return None;
    }
    let url = crate::net::url::parse(text, &["https"]).ok()?;
    // No user name or password in a link shown to every visitor.
    (!url.has_credentials()).then(|| text.to_owned())
}

/// A plain `local@domain` address: printable ASCII without spaces, quotes or angle brackets
/// (nothing that needs quoting in a `mailto:` link), a domain of dotted labels.
fn is_email(text: &str) -> bool {
    if text.len() > EMAIL_MAX_BYTES {
        return false;
    }
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=^_`{|}~.".contains(&b))
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..");
    let domain_ok = domain.contains('.')
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    local_ok && domain_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(site_name: Option<&str>, contact: Option<&str>, terms_url: Option<&str>) -> RawPage {
        RawPage {
            site_name: site_name.map(str::to_owned),
            contact: contact.map(str::to_owned),
            terms_url: terms_url.map(str::to_owned),
        }
    }

    #[test]
    fn every_part_is_optional() {
        assert_eq!(page(None).unwrap(), Page::default());
        assert!(page(Some(raw(None, None, None))).unwrap().is_empty());
    }

    #[test]
    fn a_full_footer() {
        let p = page(Some(raw(
            Some("  Example Links "),
            Some("owner@example.com"),
            Some("https://example.com/terms"),
        )))
        .unwrap();
        assert_eq!(p.site_name.as_deref(), Some("Example Links"));
        assert_eq!(
            p.contact.as_ref().map(Contact::href).as_deref(),
            Some("mailto:owner@example.com")
        );
        assert_eq!(p.terms_url.as_deref(), Some("https://example.com/terms"));
        let url = page(Some(raw(None, Some("https://example.com/contact"), None))).unwrap();
        assert_eq!(
            url.contact,
            Some(Contact::Url("https://example.com/contact".into()))
        );
    }

    #[test]
    fn mistakes_name_the_field() {
        let long = "x".repeat(81);
        let long_url = format!("https://example.com/{}", "a".repeat(600));
        for (bad, field) in [
            (raw(Some(""), None, None), "page.site_name"),
            (raw(Some(&long), None, None), "page.site_name"),
            (raw(Some("two\nlines"), None, None), "page.site_name"),
            (raw(None, Some("owner"), None), "page.contact"),
            (raw(None, Some("owner@localhost"), None), "page.contact"),
            (raw(None, Some("a b@example.com"), None), "page.contact"),
            (raw(None, Some("<a@example.com>"), None), "page.contact"),
            (
                raw(None, Some("http://example.com/c"), None),
                "page.contact",
            ),
            (raw(None, Some("javascript://x"), None), "page.contact"),
            (
                raw(None, None, Some("http://example.com/terms")),
                "page.terms_url",
            ),
            (raw(None, None, Some("example.com/terms")), "page.terms_url"),
            (
                raw(None, None, Some("https://u:p@example.com/")),
                "page.terms_url",
            ),
            (raw(None, None, Some(&long_url)), "page.terms_url"),
        ] {
            let e = page(Some(bad)).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn read_from_the_file_shown_by_check_and_placed_when_wrong() {
        let base = std::path::Path::new("/home/u/resolve");
        let c = crate::config::Config::from_json(
            r#"{"page": {"site_name": "Example Links", "contact": "https://example.com/c"}}"#,
            base,
        )
        .unwrap();
        assert_eq!(
            c.masked_json()["page"],
            serde_json::json!({"site_name": "Example Links", "contact": "https://example.com/c"})
        );
        assert!(
            crate::config::Config::defaults(base)
                .masked_json()
                .get("page")
                .is_none()
        );
        let e = crate::config::Config::from_json(
            "{\n  \"page\": {\n    \"terms_url\": \"http://example.com/terms\"\n  }\n}",
            base,
        )
        .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.at),
            ("page.terms_url", Some((3, 5))),
            "{e}"
        );
        let typo =
            crate::config::Config::from_json(r#"{"page": {"sitename": "x"}}"#, base).unwrap_err();
        assert!(typo.message.contains("sitename"), "{typo}");
    }
}

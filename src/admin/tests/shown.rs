//! What the signed-in page says about the site itself: the warning of a paid provider open to
//! every other site's pages, and the owner's own address, marked and never offered a block.

use super::*;
use crate::core::journal::{Entry, Event};

/// Signs in from `from` and shows the dashboard, asked for at `host` (over plain http).
fn page_at(site: &Site, from: &str, host: &str) -> String {
    let mut jar = Jar::default();
    assert_eq!(site.sign_in(&mut jar, PASSWORD, from).0.status, 303);
    let env = env("GET", &jar, from).with("HTTP_HOST", host);
    let r = site.dashboard().answer(&env, &mut std::io::empty());
    assert_eq!(r.status, 200);
    String::from_utf8(r.body.clone()).unwrap()
}

const WARNING: &str = "Any other site can spend your paid calls";

#[test]
fn a_paid_provider_open_to_every_site_is_warned_about_with_its_fix() {
    let mut site = site();
    let page = page_at(&site, "203.0.113.9", "links.example.com");
    let warning = &page[page.find(WARNING).expect(WARNING)..];
    let warning = &warning[..warning.find("</div>").unwrap()];
    for said in [
        "<code>allowed_origins</code> is empty",
        "each one is a paid call on your provider account",
        "<code>~/resolve/config.json</code>",
        // The fix, with this site's own address as the browser asked for it.
        "<code>&quot;allowed_origins&quot;: [&quot;http://links.example.com&quot;]</code>",
    ] {
        assert!(warning.contains(said), "{said} in {warning}");
    }
    // Before the figures.
    assert!(
        page.find(WARNING) < page.find("<h2 id=\"money\">"),
        "{page}"
    );
    // With a port; with a host that is not one, an example.
    assert!(
        page_at(&site, "203.0.113.9", "127.0.0.1:8080")
            .contains("[&quot;http://127.0.0.1:8080&quot;]")
    );
    assert!(
        page_at(&site, "203.0.113.9", "a\"b")
            .contains("[&quot;https://www.example.com&quot;, &quot;https://example.com&quot;]")
    );

    site.config.allowed_origins = vec!["https://links.example.com".into()];
    assert!(!page_at(&site, "203.0.113.9", "links.example.com").contains(WARNING));
    site.config.allowed_origins.clear();
    site.config.provider = Some(crate::provider::described::ProviderSpec::Echo);
    assert!(
        !page_at(&site, "203.0.113.9", "links.example.com").contains(WARNING),
        "the echo provider spends nothing"
    );
}

#[test]
fn the_owners_own_address_has_no_block_button() {
    let site = site();
    for client in ["203.0.113.9", "192.0.2.66"] {
        let entry = Entry::new(
            START_MS,
            Some(client),
            &[Event::Request, Event::Refused("ip".into())],
        );
        site.store.journal_add(&entry).unwrap();
    }
    let page = page_at(&site, "203.0.113.9", "links.example.com");
    assert!(
        page.contains("name=\"client\" value=\"192.0.2.66\""),
        "another refused client can be blocked: {page}"
    );
    assert!(
        !page.contains("name=\"client\" value=\"203.0.113.9\""),
        "not the owner's own address: {page}"
    );
    assert!(
        page.contains("<span class=\"addr\">203.0.113.9</span> <span class=\"muted\">(you)</span>"),
        "{page}"
    );
    // From another address, the owner sees a button for this one.
    let other = page_at(&site, "198.51.100.7", "links.example.com");
    assert!(
        other.contains("name=\"client\" value=\"203.0.113.9\""),
        "{other}"
    );
}

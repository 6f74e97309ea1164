//! What the signed-in page says about the site itself: the owner's own address, marked and
//! never offered a block.

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

//! Blocks and the dashboard: a blocked address is refused there too; the dashboard's own
//! blocks are bounded, never shorten a longer one, are listed and can be lifted.

use super::*;
use crate::app::controls::blocks::{self, Block};
use crate::net::cidr::Cidr;

fn block_in_store(site: &Site, range: &str, until_ms: Option<u64>) {
    let block = Block {
        range: Cidr::parse(range).unwrap(),
        until_ms,
        reason: "by hand".into(),
        auto: false,
    };
    blocks::update(&site.store, None, START_MS, |list| {
        (blocks::with(list, block, START_MS), ())
    })
    .unwrap();
}

#[test]
fn a_blocked_address_gets_403_at_the_dashboard() {
    let mut site = site();
    // Blocked in the store (`resolve block`): 403, no sign-in form, not even with a session.
    let mut jar = Jar::default();
    assert_eq!(site.owner_signs_in(&mut jar), 303);
    block_in_store(&site, "203.0.113.0/24", None);
    let (r, page) = site.get(&mut jar);
    assert_eq!(r.status, 403, "{page}");
    assert!(
        page.contains(crate::app::controls::BLOCKED) && !page.contains("type=\"password\""),
        "{page}"
    );
    assert!(!page.contains(DATA));
    let (r, _) = site.post(&mut jar, "action=signin&password=x", "203.0.113.9");
    assert_eq!(r.status, 403);
    assert!(
        site.log()
            .contains("403 203.0.113.9 at the dashboard: blocked")
    );
    // Another address is not.
    let r = site.dashboard().answer(
        &env("GET", &Jar::default(), "198.51.100.7"),
        &mut std::io::empty(),
    );
    assert_eq!(r.status, 200);
    // In the configuration's block list: the same.
    site.config.block =
        crate::net::addr_set::AddrSet::new(vec![Cidr::parse("198.51.100.0/24").unwrap()]);
    let r = site.dashboard().answer(
        &env("GET", &Jar::default(), "198.51.100.7"),
        &mut std::io::empty(),
    );
    assert_eq!(r.status, 403);
}

/// A signed-in browser and its form token.
fn owner(site: &Site) -> (Jar, String) {
    let mut jar = Jar::default();
    assert_eq!(site.owner_signs_in(&mut jar), 303);
    let token = site.token(&mut jar);
    (jar, token)
}

#[test]
fn the_dashboard_blocks_no_range_wider_than_a_16_or_a_32_nor_the_owner() {
    let site = site();
    let (mut jar, token) = owner(&site);
    for wide in ["0.0.0.0/0", "::/0", "10.0.0.0/15", "2001:db8::/31"] {
        let (r, page) = site.block(&mut jar, wide, &token);
        assert_eq!(r.status, 403, "{wide}");
        assert!(
            page.contains("The Block button blocks at most an IPv4 /16 or an IPv6 /32"),
            "{wide}: {page}"
        );
    }
    // Nor the owner's own address (203.0.113.9), alone or in a range.
    for own in ["203.0.113.9", "203.0.113.0/24"] {
        let (r, page) = site.block(&mut jar, own, &token);
        assert_eq!(r.status, 403, "{own}");
        assert!(
            page.contains("holds your own address 203.0.113.9"),
            "{own}: {page}"
        );
    }
    assert!(blocks::read(&site.store).unwrap().is_empty());
    for narrow in ["10.0.0.0/16", "2001:db8::/32"] {
        let (r, _) = site.block(&mut jar, narrow, &token);
        assert_eq!(r.status, 303, "{narrow}");
    }
    assert_eq!(blocks::read(&site.store).unwrap().len(), 2);
}

#[test]
fn the_dashboard_never_shortens_a_longer_block() {
    let site = site();
    block_in_store(&site, "192.0.2.66", None);
    block_in_store(&site, "192.0.2.67", Some(START_MS + 7 * 86_400_000));
    let (mut jar, token) = owner(&site);
    for client in ["192.0.2.66", "192.0.2.67", "192.0.2.68"] {
        let (r, _) = site.block(&mut jar, client, &token);
        assert_eq!(r.status, 303);
    }
    let list = blocks::read(&site.store).unwrap();
    let until = |range: &str| {
        list.iter()
            .find(|b| b.range.to_string() == range)
            .map(|b| b.until_ms)
            .unwrap()
    };
    assert_eq!(until("192.0.2.66/32"), None, "for good, still");
    assert_eq!(until("192.0.2.67/32"), Some(START_MS + 7 * 86_400_000));
    assert_eq!(until("192.0.2.68/32"), Some(START_MS + 86_400_000));
    assert!(
        site.log()
            .contains("192.0.2.66/32 already blocked until unblocked; kept")
    );
}

#[test]
fn the_dashboard_lists_the_blocks_and_lifts_them() {
    let site = site();
    block_in_store(&site, "192.0.2.66", None);
    let (mut jar, token) = owner(&site);
    let (_, page) = site.get(&mut jar);
    assert!(page.contains("<h2 id=\"blocks\">Blocks</h2>"), "{page}");
    assert!(
        page.contains("<td><span class=\"addr\">192.0.2.66/32</span> <form"),
        "{page}"
    );
    assert!(
        page.contains("</form></td><td>until lifted<br>the owner: by hand</td>"),
        "{page}"
    );
    assert!(page.contains("name=\"action\" value=\"unblock\""), "{page}");
    // Only with the session's token.
    let (r, _) = site.post(
        &mut jar,
        "action=unblock&client=192.0.2.66&csrf=00",
        "203.0.113.9",
    );
    assert_eq!(r.status, 403);
    assert_eq!(blocks::read(&site.store).unwrap().len(), 1);
    let (r, _) = site.post(
        &mut jar,
        &format!("action=unblock&client=192.0.2.66&csrf={token}"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 303);
    assert!(blocks::read(&site.store).unwrap().is_empty());
    assert!(
        site.log()
            .contains("the block of 192.0.2.66/32 lifted by the owner")
    );
    assert!(
        site.get(&mut jar)
            .1
            .contains("Nobody is blocked in the store.")
    );
}

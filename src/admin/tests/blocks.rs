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
    assert_eq!(
        site.sign_in(&mut jar, PASSWORD, "203.0.113.9").0.status,
        303
    );
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

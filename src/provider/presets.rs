//! Descriptions of the common link resolvers, written in the same declarative form an owner can
//! write for any other JSON API (see docs/providers.md), one JSON file each in `presets/`,
//! built into the program. `{"preset": NAME, "token": ...}` is the whole configuration for
//! their users; every field can be overridden. Facts from the providers' public API
//! documentation: endpoints, fields, error codes and published rates.

/// The preset names, for messages.
pub const NAMES: [&str; 5] = [
    "realdebrid",
    "alldebrid",
    "premiumize",
    "debridlink",
    "torbox",
];

/// A preset's description as JSON text, by name.
pub fn description(name: &str) -> Option<&'static str> {
    Some(match name {
        "realdebrid" => REAL_DEBRID,
        "alldebrid" => ALLDEBRID,
        "premiumize" => PREMIUMIZE,
        "debridlink" => DEBRID_LINK,
        "torbox" => TORBOX,
        _ => return None,
    })
}

/// Real-Debrid: one call; errors as HTTP 4xx with `error_code`. Published rate: 250 per minute.
const REAL_DEBRID: &str = include_str!("presets/realdebrid.json");

/// AllDebrid v4 and v4.1: errors inside HTTP 200; some hosts answer "delayed", then poll every 5 s until
/// status 2 (ready) or 3 (error). Published rates: 12 per second and 600 per minute.
const ALLDEBRID: &str = include_str!("presets/alldebrid.json");

/// Premiumize.me: errors inside HTTP 200 (`status` "error", `message`). No published rate.
const PREMIUMIZE: &str = include_str!("presets/premiumize.json");

/// Debrid-Link v2: errors inside HTTP 200 (`success` false, `error` code). No published rate.
const DEBRID_LINK: &str = include_str!("presets/debridlink.json");

/// TorBox: create a web download, poll until it is finished, then request the link (the token
/// goes in the query of that last call). Published rates: 300 per minute, and creating a web
/// download 60 per hour.
const TORBOX: &str = include_str!("presets/torbox.json");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_json_naming_a_download() {
        for name in NAMES {
            let text = description(name).unwrap();
            let v: serde_json::Value =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(text.contains("\"download\""), "{name}");
            assert!(
                v["base_url"].as_str().unwrap().starts_with("https://"),
                "{name}"
            );
        }
        assert!(description("nope").is_none());
    }
}

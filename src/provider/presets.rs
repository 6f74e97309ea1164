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

/// A preset's rate (`rate_limits`), as its description writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub name: &'static str,
    pub limit: u64,
    pub window_secs: u64,
    /// The steps (from 1) whose calls it counts; every call without.
    pub steps: Option<&'static [usize]>,
}

/// What a request needs of a preset before its first paid call: its rates, how many steps it
/// has (which the rates' steps must name), and its timeouts. Read from the descriptions when
/// the program is built (build.rs), so that no request reads their JSON text for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    pub rate_limits: &'static [Rate],
    pub steps: usize,
    pub connect_timeout_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
}

include!(concat!(env!("OUT_DIR"), "/preset_needs.rs"));

/// What a request needs of the preset `name`, by name.
pub fn needs(name: &str) -> Option<&'static Needs> {
    NEEDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, needs)| needs)
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
    fn what_a_request_needs_is_what_each_description_says() {
        assert_eq!(NEEDS.map(|(n, _)| n), NAMES);
        for name in NAMES {
            let v: serde_json::Value = serde_json::from_str(description(name).unwrap()).unwrap();
            let needs = needs(name).unwrap();
            assert_eq!(needs.steps, v["steps"].as_array().unwrap().len(), "{name}");
            let rates: Vec<serde_json::Value> = needs
                .rate_limits
                .iter()
                .map(|r| {
                    let mut rate = serde_json::json!({
                        "name": r.name, "limit": r.limit, "window_secs": r.window_secs
                    });
                    if let Some(steps) = r.steps {
                        rate["steps"] = serde_json::json!(steps);
                    }
                    rate
                })
                .collect();
            let written = v["rate_limits"].as_array().cloned().unwrap_or_default();
            assert_eq!(rates, written, "{name}");
            for (field, value) in [
                ("connect_timeout_ms", needs.connect_timeout_ms),
                ("timeout_ms", needs.timeout_ms),
                ("deadline_ms", needs.deadline_ms),
            ] {
                assert_eq!(v[field].as_u64(), value, "{name}: {field}");
            }
        }
        assert_eq!(needs("nope"), None);
    }

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

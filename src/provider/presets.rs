//! Descriptions of the common link resolvers, written in the same declarative form an owner can
//! write for any other JSON API (see README: Providers). `{"preset": NAME, "token": ...}` is the
//! whole configuration for their users; every field can be overridden. Facts from the
//! providers' public API documentation: endpoints, fields, error codes and published rates.

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
const REAL_DEBRID: &str = r#"{
  "base_url": "https://api.real-debrid.com/rest/1.0",
  "steps": [{
    "method": "POST", "url": "{base}/unrestrict/link",
    "headers": {"Authorization": "Bearer {token}"},
    "form": {"link": "{link}"},
    "error_code": "/error_code", "error_message": "/error",
    "extract": {"download": "/download", "filename": "/filename"}
  }],
  "errors": {
    "auth": ["8", "9", "14", "22"],
    "unsupported": ["16", "20"],
    "temporary": ["17", "19", "25"],
    "quota": ["18", "21", "23", "36"],
    "dead_link": ["24", "35"],
    "rate_limit": ["5", "34"]
  },
  "rate_limits": [{"name": "provider-minute", "limit": 250, "window_secs": 60}]
}"#;

/// AllDebrid v4: errors inside HTTP 200; some hosts answer "delayed", then poll every 5 s until
/// status 2 (ready) or 3 (error). Published rates: 12 per second and 600 per minute.
const ALLDEBRID: &str = r#"{
  "base_url": "https://api.alldebrid.com/v4",
  "steps": [{
    "method": "POST", "url": "{base}/link/unlock",
    "headers": {"Authorization": "Bearer {token}"},
    "form": {"link": "{link}"},
    "success": {"pointer": "/status", "equals": "success"},
    "error_code": "/error/code", "error_message": "/error/message",
    "extract": {"download": "/data/link", "filename": "/data/filename", "delayed": "/data/delayed"}
  }, {
    "when": "delayed",
    "method": "POST", "url": "{base}/link/delayed",
    "headers": {"Authorization": "Bearer {token}"},
    "form": {"id": "{delayed}"},
    "success": {"pointer": "/status", "equals": "success"},
    "error_code": "/error/code", "error_message": "/error/message",
    "poll": {"interval_ms": 5000,
             "until": {"pointer": "/data/status", "equals": 2},
             "fail": {"pointer": "/data/status", "equals": 3}},
    "extract": {"download": "/data/link"}
  }],
  "errors": {
    "auth": ["AUTH_MISSING_APIKEY", "AUTH_BAD_APIKEY", "AUTH_BLOCKED", "AUTH_USER_BANNED", "NO_SERVER"],
    "unsupported": ["LINK_HOST_NOT_SUPPORTED", "LINK_NOT_SUPPORTED", "REDIRECTOR_NOT_SUPPORTED"],
    "dead_link": ["LINK_DOWN", "BAD_LINK", "LINK_IS_MISSING"],
    "temporary": ["LINK_TEMPORARY_UNAVAILABLE", "LINK_HOST_UNAVAILABLE", "LINK_HOST_FULL", "MAINTENANCE"],
    "quota": ["LINK_HOST_LIMIT_REACHED", "LINK_TOO_MANY_DOWNLOADS", "FREE_TRIAL_LIMIT_REACHED", "MUST_BE_PREMIUM"],
    "password": ["LINK_PASS_PROTECTED"]
  },
  "rate_limits": [
    {"name": "provider-second", "limit": 12, "window_secs": 1},
    {"name": "provider-minute", "limit": 600, "window_secs": 60}
  ]
}"#;

/// Premiumize.me: errors inside HTTP 200 (`status` "error", `message`). No published rate.
const PREMIUMIZE: &str = r#"{
  "base_url": "https://www.premiumize.me/api",
  "steps": [{
    "method": "POST", "url": "{base}/transfer/directdl",
    "headers": {"Authorization": "Bearer {token}"},
    "form": {"src": "{link}"},
    "success": {"pointer": "/status", "equals": "success"},
    "error_message": "/message",
    "extract": {"download": ["/content/0/link", "/location"], "filename": ["/content/0/path", "/filename"]}
  }],
  "errors": {},
  "rate_limits": []
}"#;

/// Debrid-Link v2: errors inside HTTP 200 (`success` false, `error` code). No published rate.
const DEBRID_LINK: &str = r#"{
  "base_url": "https://debrid-link.com/api/v2",
  "steps": [{
    "method": "POST", "url": "{base}/downloader/add",
    "headers": {"Authorization": "Bearer {token}"},
    "form": {"url": "{link}"},
    "success": {"pointer": "/success", "equals": true},
    "error_code": "/error", "error_message": "/error_description",
    "extract": {"download": "/value/downloadUrl", "filename": "/value/name"}
  }],
  "errors": {
    "auth": ["badToken", "accountLocked", "serverNotAllowed"],
    "rate_limit": ["floodDetected"],
    "unsupported": ["hostNotValid", "notFreeHost", "disabledHost"],
    "dead_link": ["fileNotFound", "fileNotAvailable", "badFileUrl"],
    "temporary": ["notDebrid", "maintenanceHost", "noServerHost", "freeServerOverload"],
    "quota": ["maxLink", "maxLinkHost", "maxData", "maxDataHost"],
    "password": ["badFilePassword"]
  },
  "rate_limits": []
}"#;

/// TorBox: create a web download, poll until it is finished, then request the link (the token
/// goes in the query of that last call). Published rates: 300 per minute, and creating a web
/// download 60 per hour.
const TORBOX: &str = r#"{
  "base_url": "https://api.torbox.app/v1/api",
  "steps": [{
    "method": "POST", "url": "{base}/webdl/createwebdownload",
    "headers": {"Authorization": "Bearer {token}"},
    "form": {"link": "{link}"},
    "success": {"pointer": "/success", "equals": true},
    "error_code": "/error", "error_message": "/detail",
    "extract": {"id": "/data/webdownload_id"}
  }, {
    "method": "GET", "url": "{base}/webdl/mylist",
    "headers": {"Authorization": "Bearer {token}"},
    "query": {"id": "{id}", "bypass_cache": "true"},
    "success": {"pointer": "/success", "equals": true},
    "error_code": "/error", "error_message": "/detail",
    "poll": {"interval_ms": 2000, "until": {"pointer": "/data/download_finished", "equals": true}},
    "extract": {"file_id": "/data/files/0/id", "filename": ["/data/files/0/short_name", "/data/name"]}
  }, {
    "method": "GET", "url": "{base}/webdl/requestdl",
    "query": {"token": "{token}", "web_id": "{id}", "file_id": "{file_id}"},
    "success": {"pointer": "/success", "equals": true},
    "error_code": "/error", "error_message": "/detail",
    "extract": {"download": "/data"}
  }],
  "errors": {
    "auth": ["NO_AUTH", "BAD_TOKEN", "AUTH_ERROR"],
    "quota": ["MONTHLY_LIMIT", "COOLDOWN_LIMIT", "ACTIVE_LIMIT", "DOWNLOAD_TOO_LARGE"],
    "dead_link": ["LINK_OFFLINE", "ITEM_NOT_FOUND"],
    "temporary": ["DOWNLOAD_SERVER_ERROR"]
  },
  "rate_limits": [
    {"name": "provider-minute", "limit": 300, "window_secs": 60},
    {"name": "provider-create", "limit": 60, "window_secs": 3600}
  ]
}"#;

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

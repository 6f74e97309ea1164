//! The answer for several links: each link's own answer (as the one-link JSON answer gives it)
//! read into its state (ready with its URLs, under way with where to ask again, refused or
//! failed and why, with its wait; not tried when the request's time ran out), and the list
//! written as JSON, plain text or a page, with what is left of the visitor's allowance.

use serde_json::{Value, json};

use crate::http::allowance::Left;
use crate::http::negotiate::Format;
use crate::http::render::{self, Frame, link_text, wait_words};
use crate::http::response::Response;
use crate::support::html::escape;

/// Where a link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Its download link (or links) is given.
    Ready,
    /// The service is still preparing it (202): ask again at `poll` after `retry_after`.
    Pending,
    /// Not served, for a reason of its own or a limit: the link, the visitor's or the site's.
    Refused,
    /// The service failed to serve it.
    Failed,
    /// Not asked: the time one request may take ran out first. Counted by nothing.
    NotTried,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ready => "ready",
            State::Pending => "pending",
            State::Refused => "refused",
            State::Failed => "failed",
            State::NotTried => "not_tried",
        }
    }

    /// Its look on a page (the stylesheet's names, shared with the one-link cards).
    pub fn look(self) -> &'static str {
        match self {
            State::Ready => "ok",
            State::Pending => "busy",
            State::Refused | State::NotTried => "wait",
            State::Failed => "error",
        }
    }

    const ALL: [State; 5] = [
        State::Ready,
        State::Pending,
        State::Refused,
        State::Failed,
        State::NotTried,
    ];
}

/// One link of the list and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The link as sent.
    pub link: String,
    pub state: State,
    /// The status its own answer had (None: not tried).
    pub status: Option<u16>,
    /// Its own answer's JSON fields (`download`, `filename`, `files`; `code`, `detail`,
    /// `retry_after`, `rule`; `progress`).
    pub fields: serde_json::Map<String, Value>,
    /// Where to ask again for a link under way (its own `Location`).
    pub poll: Option<String>,
    /// `hit` or `miss`: whether the result cache served it.
    pub cache: Option<String>,
}

/// The sentence of a link not tried.
pub const NOT_TRIED: &str =
    "Not tried: this request ran out of time first. Send this link again; nothing was counted.";

impl Entry {
    /// A link's entry from its own answer, asked for in JSON.
    pub fn from_answer(link: String, answer: &Response) -> Entry {
        let fields = match serde_json::from_slice::<Value>(&answer.body) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let code = fields.get("code").and_then(Value::as_str).unwrap_or("");
        let state = match answer.status {
            200..=201 | 203..=299 => State::Ready,
            202 => State::Pending,
            400..=499 => State::Refused,
            // The site's own budget of paid calls, for now: a limit too, with its wait.
            503 if code == "spend_limit" => State::Refused,
            _ => State::Failed,
        };
        let kept = [
            "download",
            "filename",
            "files",
            "code",
            "detail",
            "retry_after",
            "rule",
            "progress",
        ];
        let mut fields: serde_json::Map<String, Value> = fields
            .into_iter()
            .filter(|(k, _)| kept.contains(&k.as_str()))
            .collect();
        if !fields.contains_key("retry_after")
            && let Some(secs) = answer
                .header_value("Retry-After")
                .and_then(|v| v.parse::<u32>().ok())
        {
            fields.insert("retry_after".into(), secs.into());
        }
        Entry {
            link,
            state,
            status: Some(answer.status),
            fields,
            poll: (state == State::Pending)
                .then(|| answer.header_value("Location").map(str::to_owned))
                .flatten(),
            cache: answer.header_value("X-Resolve-Cache").map(str::to_owned),
        }
    }

    /// A link not asked at all.
    pub fn not_tried(link: String) -> Entry {
        let mut fields = serde_json::Map::new();
        fields.insert("code".into(), "not_tried".into());
        fields.insert("detail".into(), NOT_TRIED.into());
        Entry {
            link,
            state: State::NotTried,
            status: None,
            fields,
            poll: None,
            cache: None,
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    fn retry_after(&self) -> Option<u32> {
        self.fields
            .get("retry_after")
            .and_then(Value::as_u64)
            .and_then(|s| u32::try_from(s).ok())
    }

    /// Its download links, with their file names: every file of a folder.
    fn downloads(&self) -> Vec<(&str, Option<&str>)> {
        fn from(v: &Value) -> Option<(&str, Option<&str>)> {
            Some((
                v.get("download")?.as_str()?,
                v.get("filename").and_then(Value::as_str),
            ))
        }
        match self.fields.get("files").and_then(Value::as_array) {
            Some(files) => files.iter().filter_map(from).collect(),
            None => self
                .text("download")
                .map(|d| vec![(d, self.text("filename"))])
                .unwrap_or_default(),
        }
    }

    /// What the visitor reads about it (not for a ready link).
    fn sentence(&self) -> String {
        let detail = self.text("detail").unwrap_or(match self.state {
            State::Failed => "The service could not get this link.",
            _ => "This link was not served.",
        });
        match (self.state, self.retry_after()) {
            (State::Refused | State::Failed, Some(secs)) if !detail.contains("try again in") => {
                format!("{detail} Try again in {}.", wait_words(secs))
            }
            _ => detail.to_owned(),
        }
    }
}

/// A rule's state with its unit, and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    pub left: Left,
    /// `requests` or `bytes`.
    pub unit: &'static str,
    /// "12 of 30 left this minute".
    pub words: String,
}

/// The list as the format asked: JSON `{"links": [...], "counts": {...}, "allowance": [...]}`,
/// a line per link as text, or a page. Always 200: each link has its own status.
pub fn render(
    format: Format,
    entries: &[Entry],
    allowance: &[Allowance],
    frame: &Frame<'_>,
) -> Response {
    match format {
        Format::Json => Response::new(
            200,
            "application/json",
            format!("{}\n", json_of(entries, allowance)),
        ),
        Format::Text => Response::new(
            200,
            "text/plain; charset=utf-8",
            text_of(entries, allowance),
        ),
        Format::Html => {
            let body = render::page(
                &heading(entries),
                "list",
                None,
                &card_of(entries, allowance),
                ("More links", None),
                frame,
            );
            render::html_page(200, body).header("Referrer-Policy", "no-referrer")
        }
    }
}

fn count(entries: &[Entry], state: State) -> usize {
    entries.iter().filter(|e| e.state == state).count()
}

fn json_of(entries: &[Entry], allowance: &[Allowance]) -> Value {
    let links: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!({"link": e.link, "state": e.state.as_str()});
            if let Some(status) = e.status {
                v["status"] = status.into();
            }
            for (k, f) in &e.fields {
                v[k] = f.clone();
            }
            if let Some(poll) = &e.poll {
                v["poll"] = poll.as_str().into();
            }
            if let Some(cache) = &e.cache {
                v["cache"] = cache.as_str().into();
            }
            v
        })
        .collect();
    let counts: serde_json::Map<String, Value> = State::ALL
        .iter()
        .map(|s| (s.as_str().to_owned(), count(entries, *s).into()))
        .collect();
    let allowance: Vec<Value> = allowance
        .iter()
        .map(|a| {
            json!({
                "rule": a.left.rule, "unit": a.unit, "limit": a.left.limit,
                "remaining": a.left.remaining, "window_secs": a.left.window_secs,
                "reset_secs": a.left.reset_secs, "words": a.words,
            })
        })
        .collect();
    json!({"links": links, "counts": counts, "allowance": allowance})
}

/// `STATE LINK` then the download link(s), the wait or the reason, a line each; then what is
/// left, a line a rule.
fn text_of(entries: &[Entry], allowance: &[Allowance]) -> String {
    let mut out = String::new();
    for e in entries {
        let state = e.state.as_str();
        match e.state {
            State::Ready => {
                for (download, _) in e.downloads() {
                    out.push_str(&format!("{state} {} {download}\n", shown(&e.link)));
                }
            }
            _ => out.push_str(&format!("{state} {} {}\n", shown(&e.link), e.sentence())),
        }
    }
    for a in allowance {
        out.push_str(&format!("{}.\n", capitalised(&a.words)));
    }
    out
}

/// A link as sent, for the text and the page: spaces and control characters (which a link
/// refused for them may hold) written as `%XX`, so that an answer echoes no escape sequence to a
/// terminal and keeps one line a link.
fn shown(link: &str) -> std::borrow::Cow<'_, str> {
    if !link.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return std::borrow::Cow::Borrowed(link);
    }
    let mut out = String::with_capacity(link.len() + 8);
    for c in link.chars() {
        if c.is_whitespace() || c.is_control() {
            let mut bytes = [0; 4];
            for b in c.encode_utf8(&mut bytes).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn heading(entries: &[Entry]) -> String {
    let ready = count(entries, State::Ready);
    format!("{ready} of {} links ready", entries.len())
}

fn card_of(entries: &[Entry], allowance: &[Allowance]) -> String {
    let mut card = String::from("<ol class=\"links\">\n");
    for e in entries {
        let state = e.state.as_str();
        card.push_str(&format!(
            "<li class=\"{}\" data-state=\"{state}\"><p class=\"asked\">{}</p>\n",
            e.state.look(),
            link_text(&shown(&e.link))
        ));
        match e.state {
            State::Ready => {
                for (download, name) in e.downloads() {
                    let shown = name.map_or_else(|| link_text(download), escape);
                    card.push_str(&format!(
                        "<p class=\"link\"><a href=\"{}\" rel=\"noreferrer\">{shown}</a></p>\n",
                        escape(download)
                    ));
                }
            }
            State::Pending => {
                card.push_str(&format!("<p>{}</p>\n", escape(&e.sentence())));
                if let Some(poll) = &e.poll {
                    card.push_str(&format!(
                        "<p><a href=\"{}\">Ask again for this link</a></p>\n",
                        escape(poll)
                    ));
                }
            }
            _ => card.push_str(&format!("<p>{}</p>\n", escape(&e.sentence()))),
        }
        card.push_str("</li>\n");
    }
    card.push_str("</ol>\n");
    for a in allowance {
        card.push_str(&format!(
            "<p class=\"allowance\">{}.</p>\n",
            escape(&capitalised(&a.words))
        ));
    }
    card
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_echoed_without_spaces_or_control_characters() {
        assert_eq!(shown("https://host.example/f"), "https://host.example/f");
        assert_eq!(
            shown("https\u{1a}//host.example/a b\u{1b}[2J\n"),
            "https%1A//host.example/a%20b%1B[2J%0A"
        );
    }

    fn answer(status: u16, body: Value) -> Response {
        Response::new(status, "application/json", format!("{body}\n"))
    }

    fn entries() -> Vec<Entry> {
        vec![
            Entry::from_answer(
                "https://h.example/f.part01.rar".into(),
                &answer(200, json!({"download": "https://dl.example/1", "filename": "f.part01.rar"}))
                    .header("X-Resolve-Cache", "miss"),
            ),
            Entry::from_answer(
                "https://h.example/f.part02.rar".into(),
                &answer(202, json!({"status": "pending", "progress": "40%", "retry_after": 5, "detail": "Preparing."}))
                    .header("Location", "/cgi-bin/resolve?link=x"),
            ),
            Entry::from_answer(
                "https://h.example/f.part03.rar".into(),
                &answer(429, json!({"code": "rate_limited", "detail": "Too many requests: try again in 42 seconds.", "retry_after": 42, "rule": "per-minute"})),
            ),
            Entry::from_answer(
                "https://h.example/f.part04.rar".into(),
                &answer(502, json!({"code": "provider_unavailable", "detail": "The service failed."})),
            ),
            Entry::not_tried("https://h.example/f.part05.rar".into()),
        ]
    }

    #[test]
    fn each_link_has_its_state() {
        let e = entries();
        let states: Vec<State> = e.iter().map(|e| e.state).collect();
        assert_eq!(
            states,
            [
                State::Ready,
                State::Pending,
                State::Refused,
                State::Failed,
                State::NotTried
            ]
        );
        assert_eq!(e[1].poll.as_deref(), Some("/cgi-bin/resolve?link=x"));
        assert_eq!(e[0].cache.as_deref(), Some("miss"));
        let spend = Entry::from_answer(
            "x".into(),
            &answer(503, json!({"code": "spend_limit"})).header("Retry-After", "60"),
        );
        assert_eq!(
            (spend.state, spend.retry_after()),
            (State::Refused, Some(60))
        );
    }

    #[test]
    fn json_lists_them_with_counts_and_allowance() {
        let allowance = [Allowance {
            left: Left {
                rule: "per-minute".into(),
                limit: 30,
                remaining: 0,
                window_secs: 60,
                reset_secs: 42,
                bytes: false,
            },
            unit: "requests",
            words: "0 of 30 left this minute".into(),
        }];
        let r = render(Format::Json, &entries(), &allowance, &Frame::default());
        assert_eq!(r.status, 200);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["links"][0]["state"], "ready");
        assert_eq!(v["links"][0]["download"], "https://dl.example/1");
        assert_eq!(v["links"][1]["poll"], "/cgi-bin/resolve?link=x");
        assert_eq!(v["links"][2]["retry_after"], 42);
        assert_eq!(v["links"][2]["status"], 429);
        assert_eq!(v["links"][4]["state"], "not_tried");
        assert_eq!(v["counts"]["ready"], 1);
        assert_eq!(v["counts"]["not_tried"], 1);
        assert_eq!(v["allowance"][0]["words"], "0 of 30 left this minute");
    }

    #[test]
    fn text_and_page() {
        let r = render(Format::Text, &entries(), &[], &Frame::default());
        let text = String::from_utf8(r.body).unwrap();
        assert!(
            text.starts_with("ready https://h.example/f.part01.rar https://dl.example/1\n"),
            "{text}"
        );
        assert!(text.contains("refused https://h.example/f.part03.rar Too many requests: try again in 42 seconds.\n"), "{text}");
        let r = render(Format::Html, &entries(), &[], &Frame::default());
        let page = String::from_utf8(r.body).unwrap();
        assert!(page.contains("1 of 5 links ready"), "{page}");
        assert!(
            page.contains("<li class=\"wait\" data-state=\"refused\">"),
            "{page}"
        );
        assert!(page.contains("href=\"/cgi-bin/resolve?link=x\""), "{page}");
    }
}

//! How a rule's store key is written: a template of text and placeholders (`{rule}`, `{ip}`,
//! `{api_key}`), so that resolve can count the rows another program (a PHP limiter) counts.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::{Serialize, Serializer};

/// What a template can say besides its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// The rule's name.
    Rule,
    /// The client's address as counted (an IPv6 client by its prefix).
    Ip,
    /// The client's API key as counted: its name when listed, else `sha256:` and 16 hex digits
    /// of its hash (never the key itself).
    ApiKey,
}

impl Placeholder {
    pub const ALL: [Placeholder; 3] = [Placeholder::Rule, Placeholder::Ip, Placeholder::ApiKey];

    /// The name between the braces.
    pub fn name(self) -> &'static str {
        match self {
            Placeholder::Rule => "rule",
            Placeholder::Ip => "ip",
            Placeholder::ApiKey => "api_key",
        }
    }

    /// Written with its braces, as in a template.
    pub fn written(self) -> String {
        format!("{{{}}}", self.name())
    }

    /// Whether `s` could be a whole value of this placeholder: an address's characters
    /// (digits, lowercase hex, `.`, `:`, `/`), or a key's id (a listed key's name, 1 to 32 of
    /// `a-z 0-9 _ -`, or `sha256:` and 16 hex digits). `{rule}` is written out before it is
    /// asked.
    fn could_be(self, s: &str) -> bool {
        match self {
            Placeholder::Rule => false,
            Placeholder::Ip => !s.is_empty() && self.could_begin(s),
            Placeholder::ApiKey => {
                (!s.is_empty() && key_name(s))
                    || s.strip_prefix(HASHED)
                        .is_some_and(|h| h.len() == 16 && hex(h))
            }
        }
    }

    /// Whether some value of this placeholder could start with `s`.
    fn could_begin(self, s: &str) -> bool {
        match self {
            Placeholder::Rule => false,
            Placeholder::Ip => s
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'a'..=b'f' | b'.' | b':' | b'/')),
            Placeholder::ApiKey => {
                key_name(s)
                    || HASHED.starts_with(s)
                    || s.strip_prefix(HASHED)
                        .is_some_and(|h| h.len() <= 16 && hex(h))
            }
        }
    }

    /// The longest value this placeholder takes, rule names aside: an IPv6 prefix written out
    /// (`ffff:…:ffff/128`, 39 + 4), a listed key's name (32; an unlisted key's `sha256:` and
    /// 16 hex digits is 23).
    pub fn longest_identity(self) -> usize {
        match self {
            Placeholder::Rule => 0,
            Placeholder::Ip => 43,
            Placeholder::ApiKey => 32,
        }
    }
}

/// What an unlisted API key's id starts with, before 16 hex digits of its hash.
const HASHED: &str = "sha256:";

/// At most 32 of `a-z 0-9 _ -`: a listed key's name, or the start of one.
fn key_name(s: &str) -> bool {
    s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What the keys resolve keeps for itself start with: the block list and its lock, counts of
/// refusals and of log lines (`resolve:~…`), cached answers, the usage journal in Redis, and
/// the dashboard's sign-in and setup limits. A rule's template must make no key that starts so.
pub const RESERVED_PREFIXES: [&str; 9] = [
    "resolve:~",
    "resolve:cache:",
    "resolve:journal:",
    "resolve:admin-signin:",
    "resolve:admin-signin-net:",
    "resolve:admin-signin-site:",
    "resolve:admin-signin-device:",
    "resolve:admin-signin-setup:",
    "resolve:admin-signin-setup-net:",
];

/// A key resolve keeps for itself: the one place each is written, so that every process, every
/// store and every version of the program (a store on disk, in Redis or in MySQL outlives an
/// upgrade) names it alike. The variable parts are shown as they are (`Display`), written
/// straight into the key.
pub enum Reserved<'a> {
    /// The shared list of blocked clients (`store::block_list`).
    BlockList,
    /// The lock taken to change that list.
    BlockListLock,
    /// A blocked client's refusal was logged (at most once a minute each): its identity.
    BlockedLog(&'a dyn fmt::Display),
    /// A client's refusals, counted for `auto_block`: its identity.
    Refusals(&'a dyn fmt::Display),
    /// The refusals of a client's network, counted for `auto_block`: the network.
    NetworkRefusals(&'a dyn fmt::Display),
    /// A full list of blocks was logged (at most once a minute).
    BlocksFullLog,
    /// A shadow rule's would-be refusal of a client was logged (once per window).
    ShadowLog {
        rule: &'a dyn fmt::Display,
        client: &'a dyn fmt::Display,
    },
    /// The provider's list of supported hosts, among the cached answers.
    HostList,
    /// Held by the one request that fetches that list.
    HostListFetching,
    /// A link's cached answer (or the claim of the request resolving it): the SHA-256 of the
    /// link in its standard form, in lower-case hex.
    CachedAnswer(&'a str),
    /// A link's paid job still under way at the provider: the same digest.
    Job(&'a str),
    /// The usage journal's totals of an hour (hours since 1970), in Redis.
    JournalTotals(u32),
    /// The usage journal's figures per client of an hour, in Redis.
    JournalClients(u32),
    /// The kept ACTION NEEDED lines, in Redis.
    JournalNotes,
    /// The host list of a service after the first of `providers`: its name.
    ServiceHostList(&'a dyn fmt::Display),
    /// Held by the one request that fetches that service's list.
    ServiceHostListFetching(&'a dyn fmt::Display),
}

impl Reserved<'_> {
    /// The key as the stores keep it; the fixed ones without an allocation.
    pub fn key(&self) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow::{Borrowed, Owned};
        match self {
            Reserved::BlockList => Borrowed("resolve:~blocks"),
            Reserved::BlockListLock => Borrowed("resolve:~blocks-lock"),
            Reserved::BlockedLog(client) => Owned(format!("resolve:~blocked-log:{client}")),
            Reserved::Refusals(client) => Owned(format!("resolve:~refusals:{client}")),
            Reserved::NetworkRefusals(network) => Owned(format!("resolve:~refusals-net:{network}")),
            Reserved::BlocksFullLog => Borrowed("resolve:~blocks-full-log"),
            Reserved::ShadowLog { rule, client } => {
                Owned(format!("resolve:~shadow-log:{rule}:{client}"))
            }
            Reserved::HostList => Borrowed("resolve:cache:hosts"),
            Reserved::HostListFetching => Borrowed("resolve:cache:hosts:fetching"),
            Reserved::CachedAnswer(digest) => Owned(format!("resolve:cache:{digest}")),
            Reserved::Job(digest) => Owned(format!("resolve:cache:job:{digest}")),
            Reserved::JournalTotals(hour) => Owned(format!("resolve:journal:totals:{hour}")),
            Reserved::JournalClients(hour) => Owned(format!("resolve:journal:clients:{hour}")),
            Reserved::JournalNotes => Borrowed("resolve:journal:notes"),
            Reserved::ServiceHostList(name) => Owned(format!("resolve:cache:hosts@{name}")),
            Reserved::ServiceHostListFetching(name) => {
                Owned(format!("resolve:cache:hosts@{name}:fetching"))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Where the text is in the template's own.
    Text(Range<usize>),
    Slot(Placeholder),
}

/// What is wrong with a template's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    Empty,
    /// A character that is not printable ASCII, or a space.
    Character(char),
    /// `{name}` that is no placeholder.
    Unknown(String),
    /// A `{` without its `}`, or a `}` alone.
    Brace,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Empty => f.write_str("is empty"),
            TemplateError::Character(c) => write!(
                f,
                "holds {c:?}: keys are printable ASCII without spaces (the MySQL store's key column is ASCII)"
            ),
            TemplateError::Unknown(name) => write!(f, "{{{name}}} is not a placeholder"),
            TemplateError::Brace => f.write_str("has a brace that opens or closes no placeholder"),
        }
    }
}

/// A key template, checked: printable ASCII, braces only around known placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    /// Borrowed for a template written in the program (the defaults): nothing copied.
    text: Cow<'static, str>,
    /// Borrowed for a copy of a template kept for the program's life ([`KeyTemplate::shared`]).
    parts: Cow<'static, [Part]>,
}

impl KeyTemplate {
    pub fn parse(text: &str) -> Result<KeyTemplate, TemplateError> {
        KeyTemplate::parse_text(Cow::Owned(text.to_owned()))
    }

    /// [`KeyTemplate::parse`] for a template written in the program, kept where it is.
    pub fn parse_static(text: &'static str) -> Result<KeyTemplate, TemplateError> {
        KeyTemplate::parse_text(Cow::Borrowed(text))
    }

    fn parse_text(whole: Cow<'static, str>) -> Result<KeyTemplate, TemplateError> {
        let text: &str = &whole;
        if text.is_empty() {
            return Err(TemplateError::Empty);
        }
        if !text.bytes().all(|b| b.is_ascii_graphic())
            && let Some(c) = text.chars().find(|c| !c.is_ascii_graphic())
        {
            return Err(TemplateError::Character(c));
        }
        let brace = |s: &str| s.bytes().position(|b| b == b'{' || b == b'}');
        let mut parts = Vec::new();
        let mut rest = text;
        // Where `rest` starts in `text`.
        let start = |rest: &str| text.len() - rest.len();
        while !rest.is_empty() {
            match brace(rest) {
                None => {
                    parts.push(Part::Text(start(rest)..text.len()));
                    rest = "";
                }
                Some(at) => {
                    if at > 0 {
                        parts.push(Part::Text(start(rest)..start(rest) + at));
                    }
                    let tail = &rest[at..];
                    let close = tail
                        .strip_prefix('{')
                        .and_then(|t| brace(t).filter(|i| t.as_bytes()[*i] == b'}'))
                        .ok_or(TemplateError::Brace)?;
                    let name = &tail[1..=close];
                    let slot = Placeholder::ALL
                        .into_iter()
                        .find(|p| p.name() == name)
                        .ok_or_else(|| TemplateError::Unknown(name.to_owned()))?;
                    parts.push(Part::Slot(slot));
                    rest = &tail[close + 2..];
                }
            }
        }
        Ok(KeyTemplate {
            text: whole,
            parts: Cow::Owned(parts),
        })
    }

    /// `template`, kept for the program's life, shared: its text and parts are not copied.
    pub fn shared(template: &'static KeyTemplate) -> KeyTemplate {
        KeyTemplate {
            text: Cow::Borrowed(&template.text),
            parts: Cow::Borrowed(&template.parts),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn uses(&self, p: Placeholder) -> bool {
        self.parts.contains(&Part::Slot(p))
    }

    /// The key of rule `rule` for `identity` (the client's address or key, as the rule counts).
    pub fn expand(&self, rule: &str, identity: &str) -> String {
        let mut key = String::with_capacity(self.text.len() + identity.len() + rule.len());
        for piece in self.pieces(rule, identity) {
            key.push_str(piece);
        }
        key
    }

    /// What [`KeyTemplate::expand`] joins, in order.
    fn pieces<'s>(&'s self, rule: &'s str, identity: &'s str) -> impl Iterator<Item = &'s str> {
        self.parts.iter().map(move |part| match part {
            Part::Text(t) => &self.text[t.clone()],
            Part::Slot(Placeholder::Rule) => rule,
            Part::Slot(Placeholder::Ip | Placeholder::ApiKey) => identity,
        })
    }

    /// Whether `self.expand(rule, identity)` and `other.expand(other_rule, other_identity)`
    /// are the same key, without writing either.
    pub fn same_key(
        &self,
        (rule, identity): (&str, &str),
        other: &KeyTemplate,
        (other_rule, other_identity): (&str, &str),
    ) -> bool {
        let mine = || self.pieces(rule, identity);
        let theirs = || other.pieces(other_rule, other_identity);
        mine().map(str::len).sum::<usize>() == theirs().map(str::len).sum::<usize>()
            && mine()
                .flat_map(str::bytes)
                .eq(theirs().flat_map(str::bytes))
    }

    /// The identity `key` was made from by [`KeyTemplate::expand`] for rule `rule`, if it was.
    pub fn identity_in<'k>(&self, rule: &str, key: &'k str) -> Option<&'k str> {
        let slots = self
            .parts
            .iter()
            .filter(|p| matches!(p, Part::Slot(Placeholder::Ip | Placeholder::ApiKey)))
            .count();
        if slots == 0 {
            return None;
        }
        let fixed = self.expand(rule, "").len();
        let len = key.len().checked_sub(fixed)? / slots;
        let start = self.prefix(rule).len();
        let identity = key.get(start..start + len)?;
        (self.expand(rule, identity) == key).then_some(identity)
    }

    /// The text every key of rule `rule` starts with: up to the first `{ip}` or `{api_key}`.
    pub fn prefix(&self, rule: &str) -> String {
        let mut out = String::new();
        for part in self.parts.iter() {
            match part {
                Part::Text(t) => out.push_str(&self.text[t.clone()]),
                Part::Slot(Placeholder::Rule) => out.push_str(rule),
                Part::Slot(_) => break,
            }
        }
        out
    }

    /// Whether some key rule `rule` makes with it could start with `prefix`: its text where
    /// the template has text, a value a placeholder can take where it has one.
    pub fn can_start_with(&self, rule: &str, prefix: &str) -> bool {
        fn reach(text: &str, parts: &[Part], rule: &str, p: &str) -> bool {
            if p.is_empty() {
                return true;
            }
            let Some((first, rest)) = parts.split_first() else {
                return false;
            };
            let piece = match first {
                Part::Text(t) => &text[t.clone()],
                Part::Slot(Placeholder::Rule) => rule,
                Part::Slot(slot) => {
                    // The value runs past the prefix, or ends within it and the rest follows.
                    return slot.could_begin(p)
                        || (1..p.len()).any(|k| {
                            p.is_char_boundary(k)
                                && slot.could_be(&p[..k])
                                && reach(text, rest, rule, &p[k..])
                        });
                }
            };
            match p.strip_prefix(piece) {
                Some(after) => reach(text, rest, rule, after),
                None => piece.starts_with(p),
            }
        }
        reach(&self.text, &self.parts, rule, prefix)
    }

    /// The longest key rule `rule` can make with it.
    pub fn longest_key(&self, rule: &str) -> usize {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Text(t) => t.len(),
                Part::Slot(Placeholder::Rule) => rule.len(),
                Part::Slot(p) => p.longest_identity(),
            })
            .sum()
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for KeyTemplate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_written_out() {
        let t = KeyTemplate::parse("resolve:{rule}:{ip}").unwrap();
        assert_eq!(t.expand("ip", "203.0.113.7"), "resolve:ip:203.0.113.7");
        assert_eq!(t.prefix("ip"), "resolve:ip:");
        assert!(t.uses(Placeholder::Ip) && t.uses(Placeholder::Rule));
        assert!(!t.uses(Placeholder::ApiKey));
        let php = KeyTemplate::parse("resolve:{ip}").unwrap();
        assert_eq!(php.expand("ip", "203.0.113.7"), "resolve:203.0.113.7");
        assert_eq!(php.prefix("ip"), "resolve:");
        let login = KeyTemplate::parse("login:{api_key}").unwrap();
        assert_eq!(login.expand("k", "42"), "login:42");
        let site = KeyTemplate::parse("resolve:{rule}:*").unwrap();
        assert_eq!(site.expand("site", ""), "resolve:site:*");
        assert_eq!(site.prefix("site"), "resolve:site:*");
        assert_eq!(site.as_str(), "resolve:{rule}:*");
    }

    #[test]
    fn a_template_kept_or_shared_is_the_same_and_keys_are_compared_as_written() {
        static KEPT: std::sync::OnceLock<KeyTemplate> = std::sync::OnceLock::new();
        let text = "resolve:{rule}:{ip}";
        let kept = KEPT.get_or_init(|| KeyTemplate::parse_static(text).unwrap());
        let shared = KeyTemplate::shared(kept);
        assert!(*kept == KeyTemplate::parse(text).unwrap() && shared == *kept);
        assert_eq!(shared.expand("ip", "192.0.2.1"), "resolve:ip:192.0.2.1");
        let all = ["r:{rule}:{ip}", "r:{ip}", "r:ip:{ip}", "r{rule}{ip}"];
        let all = all.map(|t| KeyTemplate::parse(t).unwrap());
        let uses = [
            ("ip", "\0ip"),
            ("ip", "\0global"),
            ("day", "\0ip"),
            ("", "ip\0ip"),
        ];
        let keys: Vec<_> = all.iter().flat_map(|t| uses.map(|u| (t, u))).collect();
        for (a, ua) in &keys {
            for (b, ub) in &keys {
                let written = a.expand(ua.0, ua.1) == b.expand(ub.0, ub.1);
                assert_eq!(a.same_key(*ua, b, *ub), written, "{a} {ua:?} {b} {ub:?}");
            }
        }
    }

    #[test]
    fn the_longest_key_counts_the_longest_identity() {
        let t = KeyTemplate::parse("resolve:{rule}:{ip}").unwrap();
        assert_eq!(t.longest_key("ip"), "resolve:ip:".len() + 43);
        let longest_v6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128";
        assert_eq!(longest_v6.len(), Placeholder::Ip.longest_identity());
        let k = KeyTemplate::parse("k:{api_key}").unwrap();
        assert_eq!(k.longest_key("any"), 2 + 32);
    }

    #[test]
    fn keys_that_could_start_with_a_prefix_are_found() {
        let could = |template: &str, rule: &str, prefix: &str| {
            KeyTemplate::parse(template)
                .unwrap()
                .can_start_with(rule, prefix)
        };
        let cases = [
            // Text alone decides.
            ("resolve:~{ip}", "r", "resolve:~", true),
            ("resolve:{rule}:{ip}", "cache", "resolve:cache:", true),
            ("resolve:cache:x:{ip}", "r", "resolve:cache:", true),
            ("res{ip}", "r", "res", true),
            ("resolve:{rule}:{ip}", "ip", "resolve:cache:", false),
            ("login:{api_key}", "r", "resolve:", false),
            ("resolve:{rule}:*", "site", "resolve:site:*", true),
            ("resolve:{rule}:*", "site", "resolve:site:*x", false),
            // An address never holds `~`, `h` or `j`.
            ("resolve:{ip}", "r", "resolve:~", false),
            ("resolve:{ip}", "r", "resolve:cache:", false),
            ("resolve:{ip}", "r", "resolve:journal:", false),
            ("resolve:{ip}", "r", "resolve:ca", true),
            ("resolve:{ip}", "r", "resolve:1.2", true),
            // A key's name can be `cache`, but holds no `:`; what follows it can.
            ("resolve:{api_key}", "r", "resolve:cache:", false),
            ("resolve:{api_key}:x", "r", "resolve:cache:", true),
            ("resolve:{api_key}", "r", "resolve:admin-signin", true),
            ("resolve:{api_key}", "r", "resolve:admin-signin:", false),
            ("resolve:{api_key}", "r", "resolve:~", false),
            // An unlisted key's id: `sha256:` and hex.
            ("k:{api_key}", "r", "k:sha256:0a", true),
            ("k:{api_key}", "r", "k:sha256:0g", false),
            ("k:{api_key}!", "r", "k:sha256:0123456789abcdef!", true),
            ("k:{api_key}!", "r", "k:sha256:0123456789abcdef0!", false),
        ];
        for (template, rule, prefix, can) in cases {
            assert_eq!(
                could(template, rule, prefix),
                can,
                "{template} {rule} {prefix}"
            );
        }
        for template in [
            crate::support::defaults::KEY_TEMPLATE_IP,
            crate::support::defaults::KEY_TEMPLATE_API_KEY,
            crate::support::defaults::KEY_TEMPLATE_GLOBAL,
        ] {
            for prefix in RESERVED_PREFIXES {
                assert!(!could(template, "ip", prefix), "{template} {prefix}");
            }
        }
    }

    #[test]
    fn the_identity_is_found_in_a_key() {
        for (template, identity) in [
            ("resolve:{rule}:{ip}", "2001:db8:1:2::/64"),
            ("{ip}-{rule}-{ip}", "192.0.2.7"),
            ("resolve:{rule}:key:{api_key}", "partner"),
        ] {
            let t = KeyTemplate::parse(template).unwrap();
            let key = t.expand("ip", identity);
            assert_eq!(t.identity_in("ip", &key), Some(identity), "{template}");
            assert_eq!(t.identity_in("other", &key), None, "{template}");
        }
        let t = KeyTemplate::parse("resolve:{rule}:{ip}").unwrap();
        assert_eq!(t.identity_in("ip", "resolve:~refusals:192.0.2.7"), None);
        assert_eq!(t.identity_in("ip", "res"), None);
        assert_eq!(
            KeyTemplate::parse("resolve:{rule}:*")
                .unwrap()
                .identity_in("s", "resolve:s:*"),
            None
        );
    }

    #[test]
    fn mistakes_are_refused() {
        assert_eq!(KeyTemplate::parse(""), Err(TemplateError::Empty));
        assert_eq!(
            KeyTemplate::parse("resolve: {ip}"),
            Err(TemplateError::Character(' '))
        );
        assert_eq!(
            KeyTemplate::parse("résolve:{ip}"),
            Err(TemplateError::Character('é'))
        );
        assert_eq!(
            KeyTemplate::parse("resolve:{addr}"),
            Err(TemplateError::Unknown("addr".into()))
        );
        for bad in [
            "resolve:{ip",
            "resolve:ip}",
            "a{{ip}}",
            "{}x",
            "a{ip}{",
            "a}",
        ] {
            assert!(KeyTemplate::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            KeyTemplate::parse("{}").unwrap_err(),
            TemplateError::Unknown(String::new())
        );
    }

    #[test]
    fn reserved_keys_are_written_as_every_earlier_version_wrote_them() {
        let pinned = [
            (Reserved::BlockList, "resolve:~blocks"),
            (Reserved::BlockListLock, "resolve:~blocks-lock"),
            (
                Reserved::BlockedLog(&"192.0.2.7"),
                "resolve:~blocked-log:192.0.2.7",
            ),
            (
                Reserved::Refusals(&"2001:db8::/64"),
                "resolve:~refusals:2001:db8::/64",
            ),
            (
                Reserved::NetworkRefusals(&"192.0.2.0/24"),
                "resolve:~refusals-net:192.0.2.0/24",
            ),
            (Reserved::BlocksFullLog, "resolve:~blocks-full-log"),
            (
                Reserved::ShadowLog {
                    rule: &"burst",
                    client: &"192.0.2.7",
                },
                "resolve:~shadow-log:burst:192.0.2.7",
            ),
            (Reserved::HostList, "resolve:cache:hosts"),
            (Reserved::HostListFetching, "resolve:cache:hosts:fetching"),
            (Reserved::CachedAnswer("ab12"), "resolve:cache:ab12"),
            (Reserved::Job("ab12"), "resolve:cache:job:ab12"),
            (
                Reserved::JournalTotals(499_015),
                "resolve:journal:totals:499015",
            ),
            (
                Reserved::JournalClients(499_015),
                "resolve:journal:clients:499015",
            ),
            (Reserved::JournalNotes, "resolve:journal:notes"),
            (
                Reserved::ServiceHostList(&"alldebrid"),
                "resolve:cache:hosts@alldebrid",
            ),
            (
                Reserved::ServiceHostListFetching(&"alldebrid"),
                "resolve:cache:hosts@alldebrid:fetching",
            ),
        ];
        for (reserved, key) in pinned {
            assert_eq!(reserved.key(), key);
            // No rule's template can make it: every one starts with a reserved prefix.
            assert!(
                RESERVED_PREFIXES.iter().any(|p| key.starts_with(p)),
                "{key}"
            );
        }
    }
}

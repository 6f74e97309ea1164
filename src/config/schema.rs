//! The fields of the configuration file that the dashboard reads and writes, each named once by
//! its path through the file's JSON form (`raw`) and the kind of value it holds. The dashboard
//! reads `config.json` and edits its text (`json_text`) through these, never through names of
//! its own; a test follows every path through `raw`'s types, so a field renamed there without
//! being renamed here fails it.

use serde_json::Value;

use crate::config::json_text::Step;

/// One segment of a field's path: a member's name, or an item of a list (which one is given
/// when the path is used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg {
    Key(&'static str),
    Item,
}

/// The kind of value a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    /// A list of objects.
    List,
    Text,
    Number,
    /// A list of text, one entry per line of a text box.
    Texts,
}

/// A field of the file: where it is, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub path: &'static [Seg],
    pub kind: Kind,
}

use Seg::{Item, Key};

const fn field(path: &'static [Seg], kind: Kind) -> Field {
    Field { path, kind }
}

/// The provider section, a preset's or one written by hand.
pub const PROVIDER: Field = field(&[Key("provider")], Kind::Object);
/// A preset's name (`realdebrid`...).
pub const PROVIDER_PRESET: Field = field(&[Key("provider"), Key("preset")], Kind::Text);
/// A provider's kind written by hand (`echo`, `http`).
pub const PROVIDER_KIND: Field = field(&[Key("provider"), Key("kind")], Kind::Text);
/// The provider's API token.
pub const PROVIDER_TOKEN: Field = field(&[Key("provider"), Key("token")], Kind::Text);
/// The site-wide limits on paid calls.
pub const SPEND: Field = field(&[Key("spend")], Kind::List);
pub const SPEND_NAME: Field = field(&[Key("spend"), Item, Key("name")], Kind::Text);
pub const SPEND_LIMIT: Field = field(&[Key("spend"), Item, Key("limit")], Kind::Number);
pub const SPEND_WINDOW: Field = field(&[Key("spend"), Item, Key("window_secs")], Kind::Number);
/// What a limit counts: absent for requests, `bytes` for the sizes of the files served.
pub const SPEND_UNIT: Field = field(&[Key("spend"), Item, Key("unit")], Kind::Text);
/// The limits per client.
pub const RULES: Field = field(&[Key("rules")], Kind::List);
pub const RULE_NAME: Field = field(&[Key("rules"), Item, Key("name")], Kind::Text);
/// What a rule counts by (`ip`...).
pub const RULE_KEY: Field = field(&[Key("rules"), Item, Key("key")], Kind::Text);
pub const RULE_LIMIT: Field = field(&[Key("rules"), Item, Key("limit")], Kind::Number);
pub const RULE_WINDOW: Field = field(&[Key("rules"), Item, Key("window_secs")], Kind::Number);
pub const RULE_UNIT: Field = field(&[Key("rules"), Item, Key("unit")], Kind::Text);
/// The largest file the site serves, in bytes.
pub const MAX_FILE_BYTES: Field = field(&[Key("max_file_bytes")], Kind::Number);
/// How requests are read: the body's and the links' limits.
pub const REQUEST: Field = field(&[Key("request")], Kind::Object);
/// The most links one request may carry.
pub const REQUEST_MAX_LINKS: Field = field(&[Key("request"), Key("max_links")], Kind::Number);
/// The sites whose pages may ask.
pub const ALLOWED_ORIGINS: Field = field(&[Key("allowed_origins")], Kind::Texts);
pub const BLOCK: Field = field(&[Key("block")], Kind::Texts);
pub const ALLOW: Field = field(&[Key("allow")], Kind::Texts);
/// The dashboard's section: its password and what it signs.
pub const ADMIN: Field = field(&[Key("admin")], Kind::Object);
pub const ADMIN_PASSWORD_HASH: Field = field(&[Key("admin"), Key("password_hash")], Kind::Text);
/// The challenge before paid calls: its public site key and its secret (written, never shown).
pub const CHALLENGE: Field = field(&[Key("challenge")], Kind::Object);
pub const CHALLENGE_SITE_KEY: Field = field(&[Key("challenge"), Key("site_key")], Kind::Text);
pub const CHALLENGE_SECRET: Field = field(&[Key("challenge"), Key("secret")], Kind::Text);

/// Every field above, each container before the fields inside it.
pub const ALL: [Field; 26] = [
    PROVIDER,
    PROVIDER_PRESET,
    PROVIDER_KIND,
    PROVIDER_TOKEN,
    SPEND,
    SPEND_NAME,
    SPEND_LIMIT,
    SPEND_WINDOW,
    SPEND_UNIT,
    RULES,
    RULE_NAME,
    RULE_KEY,
    RULE_LIMIT,
    RULE_WINDOW,
    RULE_UNIT,
    MAX_FILE_BYTES,
    REQUEST,
    REQUEST_MAX_LINKS,
    ALLOWED_ORIGINS,
    BLOCK,
    ALLOW,
    ADMIN,
    ADMIN_PASSWORD_HASH,
    CHALLENGE,
    CHALLENGE_SITE_KEY,
    CHALLENGE_SECRET,
];

/// A list of limits and the fields of its entries: `spend` (no key, the whole site) or `rules`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub list: Field,
    pub name: Field,
    /// What an entry counts by; None for a list whose entries count the whole site.
    pub key: Option<Field>,
    pub limit: Field,
    pub window: Field,
    /// What an entry counts (`bytes`, or requests when absent).
    pub unit: Field,
}

/// The site-wide limits on paid calls.
pub const SPEND_LIMITS: Limits = Limits {
    list: SPEND,
    name: SPEND_NAME,
    key: None,
    limit: SPEND_LIMIT,
    window: SPEND_WINDOW,
    unit: SPEND_UNIT,
};

/// The limits per client.
pub const RULE_LIMITS: Limits = Limits {
    list: RULES,
    name: RULE_NAME,
    key: Some(RULE_KEY),
    limit: RULE_LIMIT,
    window: RULE_WINDOW,
    unit: RULE_UNIT,
};

static NULL: Value = Value::Null;

impl Field {
    /// The member's own name: the last name of its path.
    pub fn name(self) -> &'static str {
        self.path
            .iter()
            .rev()
            .find_map(|s| match s {
                Key(k) => Some(*k),
                Item => None,
            })
            .unwrap_or_default()
    }

    /// The top-level section the field is in.
    pub fn section(self) -> &'static str {
        match self.path.first() {
            Some(Key(k)) => k,
            _ => "",
        }
    }

    /// The steps to the field in the text, its lists' items at `items`, in order (an item not
    /// given is the first).
    pub fn at(self, items: &[usize]) -> Vec<Step<'static>> {
        let mut items = items.iter();
        self.path
            .iter()
            .map(|s| match s {
                Key(k) => Step::Key(k),
                Item => Step::Index(items.next().copied().unwrap_or(0)),
            })
            .collect()
    }

    /// The value of the field in `json`, its lists' items at `items`; None where it is not
    /// written.
    pub fn find<'v>(self, json: &'v Value, items: &[usize]) -> Option<&'v Value> {
        self.at(items).iter().try_fold(json, |v, step| match step {
            Step::Key(k) => v.get(k),
            Step::Index(i) => v.get(i),
        })
    }

    /// The value of the field in `json` (null where it is not written).
    pub fn of(self, json: &Value) -> &Value {
        self.find(json, &[]).unwrap_or(&NULL)
    }

    /// The value of the field of item `item` of its list in `json` (null where it is not).
    pub fn of_item(self, json: &Value, item: usize) -> &Value {
        self.find(json, &[item]).unwrap_or(&NULL)
    }

    /// An edit's path to the field (of the first item of a list).
    pub fn steps(self) -> Vec<Step<'static>> {
        self.at(&[])
    }

    /// An edit's path to item `i` of the list the field is (one past the last appends).
    pub fn item(self, i: usize) -> Vec<Step<'static>> {
        let mut steps = self.steps();
        steps.push(Step::Index(i));
        steps
    }
}

/// The unit of a limit that counts bytes (requests are the default, written by no unit).
pub const BYTES: &str = "bytes";

impl Limits {
    /// A new entry of the list: its fields by name, with `key` where the list's entries have
    /// one.
    pub fn entry(&self, name: &str, key: &str, limit: u64, window: u64) -> Value {
        let mut m = serde_json::Map::new();
        m.insert(self.name.name().into(), name.into());
        if let Some(k) = self.key {
            m.insert(k.name().into(), key.into());
        }
        m.insert(self.limit.name().into(), limit.into());
        m.insert(self.window.name().into(), window.into());
        Value::Object(m)
    }

    /// A new entry that counts bytes: as [`Limits::entry`], with the unit.
    pub fn bytes_entry(&self, name: &str, key: &str, limit: u64, window: u64) -> Value {
        let mut v = self.entry(name, key, limit, window);
        v[self.unit.name()] = BYTES.into();
        v
    }

    /// Whether entry `i` counts bytes.
    pub fn counts_bytes(&self, json: &Value, i: usize) -> bool {
        self.unit.of_item(json, i).as_str() == Some(BYTES)
    }
}

/// The provider section of a preset: its name and the token.
pub fn preset_section(name: &str, token: &str) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(PROVIDER_PRESET.name().into(), name.into());
    m.insert(PROVIDER_TOKEN.name().into(), token.into());
    Value::Object(m)
}

/// The provider section of the echo provider.
pub fn echo_section() -> Value {
    let mut m = serde_json::Map::new();
    m.insert(PROVIDER_KIND.name().into(), "echo".into());
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::json_text;
    use crate::config::provider::raw::RawProvider;
    use crate::config::provider::site_rules::raw_site_rules;
    use crate::config::raw::RawConfig;

    /// A file with every field of `fields` written, with a value of its kind.
    fn sample(fields: &[Field]) -> String {
        let mut text = "{}".to_owned();
        for f in fields {
            let value = match f.kind {
                Kind::Object => serde_json::json!({}),
                Kind::List => serde_json::json!([]),
                Kind::Text if f.name() == "unit" => serde_json::json!(BYTES),
                Kind::Text => serde_json::json!("x"),
                Kind::Number => serde_json::json!(60),
                Kind::Texts => serde_json::json!(["x"]),
            };
            if f.find(&serde_json::from_str(&text).unwrap(), &[]).is_none() {
                text = json_text::set(&text, &f.steps(), &value).unwrap();
            }
        }
        text
    }

    /// Whether the file's JSON form reads `text`, down to the sections held as plain JSON.
    fn read_by_raw(text: &str) -> Result<(), String> {
        let _: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let json: Value = serde_json::from_str(text).unwrap();
        if let Some(provider) = PROVIDER.find(&json, &[]) {
            let _: RawProvider =
                serde_json::from_value(provider.clone()).map_err(|e| e.to_string())?;
        }
        if let Some(spend) = SPEND.find(&json, &[]) {
            raw_site_rules(spend.clone(), "spend").map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    #[test]
    fn every_path_is_a_field_of_the_files_json_form() {
        let text = sample(&ALL);
        read_by_raw(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let json: Value = serde_json::from_str(&text).unwrap();
        for f in ALL {
            assert!(f.find(&json, &[0]).is_some(), "{f:?} in {text}");
            assert!(crate::config::raw::FIELDS.contains(&f.section()), "{f:?}");
        }
        // The check catches a name the file's form does not have, at any depth.
        for wrong in [
            field(&[Key("rules"), Item, Key("limits")], Kind::Number),
            field(&[Key("spend"), Item, Key("windows")], Kind::Number),
            field(&[Key("provider"), Key("tokens")], Kind::Text),
            field(&[Key("admin"), Key("password")], Kind::Text),
            field(&[Key("origins")], Kind::Texts),
        ] {
            let mut fields = ALL.to_vec();
            fields.push(wrong);
            assert!(read_by_raw(&sample(&fields)).is_err(), "{wrong:?}");
        }
        // And a kind the form does not read there.
        let mut fields = ALL.to_vec();
        fields.insert(0, field(&[Key("block")], Kind::Number));
        assert!(read_by_raw(&sample(&fields)).is_err());
    }

    #[test]
    fn an_entry_of_a_list_of_limits_is_read_as_one() {
        let json = serde_json::json!({
            "provider": preset_section("realdebrid", "t"),
            "spend": [SPEND_LIMITS.entry("day", "ip", 5, 86_400)],
            "rules": [RULE_LIMITS.entry("ip", "ip", 30, 60),
                      RULE_LIMITS.bytes_entry("ip-bytes", "ip", 20_000_000_000, 86_400)],
            "max_file_bytes": 10_000_000_000u64,
        });
        assert!(RULE_LIMITS.counts_bytes(&json, 1) && !RULE_LIMITS.counts_bytes(&json, 0));
        assert_eq!(MAX_FILE_BYTES.of(&json), 10_000_000_000u64);
        read_by_raw(&json.to_string()).unwrap();
        let echo = serde_json::json!({"provider": echo_section()});
        read_by_raw(&echo.to_string()).unwrap();
        assert_eq!(PROVIDER_KIND.of(&echo), "echo");
        assert_eq!(RULE_LIMIT.of_item(&json, 0), 30);
        assert_eq!(RULE_KEY.of_item(&json, 0), "ip");
        assert!(SPEND.find(&json, &[]).is_some() && ADMIN.find(&json, &[]).is_none());
        assert_eq!(
            RULE_WINDOW.at(&[2]),
            [Step::Key("rules"), Step::Index(2), Step::Key("window_secs")]
        );
        assert_eq!(RULES.item(1), [Step::Key("rules"), Step::Index(1)]);
        assert_eq!(PROVIDER_TOKEN.name(), "token");
        assert_eq!(RULE_LIMIT.section(), "rules");
    }
}

//! The configuration file's JSON text read as written, one scanner for two uses: where a field
//! sits (its line and column, so that a message about `rules[1].limit` points the owner at the
//! place to fix), and a value set, added or taken out at a path with everything else of the
//! owner's file (its order, spacing, other fields) left byte for byte as it was. Pure: text in,
//! text (or a place) out.

use std::fmt;

use serde_json::Value;

/// One step of a path: a member of an object, or an item of a list (for an edit, an index one
/// past the last appends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The steps of a field as errors name it: `store.kind`, `rules[1].limit`,
/// `provider.steps[0].headers.Authorization`. None for a name that is not a path (a syntax
/// error's "line 3 column 7").
pub fn field_path(field: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    for part in field.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(at) => (&part[..at], &part[at..]),
            None => (part, ""),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return None;
        }
        out.push(Step::Key(key));
        while let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']')?;
            out.push(Step::Index(inner[..close].parse().ok()?));
            rest = &inner[close + 1..];
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

/// 1-based line and column (in characters) where `field` is written in `text`: its key, or
/// for a list element its value. Never fails: a field that is not there (or text that is not
/// JSON) is simply not found.
pub fn of_field(text: &str, field: &str) -> Option<(usize, usize)> {
    let at = place(text, &field_path(field)?)?;
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Some((line, column))
}

/// The byte where the path is written: the last member's name, or the last item's value.
fn place(text: &str, path: &[Step<'_>]) -> Option<usize> {
    let b = text.as_bytes();
    let (last, parents) = path.split_last()?;
    let mut at = skip_ws(b, 0);
    for step in parents {
        let (items, names) = children(b, at).ok()?;
        at = items[position(&items, names.as_deref(), *step)?].value_start;
    }
    let (items, names) = children(b, at).ok()?;
    let item = items[position(&items, names.as_deref(), *last)?];
    Some(match last {
        Step::Key(_) => item.start,
        Step::Index(_) => item.value_start,
    })
}

/// Why an edit could not be made: the text is not one JSON object, or the path cannot be
/// followed through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditError {
    /// The text does not parse: serde's words.
    NotJson(String),
    /// The text is JSON but not an object.
    NotObject,
    /// A path of no steps: the whole file cannot be taken out.
    WholeFile,
    /// An index past the end of a list (one past the last appends).
    NoItem(usize),
    /// An index into a list that is not there (only the first item can make it).
    NoList,
    /// The path goes through a value that is not an object or a list.
    NotContainer,
    /// The path names a member of a list, or an item of an object.
    WrongStep,
    /// The text breaks off or is malformed where the scanner reads it.
    Malformed(&'static str),
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditError::NotJson(e) => write!(f, "the file is not JSON: {e}"),
            EditError::NotObject => f.write_str("the file is not one JSON object"),
            EditError::WholeFile => f.write_str("the whole file cannot be taken out"),
            EditError::NoItem(i) => write!(f, "no item {i} in the list"),
            EditError::NoList => f.write_str("no such item in a list that is not there"),
            EditError::NotContainer => {
                f.write_str("the path goes through a value that is not an object or a list")
            }
            EditError::WrongStep => {
                f.write_str("the path names a member of a list, or an item of an object")
            }
            EditError::Malformed(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for EditError {}

/// A change: the value at a path set (added where missing), or taken out (`None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Edit<'a> {
    pub path: Vec<Step<'a>>,
    pub value: Option<Value>,
}

/// Applies the edits in order to `text`, a JSON object.
pub fn apply(text: &str, edits: &[Edit<'_>]) -> Result<String, EditError> {
    let mut text = text.to_owned();
    for edit in edits {
        text = match &edit.value {
            Some(v) => set(&text, &edit.path, v)?,
            None => remove(&text, &edit.path)?,
        };
    }
    Ok(text)
}

/// A member of an object or an item of a list, by its byte spans.
#[derive(Debug, Clone, Copy)]
struct Item {
    /// Where the member's name (or the item) starts.
    start: usize,
    value_start: usize,
    value_end: usize,
}

/// The text with the value at `path` set to `value`: replaced where it is, added at the end of
/// its object (or list) where it is not, with the objects on the way made as needed.
pub fn set(text: &str, path: &[Step<'_>], value: &Value) -> Result<String, EditError> {
    check(text)?;
    let b = text.as_bytes();
    let mut at = skip_ws(b, 0);
    for (depth, step) in path.iter().enumerate() {
        let (items, names) = children(b, at)?;
        match position(&items, names.as_deref(), *step) {
            Some(i) => at = items[i].value_start,
            None => {
                if !fits(names.as_deref(), *step) {
                    return Err(EditError::WrongStep);
                }
                if let Step::Index(i) = step
                    && *i != items.len()
                {
                    return Err(EditError::NoItem(*i));
                }
                let rest = nested(&path[depth + 1..], value)?;
                return Ok(insert(text, at, &items, *step, &rest));
            }
        }
    }
    let end = value_end(b, at)?;
    let written = write(value, &line_indent(text, at));
    Ok(format!("{}{written}{}", &text[..at], &text[end..]))
}

/// The text without the value at `path` (and its name and comma); a path that is not there
/// leaves the text as it is.
pub fn remove(text: &str, path: &[Step<'_>]) -> Result<String, EditError> {
    check(text)?;
    let Some((last, parents)) = path.split_last() else {
        return Err(EditError::WholeFile);
    };
    let b = text.as_bytes();
    let mut at = skip_ws(b, 0);
    for step in parents {
        let (items, names) = children(b, at)?;
        match position(&items, names.as_deref(), *step) {
            Some(i) => at = items[i].value_start,
            None => return Ok(text.to_owned()),
        }
    }
    let (items, names) = children(b, at)?;
    let Some(i) = position(&items, names.as_deref(), *last) else {
        return Ok(text.to_owned());
    };
    let (from, to) = if i > 0 {
        (items[i - 1].value_end, items[i].value_end)
    } else if let Some(next) = items.get(1) {
        (items[0].start, next.start)
    } else {
        (items[0].start, items[0].value_end)
    };
    Ok(format!("{}{}", &text[..from], &text[to..]))
}

/// Where `step` stands among a value's children (`names`: an object's keys, in order; None for
/// a list): a name only in an object, an index only in a list.
fn position(items: &[Item], names: Option<&[String]>, step: Step<'_>) -> Option<usize> {
    match (step, names) {
        (Step::Key(k), Some(names)) => names.iter().position(|n| n == k),
        (Step::Index(i), None) => (i < items.len()).then_some(i),
        _ => None,
    }
}

/// Whether `step` can name a child of the value: a name in an object, an index in a list.
fn fits(names: Option<&[String]>, step: Step<'_>) -> bool {
    matches!(step, Step::Key(_)) == names.is_some()
}

fn check(text: &str) -> Result<(), EditError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => Ok(()),
        Ok(_) => Err(EditError::NotObject),
        Err(e) => Err(EditError::NotJson(e.to_string())),
    }
}

/// `value` wrapped in the objects the rest of a path names (a path's missing part).
fn nested(rest: &[Step<'_>], value: &Value) -> Result<Value, EditError> {
    let mut v = value.clone();
    for step in rest.iter().rev() {
        v = match step {
            Step::Key(k) => {
                let mut m = serde_json::Map::new();
                m.insert((*k).to_owned(), v);
                Value::Object(m)
            }
            Step::Index(0) => Value::Array(vec![v]),
            Step::Index(_) => return Err(EditError::NoList),
        };
    }
    Ok(v)
}

/// The text with a new member (or item) added at the end of the object (or list) at `at`, on
/// its own line like the last one when that one is on a line of its own.
fn insert(text: &str, at: usize, items: &[Item], step: Step<'_>, value: &Value) -> String {
    let close = value_end(text.as_bytes(), at).map_or(at + 1, |end| end - 1);
    let name = match step {
        Step::Key(k) => format!("{}: ", Value::String(k.to_owned())),
        Step::Index(_) => String::new(),
    };
    if let Some(last) = items.last() {
        let own_line = text[..last.start]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .trim()
            .is_empty();
        let indent = line_indent(text, last.start);
        let sep = if own_line {
            format!(",\n{indent}")
        } else {
            ", ".to_owned()
        };
        return format!(
            "{}{sep}{name}{}{}",
            &text[..last.value_end],
            write(value, &indent),
            &text[last.value_end..]
        );
    }
    let outer = line_indent(text, at);
    let inner = format!("{outer}  ");
    if text[..at].trim().is_empty() || text[at..close].contains('\n') {
        format!(
            "{}\n{inner}{name}{}\n{outer}{}",
            &text[..at + 1],
            write(value, &inner),
            &text[close..]
        )
    } else {
        format!(
            "{}{name}{}{}",
            &text[..at + 1],
            write(value, &inner),
            &text[close..]
        )
    }
}

/// The spaces that open the line `at` is on.
fn line_indent(text: &str, at: usize) -> String {
    let line = text[..at].rsplit('\n').next().unwrap_or("");
    line.chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// A value as JSON: on one line when short, else pretty, its lines after the first indented to
/// stand under the line it starts on.
fn write(value: &Value, indent: &str) -> String {
    let flat = value.to_string();
    if flat.len() <= 72 {
        return flat;
    }
    let pretty = serde_json::to_string_pretty(value).unwrap_or(flat);
    pretty.replace('\n', &format!("\n{indent}"))
}

/// The members of the object (with their names) or the items of the list (names: None) whose
/// first byte is at `at`.
fn children(b: &[u8], at: usize) -> Result<(Vec<Item>, Option<Vec<String>>), EditError> {
    let (close, object) = match b.get(at) {
        Some(b'{') => (b'}', true),
        Some(b'[') => (b']', false),
        _ => return Err(EditError::NotContainer),
    };
    let mut items = Vec::new();
    let mut names = Vec::new();
    let mut i = skip_ws(b, at + 1);
    if b.get(i) == Some(&close) {
        return Ok((items, object.then_some(names)));
    }
    loop {
        let start = i;
        if object {
            let end = value_end(b, i)?;
            let name: String = serde_json::from_slice(&b[i..end])
                .map_err(|_| EditError::Malformed("a name that is not text"))?;
            names.push(name);
            i = skip_ws(b, end);
            if b.get(i) != Some(&b':') {
                return Err(EditError::Malformed("a name without a value"));
            }
            i = skip_ws(b, i + 1);
        }
        let value_start = i;
        let value_end = value_end(b, i)?;
        items.push(Item {
            start,
            value_start,
            value_end,
        });
        i = skip_ws(b, value_end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(c) if *c == close => return Ok((items, object.then_some(names))),
            _ => return Err(EditError::Malformed("a list or object that does not close")),
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Where the value starting at `at` ends (one past its last byte).
fn value_end(b: &[u8], at: usize) -> Result<usize, EditError> {
    match b.get(at) {
        Some(b'"') => {
            let mut i = at + 1;
            while let Some(c) = b.get(i) {
                match c {
                    b'\\' => i += 2,
                    b'"' => return Ok(i + 1),
                    _ => i += 1,
                }
            }
            Err(EditError::Malformed("a text that does not end"))
        }
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(c) = b.get(i) {
                match c {
                    b'"' => {
                        i = value_end(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Err(EditError::Malformed("a list or object that does not close"))
        }
        Some(_) => {
            let mut i = at;
            while let Some(c) = b.get(i) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                i += 1;
            }
            Ok(i)
        }
        None => Err(EditError::Malformed("a value is missing")),
    }
}

#[cfg(test)]
mod tests;

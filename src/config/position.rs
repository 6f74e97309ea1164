//! Where a field of the configuration file is written: its line and column, so that a message
//! about `rules[1].limit` points the owner at the place to fix. Reads text that is already
//! known to be JSON, following one path; it never fails, it only finds or does not.

/// One step of a field's path.
#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The steps of a field as errors name it: `store.kind`, `rules[1].limit`,
/// `provider.steps[0].headers.Authorization`. None for a name that is not a path (a syntax
/// error's "line 3 column 7").
fn steps(field: &str) -> Option<Vec<Step<'_>>> {
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
/// for a list element its value.
pub fn of_field(text: &str, field: &str) -> Option<(usize, usize)> {
    let steps = steps(field)?;
    let at = find(text.as_bytes(), 0, &steps)?;
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Some((line, column))
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// The end of the string starting at `i` (a `"`), and its text (escapes left as written).
fn string(b: &[u8], i: usize) -> Option<(usize, &[u8])> {
    let mut j = i + 1;
    loop {
        match *b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some((j + 1, &b[i + 1..j])),
            _ => j += 1,
        }
    }
}

/// The end of the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string(b, i).map(|(end, _)| end),
        open @ (b'{' | b'[') => {
            let close = if open == b'{' { b'}' } else { b']' };
            let mut j = skip_space(b, i + 1);
            if b.get(j) == Some(&close) {
                return Some(j + 1);
            }
            loop {
                if open == b'{' {
                    j = string(b, j)?.0;
                    j = skip_space(b, j);
                    j = skip_space(b, j + 1); // the ':'
                }
                j = skip_space(b, skip_value(b, j)?);
                match *b.get(j)? {
                    b',' => j = skip_space(b, j + 1),
                    c if c == close => return Some(j + 1),
                    _ => return None,
                }
            }
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// Where the path `steps` leads from the value at `i`.
fn find(b: &[u8], i: usize, steps: &[Step<'_>]) -> Option<usize> {
    let i = skip_space(b, i);
    let Some((first, rest)) = steps.split_first() else {
        return Some(i);
    };
    match first {
        Step::Key(key) => {
            if b.get(i) != Some(&b'{') {
                return None;
            }
            let mut j = skip_space(b, i + 1);
            while b.get(j) == Some(&b'"') {
                let (after, name) = string(b, j)?;
                let value = skip_space(b, skip_space(b, after) + 1);
                if name == key.as_bytes() {
                    return if rest.is_empty() {
                        Some(j)
                    } else {
                        find(b, value, rest)
                    };
                }
                j = skip_space(b, skip_value(b, value)?);
                if b.get(j) != Some(&b',') {
                    return None;
                }
                j = skip_space(b, j + 1);
            }
            None
        }
        Step::Index(n) => {
            if b.get(i) != Some(&b'[') {
                return None;
            }
            let mut j = skip_space(b, i + 1);
            for _ in 0..*n {
                j = skip_space(b, skip_value(b, j)?);
                if b.get(j) != Some(&b',') {
                    return None;
                }
                j = skip_space(b, j + 1);
            }
            if b.get(j) == Some(&b']') {
                return None;
            }
            find(b, j, rest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"{
  "provider": {"preset": "realdebrid", "token": "x\"y"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": 5, "window_secs": 60},
    {"name": "day", "key": "ip",
     "limit": 0, "window_secs": 86400}
  ],
  "store": {"kind": "mysq", "steps": [[1, 2], {"url": "u"}]}
}"#;

    #[test]
    fn finds_keys_and_list_elements() {
        assert_eq!(of_field(TEXT, "provider"), Some((2, 3)));
        assert_eq!(of_field(TEXT, "provider.token"), Some((2, 40)));
        assert_eq!(of_field(TEXT, "rules[1]"), Some((5, 5)));
        assert_eq!(of_field(TEXT, "rules[1].limit"), Some((6, 6)));
        assert_eq!(of_field(TEXT, "rules[0].name"), Some((4, 6)));
        assert_eq!(of_field(TEXT, "store.kind"), Some((8, 13)));
        assert_eq!(of_field(TEXT, "store.steps[1].url"), Some((8, 48)));
    }

    #[test]
    fn what_is_not_there_is_not_found() {
        for field in [
            "nothing",
            "rules[2]",
            "rules[0].nothing",
            "store.kind.deeper",
            "line 3 column 7",
            "rules[x]",
            "",
        ] {
            assert_eq!(of_field(TEXT, field), None, "{field}");
        }
        assert_eq!(of_field("not json", "a"), None);
        assert_eq!(of_field("{\"a\": [1, 2", "a[5]"), None);
    }
}

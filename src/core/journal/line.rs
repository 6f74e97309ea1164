//! An entry as one line of text and back: how entries wait in a spool file (`journal-spool/` in
//! the data directory) until a request writes them to the store. A JSON array per line,
//! `[hour, [[total, n], ...], [[client, "admitted"|"refused", n], ...]]`, so that any client
//! text (an IPv6 prefix, a key's name) survives as it is.

use super::{ClientCount, Entry};

/// What a line is read into before it is checked.
type Raw = (u32, Vec<(String, u64)>, Vec<(String, String, u64)>);

impl Entry {
    /// The entry as one line, its newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let clients: Vec<(&str, &str, u64)> = self
            .clients
            .iter()
            .map(|(c, count, n)| (c.as_str(), count.name(), *n))
            .collect();
        // Strings and numbers only: serialising cannot fail.
        let mut line = serde_json::to_vec(&(self.hour, &self.totals, clients)).unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// The line without its hour: all that follows `[HOUR`, from the comma to the newline.
    /// The same entry in another hour is [`Entry::line_in_hour`] of it.
    pub fn line_after_hour(&self) -> Vec<u8> {
        let line = self.to_line();
        let comma = line.iter().position(|&b| b == b',').unwrap_or(line.len());
        line[comma..].to_vec()
    }

    /// The line of an entry in the hour written `hour` (in decimal) whose line after its hour
    /// is `after` ([`Entry::line_after_hour`]).
    pub fn line_in_hour(hour: &str, after: &[u8]) -> Vec<u8> {
        let mut line = Vec::with_capacity(1 + hour.len() + after.len());
        line.push(b'[');
        line.extend_from_slice(hour.as_bytes());
        line.extend_from_slice(after);
        line
    }

    /// The entry a line holds (with or without its newline); None when it is not one, e.g.
    /// the half of a line a full disk cut short.
    pub fn from_line(line: &[u8]) -> Option<Entry> {
        let (hour, totals, clients): Raw = serde_json::from_slice(line).ok()?;
        let clients = clients
            .into_iter()
            .map(|(client, count, n)| Some((client, ClientCount::from_name(&count)?, n)))
            .collect::<Option<Vec<_>>>()?;
        Some(Entry {
            hour,
            totals,
            clients,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_comes_back_from_its_line_whatever_its_texts() {
        let entry = Entry {
            hour: 494_000,
            totals: vec![
                ("requests".into(), 3),
                ("refused:ip \"x\"\n".into(), 2),
                ("bytes".into(), 12_400_000_000),
            ],
            clients: vec![
                ("2001:db8::/64".into(), ClientCount::Refused, 2),
                ("key:caf\u{e9},1".into(), ClientCount::Admitted, 1),
                ("key:caf\u{e9},1".into(), ClientCount::Bytes, 12_400_000_000),
            ],
        };
        let line = entry.to_line();
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        assert!(line.ends_with(b"\n"));
        assert_eq!(Entry::from_line(&line), Some(entry.clone()));
        assert_eq!(Entry::from_line(line.trim_ascii_end()), Some(entry));
        let empty = Entry {
            hour: 1,
            totals: vec![],
            clients: vec![],
        };
        assert_eq!(Entry::from_line(&empty.to_line()), Some(empty));
    }

    #[test]
    fn an_entry_is_written_again_in_another_hour_from_its_line_after_the_hour() {
        let entry = Entry {
            hour: 494_000,
            totals: vec![("requests".into(), 1), ("refused:ip, \"day\"".into(), 1)],
            clients: vec![("2001:db8::/64".into(), ClientCount::Refused, 1)],
        };
        let after = entry.line_after_hour();
        assert!(
            after.starts_with(b",[["),
            "{}",
            String::from_utf8_lossy(&after)
        );
        assert_eq!(Entry::line_in_hour("494000", &after), entry.to_line());
        let later = Entry {
            hour: 494_001,
            ..entry.clone()
        };
        assert_eq!(Entry::line_in_hour("494001", &after), later.to_line());
        let empty = Entry {
            hour: 3,
            totals: vec![],
            clients: vec![],
        };
        assert_eq!(
            Entry::line_in_hour("3", &empty.line_after_hour()),
            empty.to_line()
        );
    }

    #[test]
    fn a_cut_or_foreign_line_is_no_entry() {
        let line = Entry {
            hour: 7,
            totals: vec![("requests".into(), 1)],
            clients: vec![("192.0.2.1".into(), ClientCount::Admitted, 1)],
        }
        .to_line();
        for cut in 0..line.len() - 1 {
            assert_eq!(Entry::from_line(&line[..cut]), None, "cut at {cut}");
        }
        let not_entries: [&[u8]; 5] = [
            br#"[7,[],[["a","maybe",1]]]"#,
            br#"[-1,[],[]]"#,
            br#"[7,[["a",-1]],[]]"#,
            br#"{"hour":7}"#,
            b"\xff\xfe",
        ];
        for line in not_entries {
            let shown = String::from_utf8_lossy(line);
            assert_eq!(Entry::from_line(line), None, "{shown}");
        }
    }
}

//! A resolved link, as the provider gave it: what the cache keeps and the answer shows. A
//! folder or a multi-file link resolves to several files, every one of them passed on.

/// One file of an answer: its download URL and, when the provider gave it, its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLink {
    pub download: String,
    pub filename: Option<String>,
}

/// A resolved link, as the provider gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The download URL (the first file's, for several).
    pub download: String,
    pub filename: Option<String>,
    /// Every file of a multi-file answer, `download` first; empty for one file.
    pub files: Vec<FileLink>,
    /// The file's size in bytes, as the service reported it (`filesize`); None when it gave
    /// none, or 0 (Real-Debrid's word for unknown). For several files, their sum when the
    /// service gave it as one figure.
    pub size: Option<u64>,
}

impl Resolved {
    /// The answer's files: every one of several, or the one.
    pub fn all_files(&self) -> Vec<FileLink> {
        if self.files.is_empty() {
            vec![FileLink {
                download: self.download.clone(),
                filename: self.filename.clone(),
            }]
        } else {
            self.files.clone()
        }
    }

    /// Whether a download link or a file name holds any of `forms` (see
    /// [`crate::support::secret::all_forms`]): such an answer is never passed on.
    pub fn holds_any(&self, forms: &[String]) -> bool {
        self.all_files().iter().any(|f| {
            crate::support::secret::contains_any(&f.download, forms)
                || f.filename
                    .as_deref()
                    .is_some_and(|n| crate::support::secret::contains_any(n, forms))
        })
    }
}

/// A file's size from the service's text: a whole number of bytes; 0 (Real-Debrid's word for
/// unknown), anything else or nothing is None.
pub fn size_from(text: Option<&String>) -> Option<u64> {
    text.and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_in_any_file_is_found() {
        let file = |d: &str, n: Option<&str>| FileLink {
            download: d.into(),
            filename: n.map(str::to_owned),
        };
        let mut r = Resolved {
            size: None,
            download: "https://dl.example/1".into(),
            filename: None,
            files: vec![
                file("https://dl.example/1", None),
                file("https://dl.example/2", Some("two")),
            ],
        };
        let forms = vec!["s3cret".to_owned()];
        assert!(!r.holds_any(&forms));
        r.files[1].filename = Some("two-s3cret".into());
        assert!(r.holds_any(&forms));
        r.files[1] = file("https://dl.example/s3cret", None);
        assert!(r.holds_any(&forms));
        let one = Resolved {
            size: None,
            download: "https://dl.example/s3cret".into(),
            filename: None,
            files: Vec::new(),
        };
        assert!(one.holds_any(&forms));
        assert_eq!(one.all_files().len(), 1);
    }
}

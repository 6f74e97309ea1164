//! A resolved link, as the provider gave it: what the cache keeps and the answer shows.

/// A resolved link, as the provider gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub download: String,
    pub filename: Option<String>,
}

impl Resolved {
    /// Whether the download link or the file name holds any of `forms` (see
    /// [`crate::support::secret::all_forms`]): such an answer is never passed on.
    pub fn holds_any(&self, forms: &[String]) -> bool {
        crate::support::secret::contains_any(&self.download, forms)
            || self
                .filename
                .as_deref()
                .is_some_and(|f| crate::support::secret::contains_any(f, forms))
    }
}

//! What the owner shows visitors around the form (the site's name, a contact, a terms link), as
//! the pages and `?about=1` show it: plain values, checked where the configuration is read.

use serde::Serialize;
use serde::ser::Serializer;

/// The footer the owner set; every part optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Page {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact: Option<Contact>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terms_url: Option<String>,
}

/// How visitors reach the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contact {
    Email(String),
    /// An https URL (a contact form, a forum thread...).
    Url(String),
}

impl Contact {
    /// As the owner wrote it.
    pub fn text(&self) -> &str {
        match self {
            Contact::Email(a) | Contact::Url(a) => a,
        }
    }

    /// Where a link to it goes: `mailto:` for an address.
    pub fn href(&self) -> String {
        match self {
            Contact::Email(a) => format!("mailto:{a}"),
            Contact::Url(u) => u.clone(),
        }
    }
}

impl Serialize for Contact {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.text())
    }
}

impl Page {
    /// True when there is nothing to show.
    pub fn is_empty(&self) -> bool {
        self.site_name.is_none() && self.contact.is_none() && self.terms_url.is_none()
    }
}

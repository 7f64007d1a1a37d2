//! isobench's web UI and HTTP API (`isobench serve`).
#![deny(missing_docs)]

/// The UI's page.
pub const INDEX_HTML: &str = include_str!("../ui/index.html");

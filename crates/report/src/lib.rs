//! Rendering of isobench results: the terminal report, the self-contained HTML report,
//! JSON/CSV/Markdown exports and the list of runs.
//!
//! Why a crate of its own: rendering only reads results. Every function here takes the
//! [`Results`](isobench_results::Results) document computed from the store (or the store's
//! run list) and returns text or bytes, without the engine that computed it, so the report at the end of `isobench run`, `isobench
//! show` and the exports always agree, and each is snapshot-tested on fixed results.
#![deny(missing_docs)]

pub mod compare;
pub mod export;
mod grid;
pub mod html;
mod names;
pub mod runs;
pub mod sections;
pub mod table;

pub use export::{serialize, Format};
pub use html::{html_comparison, html_report};
pub use runs::render_runs;
pub use sections::{csv_section, markdown_sections, render_sections};
pub use table::{render, Style};

//! Rendering of isobench results: the terminal report, JSON/CSV/Markdown exports, the list
//! of runs, and the live progress display.
//!
//! Why a crate of its own: rendering only reads results. Every function here takes the
//! [`Results`](isobench_experiment::Results) computed from the store (or the store's run
//! list) and returns text or bytes, so the report at the end of `isobench run`, `isobench
//! show` and the exports always agree, and each is snapshot-tested on fixed results.
#![deny(missing_docs)]

pub mod export;
pub mod live;
pub mod runs;
pub mod sections;
pub mod table;

pub use export::{serialize, Format};
pub use live::LiveProgress;
pub use runs::render_runs;
pub use sections::{csv_section, markdown_sections, render_sections};
pub use table::{render, Style};

//! isobench results as renderers read them.
//!
//! Every experiment kind reports what it found as [`Section`]s: titled tables of typed
//! values (text, numbers with their unit, estimates with their interval, did-not-run). The
//! terminal, Markdown, CSV and HTML renderers draw any section the same way, so a new kind
//! brings its own view without teaching any renderer about it. A section says what it holds;
//! it does not say how it is drawn.

#![deny(missing_docs)]

pub mod compare;
pub mod cross;
mod design;
mod document;
pub mod fleet;
pub mod headline;
mod labels;
pub mod latency;
mod matrix;
pub mod tune;
pub mod usage;
mod view;

pub use design::{Cause, CauseKind, Design};
pub use document::{
    Cell, ClassSummary, Dnr, Results, RunInfo, TenantInfo, Trust, WorstCell,
    RESULTS_SCHEMA_VERSION, SOLO_PROBE,
};
pub use headline::{
    Headline, HeadlineCell, ResourceHeadline, Verdict, HEADLINE_RULE, UNTRUSTWORTHY_MARK,
};
pub use labels::method_words;
pub use matrix::{MatrixRow, MatrixTable, RowSubject};
pub use view::{Column, Guide, Plot, Section, Span, Value};

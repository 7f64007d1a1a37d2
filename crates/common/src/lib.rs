//! The few words and helpers that several isobench layers share, defined once.
//!
//! Why a crate of its own: measurement (`isobench-workloads`), statistics (`isobench-stats`),
//! tenants (`isobench-platform`) and storage (`isobench-store`) sit side by side at the bottom
//! of the workspace and may not depend on each other, yet they talk about the same things: a
//! metric's better direction, a tenant's role. Each used to keep its own copy, converted at
//! the seams. Here they have one home, below all of them, with the serialized words every
//! stored result and JSON document already uses. No I/O.
#![deny(missing_docs)]

mod class;
mod direction;
mod median;
mod role;
mod size;
mod text;
mod word;

pub use class::Class;
pub use direction::Direction;
pub use median::{median, median_in_place, median_of_sorted};
pub use role::Role;
pub use size::{format_size, format_size_exact, parse_size, SizeError, SizeProblem};
pub use text::escape_controls;
pub use word::UnknownWord;

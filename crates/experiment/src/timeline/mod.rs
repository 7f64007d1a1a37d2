//! The `timeline` experiment (paper 003, set 2): its scenario settings ([`settings`]) and
//! the analysis of its scheduled trials ([`analysis`]); the trial itself runs in
//! [`crate::scheduled`].

pub mod analysis;
pub mod settings;

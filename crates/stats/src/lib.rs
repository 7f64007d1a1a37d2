//! isobench stats (being written).

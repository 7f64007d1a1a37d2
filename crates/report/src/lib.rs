//! isobench report (being written).

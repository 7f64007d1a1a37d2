//! isobench experiment (being written).

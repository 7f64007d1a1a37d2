//! isobench platform (being written).

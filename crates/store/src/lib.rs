//! isobench store (being written).

//! isobench agent (being written).

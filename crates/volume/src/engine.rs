//! The sector engine (to be written).

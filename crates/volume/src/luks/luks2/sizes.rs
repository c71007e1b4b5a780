//! The sizes of a LUKS2 header copy: its binary part and the sizes the specification
//! allows for a whole copy. A leaf module: the copies (`copies.rs`, which calls the checks
//! of `validate.rs`) and the checks (`validate.rs`) both need them, so they live here and
//! the imports between those two files go one way.

/// Size of the binary part of each header copy.
pub const BIN_SIZE: usize = 4096;
/// The header sizes the specification allows (binary header + JSON area), which are also
/// the offsets where a secondary copy may be.
pub const HDR_SIZES: [u64; 9] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
];

//! LUKS2 and LUKS1 (to be written).

//! Differential tests (filled in with the avx2 backend).

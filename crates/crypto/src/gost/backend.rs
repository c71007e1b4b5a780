//! Which GOST implementation runs: the backends, their availability on this CPU, the
//! `SECTORCRYPT_BACKEND` rule shared with AES, and the self-test before first use.

use crate::backend::{family, selectable};

family! {
    /// An implementation of the GOST 28147-89 / Magma kernels.
    pub enum GostBackend: Gost, self_test: super::self_test {
        /// AVX-512 with VBMI: 16 blocks per zmm pair, one half-block per 32-bit lane, the
        /// S-boxes as `vpermb` tables; counter blocks made in registers.
        Avx512 = "avx512", x86 [Avx2, OsZmm, Avx512f, Avx512bw, Avx512vl, Avx512vbmi],
        /// AVX2: 32 blocks byte-sliced in ymm registers, S-boxes as `vpshufb` tables.
        Avx2 = "avx2", x86 [Avx2, OsYmm],
        /// Portable, constant-time (S-boxes looked up inside registers), no `unsafe`.
        Soft = "soft", portable,
    }
}

selectable!(GostBackend, unknown: "gost backend" lists own);

//! The AES backends: their names and the CPU features each needs (the rules that check and
//! choose one are shared with GOST in [`crate::backend`]).

use crate::backend::{family, selectable};

family! {
    /// An implementation of the AES kernels.
    pub enum Backend: Aes, self_test: super::self_test {
        /// The `vaes` kernels, with GCM on 512-bit zmm registers (AVX-512F/BW/VL): four
        /// blocks per instruction and 32 registers, which the carry-less multiplications
        /// need.
        Avx512 = "avx512", x86 [
            Aes, Pclmulqdq, Avx2, Vaes, Vpclmulqdq, OsZmm, Avx512f, Avx512bw, Avx512vl
        ],
        /// VAES + VPCLMULQDQ on 256-bit ymm registers (AVX2 integer ops, no AVX-512).
        Vaes = "vaes", x86 [Aes, Avx2, Vaes, Vpclmulqdq, OsYmm],
        /// AES-NI + PCLMULQDQ on xmm registers.
        Aesni = "aesni", x86 [Aes, Pclmulqdq, Sse41],
        /// Portable, constant-time (bitsliced), no `unsafe`. Always available; the
        /// reference.
        Soft = "soft", portable,
    }
}

selectable!(Backend, unknown: "backend" lists all);

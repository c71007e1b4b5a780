//! CPU feature detection, done once per process.
//!
//! Detection reads CPUID and checks with XGETBV which register state the OS saves: YMM
//! (XCR0 bits 1 and 2) for the 256-bit backends, and additionally the AVX-512 state (opmask
//! and zmm, XCR0 bits 5 to 7) for the 512-bit one. The ymm backend never asks for the
//! AVX-512 state: VAES and VPCLMULQDQ on ymm need only the CPUID bits plus YMM state, and
//! CPUs or VMs that expose VAES without AVX-512 (some of this project's Zen 4 machines run
//! with XCR0 = 0x7) would otherwise never run the fast path.

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
mod x86;

/// The CPU features the backends care about, as seen by this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    /// SSE2, SSSE3 and SSE4.1 (the baseline of the AES-NI backend).
    pub sse41: bool,
    /// AES-NI instructions on xmm registers.
    pub aes: bool,
    /// Carry-less multiplication on xmm registers.
    pub pclmulqdq: bool,
    /// AVX, with the OS saving ymm state.
    pub avx: bool,
    /// AVX2, with the OS saving ymm state.
    pub avx2: bool,
    /// VAES (AES instructions on ymm registers), with the OS saving ymm state.
    pub vaes: bool,
    /// VPCLMULQDQ (carry-less multiplication on ymm), with the OS saving ymm state.
    pub vpclmulqdq: bool,
    /// The OS saves the ymm state (XCR0 bits 1 and 2).
    pub os_ymm: bool,
    /// The OS saves the AVX-512 state (XCR0 bits 5..7). Required only by the `avx512`
    /// backend.
    pub os_zmm: bool,
    /// AVX-512 Foundation, with the OS saving the AVX-512 state.
    pub avx512f: bool,
    /// AVX-512 byte and word instructions (byte shuffles and byte masks on zmm), with the
    /// OS saving the AVX-512 state.
    pub avx512bw: bool,
    /// AVX-512 on xmm and ymm registers (vector length extensions), with the OS saving the
    /// AVX-512 state.
    pub avx512vl: bool,
    /// AVX-512 VBMI (byte permutes across a whole zmm: `vpermb`, `vpermi2b`), with the OS
    /// saving the AVX-512 state.
    pub avx512vbmi: bool,
    /// The SHA extensions (SHA-1 and SHA-256 rounds and message schedule on xmm).
    pub sha: bool,
    /// GFNI: affine transformations over GF(2^8) and its inversion on bytes
    /// (`vgf2p8affineqb`, `vgf2p8affineinvqb`), as CPUID reports it; the register width
    /// it runs on needs that width's OS state as well.
    pub gfni: bool,
}

/// One of the features in [`CpuFeatures`], as the backends list what they need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    Sse41,
    Aes,
    Pclmulqdq,
    Avx,
    Avx2,
    Vaes,
    Vpclmulqdq,
    OsYmm,
    OsZmm,
    Avx512f,
    Avx512bw,
    Avx512vl,
    Avx512vbmi,
    Sha,
    Gfni,
}

impl Feature {
    /// Every feature, in the order of the reports.
    const ALL: [Feature; 15] = [
        Feature::Sse41,
        Feature::Aes,
        Feature::Pclmulqdq,
        Feature::Avx,
        Feature::Avx2,
        Feature::Vaes,
        Feature::Vpclmulqdq,
        Feature::OsYmm,
        Feature::OsZmm,
        Feature::Avx512f,
        Feature::Avx512bw,
        Feature::Avx512vl,
        Feature::Avx512vbmi,
        Feature::Sha,
        Feature::Gfni,
    ];

    /// The name in the reports (`sectorcrypt backends`, `bench`).
    fn report_name(self) -> &'static str {
        match self {
            Feature::Sse41 => "sse4.1",
            Feature::Aes => "aes",
            Feature::Pclmulqdq => "pclmulqdq",
            Feature::Avx => "avx",
            Feature::Avx2 => "avx2",
            Feature::Vaes => "vaes",
            Feature::Vpclmulqdq => "vpclmulqdq",
            Feature::OsYmm => "os-ymm-state",
            Feature::OsZmm => "os-zmm-state",
            Feature::Avx512f => "avx512f",
            Feature::Avx512bw => "avx512bw",
            Feature::Avx512vl => "avx512vl",
            Feature::Avx512vbmi => "avx512vbmi",
            Feature::Sha => "sha",
            Feature::Gfni => "gfni",
        }
    }

    /// The name in a backend's "missing ..." error.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feature::OsYmm => "os ymm state",
            Feature::OsZmm => "os zmm state",
            other => other.report_name(),
        }
    }
}

impl CpuFeatures {
    /// Whether `feature` is present.
    pub(crate) fn has(&self, feature: Feature) -> bool {
        match feature {
            Feature::Sse41 => self.sse41,
            Feature::Aes => self.aes,
            Feature::Pclmulqdq => self.pclmulqdq,
            Feature::Avx => self.avx,
            Feature::Avx2 => self.avx2,
            Feature::Vaes => self.vaes,
            Feature::Vpclmulqdq => self.vpclmulqdq,
            Feature::OsYmm => self.os_ymm,
            Feature::OsZmm => self.os_zmm,
            Feature::Avx512f => self.avx512f,
            Feature::Avx512bw => self.avx512bw,
            Feature::Avx512vl => self.avx512vl,
            Feature::Avx512vbmi => self.avx512vbmi,
            Feature::Sha => self.sha,
            Feature::Gfni => self.gfni,
        }
    }

    /// The names of the features that are present, for `sectorcrypt backends` and `bench`.
    pub fn names(&self) -> Vec<&'static str> {
        Feature::ALL
            .into_iter()
            .filter(|f| self.has(*f))
            .map(Feature::report_name)
            .collect()
    }
}

/// The features of the CPU this process runs on, detected on first call.
pub fn features() -> &'static CpuFeatures {
    static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
    FEATURES.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> CpuFeatures {
    x86::detect()
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> CpuFeatures {
    CpuFeatures::default()
}

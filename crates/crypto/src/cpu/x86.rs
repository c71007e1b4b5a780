//! CPUID and XGETBV on x86-64 (a leaf file: the only unsafe of the detection code).
#![allow(unsafe_code)]

use super::CpuFeatures;
use core::arch::x86_64::{__cpuid_count, CpuidResult};

fn cpuid(leaf: u32, sub: u32) -> CpuidResult {
    // SAFETY: CPUID exists on every x86-64 CPU and has no side effects.
    #[allow(unused_unsafe)]
    unsafe {
        __cpuid_count(leaf, sub)
    }
}

#[target_feature(enable = "xsave")]
unsafe fn xgetbv0() -> u64 {
    // SAFETY: the caller checked CPUID.1:ECX.OSXSAVE, so XGETBV with ECX = 0 is enabled.
    unsafe { core::arch::x86_64::_xgetbv(0) }
}

pub(super) fn detect() -> CpuFeatures {
    let max_leaf = cpuid(0, 0).eax;
    let l1 = cpuid(1, 0);
    let l7 = if max_leaf >= 7 {
        cpuid(7, 0)
    } else {
        CpuidResult {
            eax: 0,
            ebx: 0,
            ecx: 0,
            edx: 0,
        }
    };
    let bit = |reg: u32, n: u32| reg & (1 << n) != 0;

    let osxsave = bit(l1.ecx, 27);
    let xcr0 = if osxsave {
        // SAFETY: OSXSAVE is set, so the OS enabled XGETBV.
        unsafe { xgetbv0() }
    } else {
        0
    };
    let os_ymm = xcr0 & 0b110 == 0b110;
    let os_zmm = xcr0 & 0b1110_0110 == 0b1110_0110;

    let sse41 = bit(l1.edx, 26) && bit(l1.ecx, 9) && bit(l1.ecx, 19);
    let avx = bit(l1.ecx, 28) && os_ymm;
    CpuFeatures {
        sse41,
        aes: bit(l1.ecx, 25) && sse41,
        pclmulqdq: bit(l1.ecx, 1),
        avx,
        avx2: avx && bit(l7.ebx, 5),
        vaes: avx && bit(l7.ecx, 9),
        vpclmulqdq: avx && bit(l7.ecx, 10),
        os_ymm,
        os_zmm,
        avx512f: os_zmm && bit(l7.ebx, 16),
        avx512bw: os_zmm && bit(l7.ebx, 30),
        avx512vl: os_zmm && bit(l7.ebx, 31),
        avx512vbmi: os_zmm && bit(l7.ecx, 1),
        sha: sse41 && bit(l7.ebx, 29),
        gfni: bit(l7.ecx, 8),
    }
}

//! The portable GOST 28147-89 / Magma backend: constant-time, no `unsafe`, one block at a
//! time. It is the reference the `avx2` backend is tested against, the only backend of the
//! sequential modes (CBC and CFB encryption, the MACs) and the fallback everywhere.
//!
//! # Why register lookups, not bitslicing
//! A 4-bit S-box has 16 entries of 4 bits: 64 bits, one machine word. Each row `pi_i` is
//! packed into a `u64` whose nibble `x` is `pi_i[x]`, and `pi_i[x]` is evaluated as
//! `(row >> 4x) & 0xf`: a shift by a register amount, i.e. a lookup in a register, with no
//! memory access at all. Shifts by a register count (`shr r64, cl`, `shrx`, AArch64 `lsrv`)
//! take the same time for every count on the x86-64 and AArch64 cores we know of (the
//! count only selects wires in a barrel shifter), so neither the key, the data nor the
//! S-box reach an address or a branch. Bitslicing would also be constant-time, but it needs 32 or 64 independent blocks
//! to pay off, while most users of this backend (CBC and CFB encryption, the MACs, CNT with
//! key meshing re-encrypting its register) are strictly one block after another: a
//! bitsliced one-block call would waste 63/64 of its work and be slower than this.
//! The parallel modes have the `avx2` backend for speed.
//!
//! How constant time was checked: `scripts/gost-ct-disasm.sh` disassembles
//! [`Schedule::encrypt`] in the release build. Its round loop reads the round-key order
//! table at the round counter, the key word at that public index and the eight packed rows
//! from fixed stack slots; the S-box is eight `shr %cl` on those rows; the only branches
//! are the loop counter and a bounds check on the public round order. The unit test
//! `no_table_in_memory` checks the register evaluation against the table definition for
//! every row and input. `scripts/gost-ct-cachegrind.sh` runs every mode under cachegrind
//! with three different keys, IVs and data and requires identical instruction, data-access
//! and L1-miss counts (they are identical).
#![forbid(unsafe_code)]

use super::sbox::Rows;
use zeroize::Zeroize;

/// The eight rows of a parameter set, one `u64` per row (nibble `x` = `pi_i[x]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackedSbox(pub(crate) [u64; 8]);

impl PackedSbox {
    pub(crate) const fn pack(rows: &Rows) -> PackedSbox {
        let mut out = [0u64; 8];
        let mut i = 0;
        while i < 8 {
            let mut x = 0;
            while x < 16 {
                out[i] |= (rows[i][x] as u64) << (4 * x);
                x += 1;
            }
            i += 1;
        }
        PackedSbox(out)
    }
}

/// Round-key order of the 32-round encryption: K1..K8 three times, then K8..K1.
pub(crate) const ENC_ORDER: [usize; 32] = [
    0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4, 3, 2, 1, 0,
];
/// Round-key order of the 32-round decryption: K1..K8, then K8..K1 three times.
pub(crate) const DEC_ORDER: [usize; 32] = [
    0, 1, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0,
];

/// The key words K1..K8 (as integers; the byte convention was applied when they were read)
/// with the S-box. Zeroized on drop.
#[derive(Clone)]
pub(crate) struct Schedule {
    pub(crate) k: [u32; 8],
    pub(crate) sbox: PackedSbox,
}

impl Drop for Schedule {
    fn drop(&mut self) {
        self.k.zeroize();
    }
}

impl Schedule {
    /// `g(a) = S(a) <<< 11` (the key was already added).
    #[inline(always)]
    pub(crate) fn g(&self, a: u32) -> u32 {
        let rows = &self.sbox.0;
        let mut s = 0u32;
        for i in 0..8 {
            let nib = (a >> (4 * i)) & 0xf;
            // A lookup in a register: the shift count is secret, the shift time is not.
            let v = rows[i].wrapping_shr(nib << 2) & 0xf;
            s |= (v as u32) << (4 * i);
        }
        s.rotate_left(11)
    }

    /// The 32-round cipher on a block held as `n1` = low word, `n2` = high word, with the
    /// round keys taken in `order`. Returns the block in the same form.
    #[inline(always)]
    fn rounds32(&self, x: u64, order: &[usize; 32]) -> u64 {
        let mut n1 = x as u32;
        let mut n2 = (x >> 32) as u32;
        for &i in order {
            let t = n2 ^ self.g(n1.wrapping_add(self.k[i & 7]));
            n2 = n1;
            n1 = t;
        }
        // The last round does not swap: undo the swap of the loop.
        ((n1 as u64) << 32) | n2 as u64
    }

    /// Encrypts one block (low word = N1, the half that enters the first round).
    pub(crate) fn encrypt(&self, x: u64) -> u64 {
        self.rounds32(x, &ENC_ORDER)
    }

    /// Decrypts one block.
    pub(crate) fn decrypt(&self, x: u64) -> u64 {
        self.rounds32(x, &DEC_ORDER)
    }

    /// The 16-round transform of the GOST 28147-89 MAC (imitovstavka): K1..K8 twice, every
    /// round swapping (the state is kept as it stands after round 16).
    pub(crate) fn mac16(&self, x: u64) -> u64 {
        let mut n1 = x as u32;
        let mut n2 = (x >> 32) as u32;
        for r in 0..16 {
            let t = n2 ^ self.g(n1.wrapping_add(self.k[r & 7]));
            n2 = n1;
            n1 = t;
        }
        ((n2 as u64) << 32) | n1 as u64
    }
}

/// One block encrypted a round at a time, so that a SIMD kernel can run its rounds on the
/// scalar units in the shadow of its vector work (the CNT key-meshing re-encryption of
/// the next KiB's counter). `step` runs the next round; `finish` runs the rest.
pub(crate) struct SideJob {
    pub(crate) s: Schedule,
    n1: u32,
    n2: u32,
    next: usize,
}

impl SideJob {
    pub(crate) fn new(s: Schedule, x: u64) -> SideJob {
        SideJob {
            s,
            n1: x as u32,
            n2: (x >> 32) as u32,
            next: 0,
        }
    }

    /// Runs the next encryption round, if any is left.
    #[inline(always)]
    pub(crate) fn step(&mut self) {
        if self.next < 32 {
            let k = self.s.k[ENC_ORDER[self.next] & 7];
            let t = self.n2 ^ self.s.g(self.n1.wrapping_add(k));
            self.n2 = self.n1;
            self.n1 = t;
            self.next += 1;
        }
    }

    /// Runs the remaining rounds and returns the ciphertext block.
    pub(crate) fn finish(&mut self) -> u64 {
        while self.next < 32 {
            self.step();
        }
        ((self.n1 as u64) << 32) | self.n2 as u64
    }
}

impl Drop for SideJob {
    fn drop(&mut self) {
        self.n1.zeroize();
        self.n2.zeroize();
    }
}

/// Seconds per round of one block after another (each the encryption of the last), the
/// best of five runs.
pub(crate) fn round_seconds() -> f64 {
    let s = Schedule {
        k: [0x1234_5678; 8],
        sbox: PackedSbox::pack(super::Sbox::Tc26Z.rows()),
    };
    let blocks = 4000;
    super::best_seconds(blocks * 32, || {
        let mut x = std::hint::black_box(1u64);
        for _ in 0..blocks {
            x = s.encrypt(x);
        }
        std::hint::black_box(x);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gost::Sbox;

    /// The register evaluation equals the table definition for every row and input.
    #[test]
    fn no_table_in_memory() {
        for rows in [Sbox::Tc26Z.rows(), Sbox::CryptoProA.rows()] {
            let s = Schedule {
                k: [0; 8],
                sbox: PackedSbox::pack(rows),
            };
            for i in 0..8 {
                for x in 0..16u32 {
                    let a = x << (4 * i);
                    let want = ((rows[i][x as usize] as u32) << (4 * i)).rotate_left(11);
                    let others: u32 = (0..8)
                        .filter(|&j| j != i)
                        .map(|j| (rows[j][0] as u32) << (4 * j))
                        .fold(0, |a, b| a | b)
                        .rotate_left(11);
                    assert_eq!(s.g(a), want | others, "row {i} x {x}");
                }
            }
        }
    }

    /// A side job gives the same block as `encrypt`, whether stepped or finished at once.
    #[test]
    fn side_job_equals_encrypt() {
        let s = Schedule {
            k: [1, 2, 3, 4, 5, 6, 7, 0xdead_beef],
            sbox: PackedSbox::pack(Sbox::CryptoProA.rows()),
        };
        for x in [0u64, 1, 0x0123_4567_89ab_cdef] {
            let mut j = SideJob::new(s.clone(), x);
            for _ in 0..5 {
                j.step();
            }
            assert_eq!(j.finish(), s.encrypt(x));
        }
    }

    /// RFC 8891 A.2: g[k](a) for four (k, a) pairs.
    #[test]
    fn rfc8891_g() {
        let s = Schedule {
            k: [0; 8],
            sbox: PackedSbox::pack(Sbox::Tc26Z.rows()),
        };
        for (k, a, g) in [
            (0x87654321u32, 0xfedcba98u32, 0xfdcbc20cu32),
            (0xfdcbc20c, 0x87654321, 0x7e791a4b),
            (0x7e791a4b, 0xfdcbc20c, 0xc76549ec),
            (0xc76549ec, 0x7e791a4b, 0x9791c849),
        ] {
            assert_eq!(s.g(a.wrapping_add(k)), g);
        }
    }
}

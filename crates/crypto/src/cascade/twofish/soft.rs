//! Twofish's key schedule and the portable `soft` backend, written from the Twofish paper
//! (Schneier et al., 1998): the permutations q0 and q1 from their 4-bit tables, the MDS
//! matrix over GF(2^8) mod x^8+x^6+x^5+x^3+1 and the RS matrix mod x^8+x^6+x^3+x^2+1.
//!
//! A key is expanded in "full keying" form: the four key-dependent S-boxes as byte tables
//! (`sbox`, what the SIMD kernels look up in registers), and the same S-boxes each combined
//! with its column of the MDS matrix into 256 words (`table`, 4 KiB), so that the function
//! `g` is four table lookups and three XORs. `soft` runs four blocks side by side (their
//! rounds interleaved, so that the lookups of one block overlap another's).
//!
//! Table-driven: the lookups are at key- and data-dependent addresses, so `soft` is not
//! constant-time (cache timing), as the table-driven Twofish of Linux and libgcrypt.

use crate::block::BLOCK;
use zeroize::Zeroize;

/// The 4-bit tables t0..t3 of q0 and q1 (the paper, section 4.3.5).
const QT: [[[u8; 16]; 4]; 2] = [
    [
        [8, 1, 7, 13, 6, 15, 3, 2, 0, 11, 5, 9, 14, 12, 10, 4],
        [14, 12, 11, 8, 1, 2, 3, 5, 15, 4, 10, 6, 7, 0, 9, 13],
        [11, 10, 5, 14, 6, 13, 9, 0, 12, 8, 15, 3, 2, 4, 7, 1],
        [13, 7, 15, 4, 1, 2, 6, 14, 9, 11, 3, 0, 8, 5, 12, 10],
    ],
    [
        [2, 8, 11, 13, 15, 7, 6, 14, 3, 1, 9, 4, 0, 10, 12, 5],
        [1, 14, 2, 11, 4, 12, 3, 7, 6, 13, 10, 5, 15, 9, 0, 8],
        [4, 12, 7, 5, 1, 6, 9, 10, 0, 14, 13, 8, 2, 11, 3, 15],
        [11, 9, 5, 1, 12, 3, 13, 14, 6, 4, 7, 15, 2, 0, 8, 10],
    ],
];

/// Rotates a 4-bit value right by one.
const fn ror4(x: u8) -> u8 {
    ((x >> 1) | (x << 3)) & 15
}

/// q0 (`which` 0) or q1 (1) of one byte.
const fn q(which: usize, x: u8) -> u8 {
    let t = &QT[which];
    let (a0, b0) = (x >> 4, x & 15);
    let (a1, b1) = (a0 ^ b0, a0 ^ ror4(b0) ^ ((a0 << 3) & 15));
    let (a2, b2) = (t[0][a1 as usize], t[1][b1 as usize]);
    let (a3, b3) = (a2 ^ b2, a2 ^ ror4(b2) ^ ((a2 << 3) & 15));
    let (a4, b4) = (t[2][a3 as usize], t[3][b3 as usize]);
    (b4 << 4) | a4
}

/// q0 and q1 as tables.
const Q: [[u8; 256]; 2] = {
    let mut out = [[0u8; 256]; 2];
    let mut i = 0;
    while i < 256 {
        out[0][i] = q(0, i as u8);
        out[1][i] = q(1, i as u8);
        i += 1;
    }
    out
};

/// The q permutations byte `j` of `h` goes through, the first for a 256-bit key first
/// (a 192-bit key starts at the second, a 128-bit key at the third); the last is applied
/// after the last key byte.
const QORD: [[usize; 5]; 4] = [
    [1, 1, 0, 0, 1],
    [0, 1, 1, 0, 0],
    [0, 0, 0, 1, 1],
    [1, 0, 1, 1, 0],
];

/// The MDS matrix (rows: output bytes).
pub(super) const MDS: [[u8; 4]; 4] = [
    [0x01, 0xef, 0x5b, 0x5b],
    [0x5b, 0xef, 0xef, 0x01],
    [0xef, 0x5b, 0x01, 0xef],
    [0xef, 0x01, 0xef, 0x5b],
];

/// The RS matrix of the key schedule.
const RS: [[u8; 8]; 4] = [
    [0x01, 0xa4, 0x55, 0x87, 0x5a, 0x58, 0xdb, 0x9e],
    [0xa4, 0x56, 0x82, 0xf3, 0x1e, 0xc6, 0x68, 0xe5],
    [0x02, 0xa1, 0xfc, 0xc1, 0x47, 0xae, 0x3d, 0x19],
    [0xa4, 0x55, 0x87, 0x5a, 0x58, 0xdb, 0x9e, 0x03],
];

/// The MDS field's polynomial x^8+x^6+x^5+x^3+1.
pub(super) const MDS_POLY: u16 = 0x169;
/// The RS field's polynomial x^8+x^6+x^3+x^2+1.
const RS_POLY: u16 = 0x14d;

/// `a * b` in GF(2^8) modulo `poly` (nine bits).
pub(super) const fn gf_mul(a: u8, b: u8, poly: u16) -> u8 {
    let (mut a, mut b, mut r) = (a as u16, b, 0u16);
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        a <<= 1;
        if a & 0x100 != 0 {
            a ^= poly;
        }
        b >>= 1;
    }
    r as u8
}

/// The function `h` on one byte position: `x` through the q permutations and the bytes
/// `j` of the key words `l` (`l[0]` last), for byte position `j`.
fn h_byte(j: usize, x: u8, l: &[u32]) -> u8 {
    let k = l.len();
    let mut y = x;
    for (t, word) in (4 - k..4).zip(l.iter().rev()) {
        y = Q[QORD[j][t]][usize::from(y)] ^ word.to_le_bytes()[j];
    }
    Q[QORD[j][4]][usize::from(y)]
}

/// Byte `v` times column `j` of the MDS matrix, as a little-endian word.
fn mds_column(j: usize, v: u8) -> u32 {
    u32::from_le_bytes(core::array::from_fn(|i| gf_mul(MDS[i][j], v, MDS_POLY)))
}

/// The function `h` of the paper: the word `x` under the key words `l`.
fn h(x: u32, l: &[u32]) -> u32 {
    let b = x.to_le_bytes();
    (0..4).fold(0, |acc, j| acc ^ mds_column(j, h_byte(j, b[j], l)))
}

/// A Twofish key in full-keying form. Zeroized on drop.
pub(crate) struct Keys {
    /// The 40 subkeys: K0..K7 whitening, then two per round.
    pub(crate) k: [u32; 40],
    /// The four key-dependent S-boxes.
    pub(crate) sbox: [[u8; 256]; 4],
    /// S-box `j` times column `j` of the MDS matrix.
    pub(crate) table: [[u32; 256]; 4],
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.k.zeroize();
        self.sbox.iter_mut().for_each(|s| s.zeroize());
        self.table.iter_mut().for_each(|t| t.zeroize());
    }
}

impl Keys {
    /// Expands a key of 16, 24 or 32 bytes; `None` for another length.
    pub(crate) fn new(key: &[u8]) -> Option<Box<Keys>> {
        if !matches!(key.len(), 16 | 24 | 32) {
            return None;
        }
        let k = key.len() / 8;
        let mut m = [0u32; 8];
        for (w, c) in m.iter_mut().zip(key.chunks_exact(4)) {
            *w = u32::from_le_bytes(c.try_into().expect("four bytes"));
        }
        let mut even = [0u32; 4];
        let mut odd = [0u32; 4];
        // The S vector: the RS products of the key's 8-byte pieces, in reverse order.
        let mut s = [0u32; 4];
        for i in 0..k {
            even[i] = m[2 * i];
            odd[i] = m[2 * i + 1];
            let piece = &key[8 * i..8 * i + 8];
            let bytes: [u8; 4] = core::array::from_fn(|r| {
                RS[r]
                    .iter()
                    .zip(piece)
                    .fold(0, |acc, (&c, &x)| acc ^ gf_mul(c, x, RS_POLY))
            });
            s[k - 1 - i] = u32::from_le_bytes(bytes);
        }
        let mut out = Box::new(Keys {
            k: [0; 40],
            sbox: [[0; 256]; 4],
            table: [[0; 256]; 4],
        });
        const RHO: u32 = 0x0101_0101;
        for i in 0..20u32 {
            let a = h((2 * i).wrapping_mul(RHO), &even[..k]);
            let b = h((2 * i + 1).wrapping_mul(RHO), &odd[..k]).rotate_left(8);
            out.k[2 * i as usize] = a.wrapping_add(b);
            out.k[2 * i as usize + 1] = a.wrapping_add(b.wrapping_mul(2)).rotate_left(9);
        }
        for j in 0..4 {
            for x in 0..=255u8 {
                let v = h_byte(j, x, &s[..k]);
                out.sbox[j][usize::from(x)] = v;
                out.table[j][usize::from(x)] = mds_column(j, v);
            }
        }
        m.zeroize();
        even.zeroize();
        odd.zeroize();
        s.zeroize();
        Some(out)
    }

    /// The function `g`: four lookups in the full-keying tables.
    #[inline(always)]
    fn g(&self, x: u32) -> u32 {
        let t = &self.table;
        t[0][(x & 0xff) as usize]
            ^ t[1][((x >> 8) & 0xff) as usize]
            ^ t[2][((x >> 16) & 0xff) as usize]
            ^ t[3][(x >> 24) as usize]
    }

    /// Encrypts `N` blocks of words, their rounds interleaved.
    #[inline(always)]
    fn encrypt_words<const N: usize>(&self, s: &mut [[u32; 4]; N]) {
        let k = &self.k;
        for b in s.iter_mut() {
            for (w, key) in b.iter_mut().zip(&k[..4]) {
                *w ^= key;
            }
        }
        for r in 0..16 {
            let (k0, k1) = (k[2 * r + 8], k[2 * r + 9]);
            for b in s.iter_mut() {
                let t0 = self.g(b[0]);
                let t1 = self.g(b[1].rotate_left(8));
                let f0 = t0.wrapping_add(t1).wrapping_add(k0);
                let f1 = t0.wrapping_add(t1.wrapping_mul(2)).wrapping_add(k1);
                *b = [
                    (b[2] ^ f0).rotate_right(1),
                    b[3].rotate_left(1) ^ f1,
                    b[0],
                    b[1],
                ];
            }
        }
        for b in s.iter_mut() {
            *b = [b[2] ^ k[4], b[3] ^ k[5], b[0] ^ k[6], b[1] ^ k[7]];
        }
    }

    /// Decrypts `N` blocks of words, their rounds interleaved.
    #[inline(always)]
    fn decrypt_words<const N: usize>(&self, s: &mut [[u32; 4]; N]) {
        let k = &self.k;
        for b in s.iter_mut() {
            *b = [b[2] ^ k[6], b[3] ^ k[7], b[0] ^ k[4], b[1] ^ k[5]];
        }
        for r in (0..16).rev() {
            let (k0, k1) = (k[2 * r + 8], k[2 * r + 9]);
            for b in s.iter_mut() {
                let t0 = self.g(b[2]);
                let t1 = self.g(b[3].rotate_left(8));
                let f0 = t0.wrapping_add(t1).wrapping_add(k0);
                let f1 = t0.wrapping_add(t1.wrapping_mul(2)).wrapping_add(k1);
                *b = [
                    b[2],
                    b[3],
                    b[0].rotate_left(1) ^ f0,
                    (b[1] ^ f1).rotate_right(1),
                ];
            }
        }
        for b in s.iter_mut() {
            for (w, key) in b.iter_mut().zip(&k[..4]) {
                *w ^= key;
            }
        }
    }

    fn run<const N: usize>(&self, encrypt: bool, chunk: &mut [u8]) {
        let mut s = [[0u32; 4]; N];
        for (b, c) in s.iter_mut().zip(chunk.chunks_exact(BLOCK)) {
            for (w, x) in b.iter_mut().zip(c.chunks_exact(4)) {
                *w = u32::from_le_bytes(x.try_into().expect("four bytes"));
            }
        }
        if encrypt {
            self.encrypt_words(&mut s);
        } else {
            self.decrypt_words(&mut s);
        }
        for (b, c) in s.iter().zip(chunk.chunks_exact_mut(BLOCK)) {
            for (w, x) in b.iter().zip(c.chunks_exact_mut(4)) {
                x.copy_from_slice(&w.to_le_bytes());
            }
        }
        s.zeroize();
    }

    /// Encrypts or decrypts every whole block of `data` in place, four at a time.
    pub(crate) fn ecb(&self, encrypt: bool, data: &mut [u8]) {
        let mut quads = data.chunks_exact_mut(4 * BLOCK);
        for c in &mut quads {
            self.run::<4>(encrypt, c);
        }
        for c in quads.into_remainder().chunks_exact_mut(BLOCK) {
            self.run::<1>(encrypt, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// q0 and q1 are permutations, and their first bytes are the paper's.
    #[test]
    fn q_tables_are_permutations() {
        for t in &Q {
            let mut seen = [false; 256];
            t.iter().for_each(|&v| seen[usize::from(v)] = true);
            assert!(seen.iter().all(|&s| s));
        }
        assert_eq!(&Q[0][..4], &[0xa9, 0x67, 0xb3, 0xe8]);
        assert_eq!(&Q[1][..4], &[0x75, 0xf3, 0xc6, 0xf4]);
    }
}

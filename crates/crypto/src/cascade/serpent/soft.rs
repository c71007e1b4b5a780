//! Serpent (Anderson, Biham, Knudsen, 1998), portable and bitsliced across blocks: the
//! cipher's own bitsliced form (each block four 32-bit words, every S-box applied to bit
//! `j` of the four words at once) run on [`LANES`] blocks side by side, each word a
//! `[u32; LANES]` that the compiler keeps in vector registers. Constant-time: no table is
//! indexed by data or key, the S-boxes are evaluated as boolean formulas.
//!
//! The S-box formulas are the algebraic normal form of each published 4-bit S-box (its
//! Möbius transform, computed at compile time from the tables of the specification), so
//! the code holds no hand-written formula that could disagree with the tables. Keys of 16,
//! 24 or 32 bytes are padded as the specification says (a one bit, then zeros).

use zeroize::Zeroize;

/// Blocks processed side by side.
pub(super) const LANES: usize = 8;

/// The S-boxes S0..S7 of the Serpent specification (section 2, the bitsliced form).
pub(super) const SBOX: [[u8; 16]; 8] = [
    [3, 8, 15, 1, 10, 6, 5, 11, 14, 13, 4, 2, 7, 0, 9, 12],
    [15, 12, 2, 7, 9, 0, 5, 10, 1, 11, 14, 8, 6, 13, 3, 4],
    [8, 6, 7, 9, 3, 12, 10, 15, 13, 1, 14, 4, 0, 11, 5, 2],
    [0, 15, 11, 8, 12, 9, 6, 3, 13, 1, 2, 4, 10, 7, 5, 14],
    [1, 15, 8, 3, 12, 0, 11, 6, 2, 5, 4, 10, 9, 14, 7, 13],
    [15, 5, 2, 11, 4, 10, 9, 12, 0, 3, 14, 8, 13, 6, 7, 1],
    [7, 2, 12, 5, 8, 4, 6, 11, 14, 9, 1, 15, 13, 3, 10, 0],
    [1, 13, 15, 0, 14, 8, 2, 11, 7, 4, 12, 10, 9, 3, 5, 6],
];

/// The key schedule's constant: the fractional part of the golden ratio.
const PHI: u32 = 0x9e37_79b9;

/// The inverse of each S-box.
pub(super) const fn inverses() -> [[u8; 16]; 8] {
    let mut inv = [[0u8; 16]; 8];
    let mut s = 0;
    while s < 8 {
        let mut x = 0;
        while x < 16 {
            inv[s][SBOX[s][x] as usize] = x as u8;
            x += 1;
        }
        s += 1;
    }
    inv
}

/// The algebraic normal form of each output bit of each S-box: bit `m` of `anf[s][b]` says
/// whether the monomial of the input bits set in `m` appears in output bit `b`.
const fn anf(boxes: [[u8; 16]; 8]) -> [[u16; 4]; 8] {
    let mut out = [[0u16; 4]; 8];
    let mut s = 0;
    while s < 8 {
        let mut b = 0;
        while b < 4 {
            let mut m = 0;
            while m < 16 {
                // The coefficient of monomial m is the XOR of the output bit over the
                // inputs whose bits are a subset of m.
                let mut c = 0u8;
                let mut x = 0;
                while x < 16 {
                    if x & m == x {
                        c ^= (boxes[s][x] >> b) & 1;
                    }
                    x += 1;
                }
                out[s][b] |= (c as u16) << m;
                m += 1;
            }
            b += 1;
        }
        s += 1;
    }
    out
}

/// The normal forms of S0..S7.
pub(super) const ANF: [[u16; 4]; 8] = anf(SBOX);
/// The normal forms of the inverse S-boxes.
pub(super) const ANF_INV: [[u16; 4]; 8] = anf(inverses());

type Word = [u32; LANES];
/// The state of [`LANES`] blocks: four words, lane `i` of each belonging to block `i`.
type State = [Word; 4];

/// Applies the S-box whose normal form is `anf` to every bit position of the four words.
#[inline(always)]
fn sbox(anf: &[u16; 4], x: &mut State) {
    let mut mono = [[0u32; LANES]; 16];
    mono[0] = [u32::MAX; LANES];
    for m in 1..16usize {
        // Each monomial is the one without its highest input bit times that bit.
        let top = 3 - (m as u32).leading_zeros().saturating_sub(28) as usize;
        let rest = m & !(1 << top);
        for l in 0..LANES {
            mono[m][l] = mono[rest][l] & x[top][l];
        }
    }
    let mut y: State = [[0u32; LANES]; 4];
    for b in 0..4 {
        for (m, v) in mono.iter().enumerate() {
            if anf[b] >> m & 1 == 1 {
                for l in 0..LANES {
                    y[b][l] ^= v[l];
                }
            }
        }
    }
    *x = y;
}

#[inline(always)]
fn map(w: &mut Word, f: impl Fn(u32) -> u32) {
    for v in w.iter_mut() {
        *v = f(*v);
    }
}

#[inline(always)]
fn xor_into(w: &mut Word, a: &Word, b: &Word) {
    for l in 0..LANES {
        w[l] ^= a[l] ^ b[l];
    }
}

/// The linear transformation of the specification.
#[inline(always)]
fn linear(x: &mut State) {
    map(&mut x[0], |v| v.rotate_left(13));
    map(&mut x[2], |v| v.rotate_left(3));
    let (x0, x2) = (x[0], x[2]);
    xor_into(&mut x[1], &x0, &x2);
    let x0s = x0.map(|v| v << 3);
    xor_into(&mut x[3], &x2, &x0s);
    map(&mut x[1], |v| v.rotate_left(1));
    map(&mut x[3], |v| v.rotate_left(7));
    let (x1, x3) = (x[1], x[3]);
    xor_into(&mut x[0], &x1, &x3);
    let x1s = x1.map(|v| v << 7);
    xor_into(&mut x[2], &x3, &x1s);
    map(&mut x[0], |v| v.rotate_left(5));
    map(&mut x[2], |v| v.rotate_left(22));
}

/// The inverse of [`linear`].
#[inline(always)]
fn linear_inv(x: &mut State) {
    map(&mut x[2], |v| v.rotate_right(22));
    map(&mut x[0], |v| v.rotate_right(5));
    let (x1, x3) = (x[1], x[3]);
    let x1s = x1.map(|v| v << 7);
    xor_into(&mut x[2], &x3, &x1s);
    xor_into(&mut x[0], &x1, &x3);
    map(&mut x[3], |v| v.rotate_right(7));
    map(&mut x[1], |v| v.rotate_right(1));
    let (x0, x2) = (x[0], x[2]);
    let x0s = x0.map(|v| v << 3);
    xor_into(&mut x[3], &x2, &x0s);
    xor_into(&mut x[1], &x0, &x2);
    map(&mut x[2], |v| v.rotate_right(3));
    map(&mut x[0], |v| v.rotate_right(13));
}

#[inline(always)]
fn add_key(x: &mut State, k: &[u32; 4]) {
    for (w, kw) in x.iter_mut().zip(k) {
        map(w, |v| v ^ kw);
    }
}

/// The 33 round keys of an expanded key, each four words in the bitsliced order.
pub(super) type RoundKeys = [[u32; 4]; 33];

/// Serpent under one expanded key (33 round keys). Zeroized on drop.
pub(super) struct Serpent {
    keys: RoundKeys,
}

impl Drop for Serpent {
    fn drop(&mut self) {
        self.keys.zeroize();
    }
}

impl Serpent {
    /// Expands a 16-, 24- or 32-byte key; `None` for any other length.
    pub(super) fn new(key: &[u8]) -> Option<Serpent> {
        if !matches!(key.len(), 16 | 24 | 32) {
            return None;
        }
        let mut padded = [0u8; 32];
        padded[..key.len()].copy_from_slice(key);
        if key.len() < 32 {
            padded[key.len()] = 1;
        }
        let mut w = [0u32; 140];
        for (i, c) in padded.chunks_exact(4).enumerate() {
            w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        padded.zeroize();
        for i in 8..140 {
            w[i] =
                (w[i - 8] ^ w[i - 5] ^ w[i - 3] ^ w[i - 1] ^ PHI ^ (i as u32 - 8)).rotate_left(11);
        }
        let mut keys = [[0u32; 4]; 33];
        for (i, k) in keys.iter_mut().enumerate() {
            let mut x: State = [[0; LANES]; 4];
            for j in 0..4 {
                x[j][0] = w[8 + 4 * i + j];
            }
            sbox(&ANF[(35 - i) % 8], &mut x);
            for j in 0..4 {
                k[j] = x[j][0];
            }
            x.zeroize();
        }
        w.zeroize();
        Some(Serpent { keys })
    }

    /// The round keys, for the SIMD kernels.
    pub(super) fn round_keys(&self) -> &RoundKeys {
        &self.keys
    }

    /// Encrypts (or decrypts) every whole 16-byte block of `data` in place, [`LANES`] at a
    /// time; a last partial group runs with its unused lanes zero.
    pub(super) fn apply(&self, encrypt: bool, data: &mut [u8]) {
        debug_assert_eq!(data.len() % 16, 0);
        for group in data.chunks_mut(16 * LANES) {
            let mut x: State = [[0; LANES]; 4];
            for (l, block) in group.chunks_exact(16).enumerate() {
                for (j, w) in x.iter_mut().enumerate() {
                    let c = &block[4 * j..4 * j + 4];
                    w[l] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            if encrypt {
                self.encrypt_state(&mut x);
            } else {
                self.decrypt_state(&mut x);
            }
            for (l, block) in group.chunks_exact_mut(16).enumerate() {
                for (j, w) in x.iter().enumerate() {
                    block[4 * j..4 * j + 4].copy_from_slice(&w[l].to_le_bytes());
                }
            }
            x.zeroize();
        }
    }

    fn encrypt_state(&self, x: &mut State) {
        for r in 0..32 {
            add_key(x, &self.keys[r]);
            sbox(&ANF[r % 8], x);
            if r < 31 {
                linear(x);
            }
        }
        add_key(x, &self.keys[32]);
    }

    fn decrypt_state(&self, x: &mut State) {
        add_key(x, &self.keys[32]);
        for r in (0..32).rev() {
            if r < 31 {
                linear_inv(x);
            }
            sbox(&ANF_INV[r % 8], x);
            add_key(x, &self.keys[r]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipher::generic_array::GenericArray;
    use cipher::{BlockDecrypt, BlockEncrypt, KeyInit};

    /// Deterministic test bytes (xorshift), no randomness needed.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    /// The normal forms reproduce every S-box and inverse table entry.
    #[test]
    fn normal_forms_reproduce_the_tables() {
        let inv = inverses();
        for s in 0..8 {
            for v in 0..16u32 {
                let mut x: State = [[0; LANES]; 4];
                for (b, w) in x.iter_mut().enumerate() {
                    w[0] = 0u32.wrapping_sub(v >> b & 1);
                }
                let mut y = x;
                sbox(&ANF[s], &mut x);
                sbox(&ANF_INV[s], &mut y);
                let out = |x: &State| (0..4).map(|b| (x[b][0] & 1) << b).sum::<u32>();
                assert_eq!(out(&x), u32::from(SBOX[s][v as usize]), "S{s}({v})");
                assert_eq!(out(&y), u32::from(inv[s][v as usize]), "S{s}^-1({v})");
            }
        }
    }

    /// Differential against the RustCrypto `serpent` crate (itself checked against the
    /// NESSIE vectors) for every key length, and block counts leaving every remainder of
    /// the group of LANES blocks.
    #[test]
    fn matches_the_rustcrypto_crate() {
        for (i, klen) in [16usize, 24, 32].into_iter().enumerate() {
            let key = bytes(7 + i as u64, klen);
            let ours = Serpent::new(&key).unwrap();
            let theirs = serpent::Serpent::new_from_slice(&key).unwrap();
            for blocks in 0..=2 * LANES + 1 {
                let plain = bytes(100 + blocks as u64, 16 * blocks);
                let mut a = plain.clone();
                ours.apply(true, &mut a);
                let mut b = plain.clone();
                for c in b.chunks_exact_mut(16) {
                    theirs.encrypt_block(GenericArray::from_mut_slice(c));
                }
                assert_eq!(a, b, "encrypt, key {klen} bytes, {blocks} blocks");
                ours.apply(false, &mut a);
                assert_eq!(a, plain, "decrypt, key {klen} bytes, {blocks} blocks");
                for c in b.chunks_exact_mut(16) {
                    theirs.decrypt_block(GenericArray::from_mut_slice(c));
                }
                assert_eq!(b, plain);
            }
        }
    }

    #[test]
    fn refuses_other_key_lengths() {
        for n in [0, 15, 17, 31, 33] {
            assert!(Serpent::new(&vec![0; n]).is_none(), "{n} bytes");
        }
    }
}

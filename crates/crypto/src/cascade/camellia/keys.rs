//! The portable half of the SIMD Camellia backends: the S-boxes as affine maps around the
//! inversion of GF(2^8), the key schedule of RFC 3713 for 256-bit keys, and a one-block
//! reference cipher over that schedule (for the tests and the self-test).
//!
//! # The S-boxes as GFNI computes them
//! Camellia's `s1` is an inversion in GF(2^8) between two affine maps of GF(2)^8 (the
//! specification builds it over a composite field; any two representations of GF(2^8)
//! differ by a linear map, which the affine maps absorb). Written around the inversion of
//! AES's representation (modulo x^8 + x^4 + x^3 + x + 1, the one `vgf2p8affineinvqb`
//! uses), `s1(x) = POST(inv(PRE(x)))` with the two maps of [`PRE`] and [`POST`]: the
//! pre-filter θ₁ of J. Kivilinna's thesis (University of Oulu, 2013, pages 43-48,
//! urn.fi/URN:NBN:fi:oulu-201305311409), and the post-filter ψ₁ composed with the AES
//! affine map, as libgcrypt's GFNI Camellia writes them. The others follow from RFC 3713
//! section 2.4.4: `s2 = s1 <<< 1`, `s3 = s1 >>> 1` (rotations of the output, so rotated
//! rows of the post-filter) and `s4(x) = s1(x <<< 1)` (a rotated input, so rotated rows of
//! the pre-filter). A test checks all four against RFC 3713's table of `s1`, entry by
//! entry, as the kernels evaluate them.
//!
//! The key schedule evaluates the S-boxes the same way (the inversion as `x^254`, by
//! multiplications without branches or tables), so nothing here indexes memory by a key.
#![forbid(unsafe_code)]

use zeroize::{Zeroize, ZeroizeOnDrop};

/// An affine map of GF(2)^8 in the form `vgf2p8affineqb` takes: output bit `i` is the
/// parity of the input bits set in `rows[i]`, then XORed with bit `i` of `c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Affine {
    pub(super) rows: [u8; 8],
    pub(super) c: u8,
}

impl Affine {
    /// The map applied to `x`.
    pub(super) const fn apply(&self, x: u8) -> u8 {
        let mut out = self.c;
        let mut i = 0;
        while i < 8 {
            out ^= (((self.rows[i] & x).count_ones() & 1) as u8) << i;
            i += 1;
        }
        out
    }

    /// The matrix operand of `vgf2p8affineqb` and `vgf2p8affineinvqb` (one per 64-bit
    /// lane): the row of output bit `i` in byte `7 - i`.
    pub(super) const fn matrix(&self) -> u64 {
        let mut m = 0u64;
        let mut i = 0;
        while i < 8 {
            m |= (self.rows[i] as u64) << (8 * (7 - i));
            i += 1;
        }
        m
    }

    /// The map followed by a rotation of its output left by `r` bits.
    const fn then_rotate(self, r: u32) -> Affine {
        let mut rows = [0u8; 8];
        let mut i = 0;
        while i < 8 {
            // Output bit i comes from bit i - r of the unrotated output.
            rows[i] = self.rows[(i + 8 - r as usize) % 8];
            i += 1;
        }
        Affine {
            rows,
            c: self.c.rotate_left(r),
        }
    }

    /// The map applied after rotating its input left by one bit.
    const fn after_rotate_1(self) -> Affine {
        let mut rows = [0u8; 8];
        let mut i = 0;
        while i < 8 {
            // Input bit k of the rotated input is bit k - 1 of the original.
            rows[i] = self.rows[i].rotate_right(1);
            i += 1;
        }
        Affine { rows, c: self.c }
    }
}

/// The pre-filter θ₁ (the thesis cited above): maps Camellia's input into AES's
/// representation of GF(2^8).
pub(super) const PRE: Affine = Affine {
    rows: [0xb7, 0x4c, 0x0b, 0xcd, 0x30, 0x25, 0x34, 0x61],
    c: 0x45,
};

/// The post-filter of `s1` (ψ₁ after the AES affine map), applied after the inversion.
pub(super) const POST: Affine = Affine {
    rows: [0x80, 0x66, 0x7d, 0xd8, 0x71, 0x7a, 0xfe, 0x38],
    c: 0x6e,
};

/// The pre-filter of `s4`: [`PRE`] after a rotation of the input by one bit.
pub(super) const PRE4: Affine = PRE.after_rotate_1();
/// The post-filter of `s2`: [`POST`], then its output rotated left by one bit.
pub(super) const POST2: Affine = POST.then_rotate(1);
/// The post-filter of `s3`: [`POST`], then its output rotated right by one bit.
pub(super) const POST3: Affine = POST.then_rotate(7);

/// Multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1, without branches.
const fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut r = 0u8;
    let mut i = 0;
    while i < 8 {
        r ^= a & 0u8.wrapping_sub(b & 1);
        let carry = 0u8.wrapping_sub(a >> 7);
        a = (a << 1) ^ (carry & 0x1b);
        b >>= 1;
        i += 1;
    }
    r
}

/// The inverse in GF(2^8) (AES's representation), 0 for 0: `x^254`.
pub(super) const fn gf_inv(x: u8) -> u8 {
    // x^254 = x^(2+4+8+16+32+64+128).
    let mut result = 1u8;
    let mut sq = x;
    let mut i = 0;
    while i < 7 {
        sq = gf_mul(sq, sq);
        result = gf_mul(result, sq);
        i += 1;
    }
    result
}

/// The S-box `s1` of RFC 3713.
pub(super) const fn s1(x: u8) -> u8 {
    POST.apply(gf_inv(PRE.apply(x)))
}
/// `s2(x) = s1(x) <<< 1`.
pub(super) const fn s2(x: u8) -> u8 {
    POST2.apply(gf_inv(PRE.apply(x)))
}
/// `s3(x) = s1(x) >>> 1`.
pub(super) const fn s3(x: u8) -> u8 {
    POST3.apply(gf_inv(PRE.apply(x)))
}
/// `s4(x) = s1(x <<< 1)`.
pub(super) const fn s4(x: u8) -> u8 {
    POST.apply(gf_inv(PRE4.apply(x)))
}

/// The P-function of RFC 3713 section 2.4.3 on the S-box outputs `t` (`t[0]` = t1).
pub(super) fn p(t: [u8; 8]) -> [u8; 8] {
    let [t1, t2, t3, t4, t5, t6, t7, t8] = t;
    [
        t1 ^ t3 ^ t4 ^ t6 ^ t7 ^ t8,
        t1 ^ t2 ^ t4 ^ t5 ^ t7 ^ t8,
        t1 ^ t2 ^ t3 ^ t5 ^ t6 ^ t8,
        t2 ^ t3 ^ t4 ^ t5 ^ t6 ^ t7,
        t1 ^ t2 ^ t6 ^ t7 ^ t8,
        t2 ^ t3 ^ t5 ^ t7 ^ t8,
        t3 ^ t4 ^ t5 ^ t6 ^ t8,
        t1 ^ t4 ^ t5 ^ t6 ^ t7,
    ]
}

/// The F-function of RFC 3713 section 2.4.1.
fn f(x: u64, k: u64) -> u64 {
    let t = (x ^ k).to_be_bytes();
    let s = [
        s1(t[0]),
        s2(t[1]),
        s3(t[2]),
        s4(t[3]),
        s2(t[4]),
        s3(t[5]),
        s4(t[6]),
        s1(t[7]),
    ];
    u64::from_be_bytes(p(s))
}

/// FL of RFC 3713 section 2.4.2.
#[cfg(test)]
fn fl(x: u64, k: u64) -> u64 {
    let (mut x1, mut x2) = ((x >> 32) as u32, x as u32);
    let (k1, k2) = ((k >> 32) as u32, k as u32);
    x2 ^= (x1 & k1).rotate_left(1);
    x1 ^= x2 | k2;
    (u64::from(x1) << 32) | u64::from(x2)
}

/// FL^-1 of RFC 3713 section 2.4.2.
#[cfg(test)]
fn fl_inv(y: u64, k: u64) -> u64 {
    let (mut y1, mut y2) = ((y >> 32) as u32, y as u32);
    let (k1, k2) = ((k >> 32) as u32, k as u32);
    y1 ^= y2 | k2;
    y2 ^= (y1 & k1).rotate_left(1);
    (u64::from(y1) << 32) | u64::from(y2)
}

/// The key schedule's constants Σ1..Σ6 (RFC 3713 section 2.2).
const SIGMA: [u64; 6] = [
    0xa09e_667f_3bcc_908b,
    0xb67a_e858_4caa_73b2,
    0xc6ef_372f_e94f_82be,
    0x54ff_53a5_f1d3_6f1c,
    0x10e5_27fa_de68_2d1d,
    0xb056_88c2_b3e6_c1fd,
];

/// The subkeys of one direction of 256-bit Camellia, in the order that direction uses
/// them (decryption is encryption with the subkeys reversed, RFC 3713 section 2.3.3).
/// Zeroized on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(super) struct Pass {
    /// XORed into D1 and D2 before the first round.
    pub(super) w_in: [u64; 2],
    /// The 24 round keys, in order.
    pub(super) k: [u64; 24],
    /// After rounds 6, 12 and 18: the key of FL (on D1) and of FL^-1 (on D2).
    pub(super) fl: [[u64; 2]; 3],
    /// XORed into D2 and D1 after the last round (the output is D2 || D1).
    pub(super) w_out: [u64; 2],
}

/// The encryption and decryption passes of a 32-byte key.
pub(super) fn schedule(key: &[u8; 32]) -> [Pass; 2] {
    let mut kl = u128::from_be_bytes(key[..16].try_into().expect("16 bytes"));
    let mut kr = u128::from_be_bytes(key[16..].try_into().expect("16 bytes"));
    let halves = |x: u128| [(x >> 64) as u64, x as u64];
    let [mut d1, mut d2] = halves(kl ^ kr);
    d2 ^= f(d1, SIGMA[0]);
    d1 ^= f(d2, SIGMA[1]);
    d1 ^= (kl >> 64) as u64;
    d2 ^= kl as u64;
    d2 ^= f(d1, SIGMA[2]);
    d1 ^= f(d2, SIGMA[3]);
    let mut ka = (u128::from(d1) << 64) | u128::from(d2);
    [d1, d2] = halves(ka ^ kr);
    d2 ^= f(d1, SIGMA[4]);
    d1 ^= f(d2, SIGMA[5]);
    let mut kb = (u128::from(d1) << 64) | u128::from(d2);
    d1.zeroize();
    d2.zeroize();
    // RFC 3713 section 2.2, the table for 192- and 256-bit keys: each pair of subkeys is
    // one of KL, KR, KA, KB rotated left, its high half then its low half.
    let rot = |x: u128, r: u32| halves(x.rotate_left(r));
    let mut pairs: [[u64; 2]; 17] = [
        rot(kl, 0),   // kw1, kw2
        rot(kb, 0),   // k1, k2
        rot(kr, 15),  // k3, k4
        rot(ka, 15),  // k5, k6
        rot(kr, 30),  // ke1, ke2
        rot(kb, 30),  // k7, k8
        rot(kl, 45),  // k9, k10
        rot(ka, 45),  // k11, k12
        rot(kl, 60),  // ke3, ke4
        rot(kr, 60),  // k13, k14
        rot(kb, 60),  // k15, k16
        rot(kl, 77),  // k17, k18
        rot(ka, 77),  // ke5, ke6
        rot(kr, 94),  // k19, k20
        rot(ka, 94),  // k21, k22
        rot(kl, 111), // k23, k24
        rot(kb, 111), // kw3, kw4
    ];
    kl.zeroize();
    kr.zeroize();
    ka.zeroize();
    kb.zeroize();
    let flat = pairs.as_flattened();
    let mut kw = [flat[0], flat[1], flat[32], flat[33]];
    let mut ke = [flat[8], flat[9], flat[16], flat[17], flat[24], flat[25]];
    let mut k = [0u64; 24];
    let round_slots = (2..8).chain(10..16).chain(18..24).chain(26..32);
    for (slot, i) in k.iter_mut().zip(round_slots) {
        *slot = flat[i];
    }
    pairs.zeroize();
    let enc = Pass {
        w_in: [kw[0], kw[1]],
        k,
        fl: [[ke[0], ke[1]], [ke[2], ke[3]], [ke[4], ke[5]]],
        w_out: [kw[2], kw[3]],
    };
    let mut rk = k;
    rk.reverse();
    let dec = Pass {
        w_in: [kw[2], kw[3]],
        k: rk,
        fl: [[ke[5], ke[4]], [ke[3], ke[2]], [ke[1], ke[0]]],
        w_out: [kw[0], kw[1]],
    };
    for v in [&mut k[..], &mut rk, &mut kw, &mut ke] {
        v.zeroize();
    }
    [enc, dec]
}

/// A pass in the form the SIMD kernels read: the whitening keys in block layout, and each
/// byte of every round and FL key repeated four times in a 32-bit word, so that a kernel
/// broadcasts it to every byte of a register from memory (a 32-bit broadcast, which
/// x86 folds into the instruction that uses it). Zeroized on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(super) struct Wide {
    /// XORed into each block before the first round: D1's key then D2's, big-endian.
    pub(super) w_in: [u8; 16],
    /// XORed into each output block (D2 || D1): D2's key then D1's, big-endian.
    pub(super) w_out: [u8; 16],
    /// Round `r`: byte `i` (big-endian, `t(i+1)` of the F-function) of its key.
    pub(super) k: [[u32; 8]; 24],
    /// FL layer `l`: the FL key (on D1) and the FL^-1 key (on D2), byte by byte.
    pub(super) fl: [[[u32; 8]; 2]; 3],
}

/// Each byte of `k` (big-endian) repeated in a 32-bit word.
fn spread(k: u64) -> [u32; 8] {
    k.to_be_bytes().map(|b| u32::from(b) * 0x0101_0101)
}

impl Wide {
    pub(super) fn new(pass: &Pass) -> Wide {
        let mut w_in = [0u8; 16];
        w_in[..8].copy_from_slice(&pass.w_in[0].to_be_bytes());
        w_in[8..].copy_from_slice(&pass.w_in[1].to_be_bytes());
        let mut w_out = [0u8; 16];
        w_out[..8].copy_from_slice(&pass.w_out[0].to_be_bytes());
        w_out[8..].copy_from_slice(&pass.w_out[1].to_be_bytes());
        Wide {
            w_in,
            w_out,
            k: pass.k.map(spread),
            fl: pass.fl.map(|pair| pair.map(spread)),
        }
    }
}

/// One block through a pass, as RFC 3713 section 2.3 writes the cipher: the reference the
/// key schedule is tested with (slow: every S-box is an inversion by multiplications).
#[cfg(test)]
pub(super) fn apply_block(pass: &Pass, block: &mut [u8; 16]) {
    let mut d1 = u64::from_be_bytes(block[..8].try_into().expect("8 bytes")) ^ pass.w_in[0];
    let mut d2 = u64::from_be_bytes(block[8..].try_into().expect("8 bytes")) ^ pass.w_in[1];
    for (seg, keys) in pass.k.chunks_exact(6).enumerate() {
        for pair in keys.chunks_exact(2) {
            d2 ^= f(d1, pair[0]);
            d1 ^= f(d2, pair[1]);
        }
        if let Some([a, b]) = pass.fl.get(seg) {
            d1 = fl(d1, *a);
            d2 = fl_inv(d2, *b);
        }
    }
    d2 ^= pass.w_out[0];
    d1 ^= pass.w_out[1];
    block[..8].copy_from_slice(&d2.to_be_bytes());
    block[8..].copy_from_slice(&d1.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3713 section 2.4.4, the table of `s1`.
    const SBOX1: [u8; 256] = [
        112, 130, 44, 236, 179, 39, 192, 229, 228, 133, 87, 53, 234, 12, 174, 65, //
        35, 239, 107, 147, 69, 25, 165, 33, 237, 14, 79, 78, 29, 101, 146, 189, //
        134, 184, 175, 143, 124, 235, 31, 206, 62, 48, 220, 95, 94, 197, 11, 26, //
        166, 225, 57, 202, 213, 71, 93, 61, 217, 1, 90, 214, 81, 86, 108, 77, //
        139, 13, 154, 102, 251, 204, 176, 45, 116, 18, 43, 32, 240, 177, 132, 153, //
        223, 76, 203, 194, 52, 126, 118, 5, 109, 183, 169, 49, 209, 23, 4, 215, //
        20, 88, 58, 97, 222, 27, 17, 28, 50, 15, 156, 22, 83, 24, 242, 34, //
        254, 68, 207, 178, 195, 181, 122, 145, 36, 8, 232, 168, 96, 252, 105, 80, //
        170, 208, 160, 125, 161, 137, 98, 151, 84, 91, 30, 149, 224, 255, 100, 210, //
        16, 196, 0, 72, 163, 247, 117, 219, 138, 3, 230, 218, 9, 63, 221, 148, //
        135, 92, 131, 2, 205, 74, 144, 51, 115, 103, 246, 243, 157, 127, 191, 226, //
        82, 155, 216, 38, 200, 55, 198, 59, 129, 150, 111, 75, 19, 190, 99, 46, //
        233, 121, 167, 140, 159, 110, 188, 142, 41, 245, 249, 182, 47, 253, 180, 89, //
        120, 152, 6, 106, 231, 70, 113, 186, 212, 37, 171, 66, 136, 162, 141, 250, //
        114, 7, 185, 85, 248, 238, 172, 10, 54, 73, 42, 104, 60, 56, 241, 164, //
        64, 40, 211, 123, 187, 201, 67, 193, 21, 227, 173, 244, 119, 199, 128, 158, //
    ];

    /// Every entry of the four S-boxes, computed as the kernels compute them (pre-filter,
    /// inversion, post-filter), against the RFC's table and its section 2.4.4 relations.
    #[test]
    fn affine_sboxes_match_rfc_3713() {
        for x in 0..=255u8 {
            let want = SBOX1[x as usize];
            assert_eq!(s1(x), want, "s1({x:#04x})");
            assert_eq!(s2(x), want.rotate_left(1), "s2({x:#04x})");
            assert_eq!(s3(x), want.rotate_right(1), "s3({x:#04x})");
            assert_eq!(s4(x), SBOX1[x.rotate_left(1) as usize], "s4({x:#04x})");
        }
    }

    #[test]
    fn inversion_inverts() {
        assert_eq!(gf_inv(0), 0);
        assert_eq!(gf_inv(1), 1);
        for x in 1..=255u8 {
            assert_eq!(gf_mul(x, gf_inv(x)), 1, "{x}");
        }
        // FIPS-197 section 4.2's example: {53} and {ca} are inverses.
        assert_eq!(gf_inv(0x53), 0xca);
    }

    #[test]
    fn matrix_is_the_gfni_operand_layout() {
        // The identity: output bit i from input bit i, row i in byte 7 - i.
        let id = Affine {
            rows: [1, 2, 4, 8, 16, 32, 64, 128],
            c: 0,
        };
        assert_eq!(id.matrix(), 0x0102_0408_1020_4080);
        assert_eq!(id.apply(0x5a), 0x5a);
    }

    /// RFC 3713 appendix A, the 256-bit key, through the reference cipher both ways.
    #[test]
    fn reference_cipher_matches_rfc_3713() {
        let key: [u8; 32] =
            hex::decode("0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff")
                .unwrap()
                .try_into()
                .unwrap();
        let [enc, dec] = schedule(&key);
        let mut b: [u8; 16] = hex::decode("0123456789abcdeffedcba9876543210")
            .unwrap()
            .try_into()
            .unwrap();
        apply_block(&enc, &mut b);
        assert_eq!(hex::encode(b), "9acc237dff16d76c20ef7c919e3a7509");
        apply_block(&dec, &mut b);
        assert_eq!(hex::encode(b), "0123456789abcdeffedcba9876543210");
    }
}

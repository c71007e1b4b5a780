//! What the Kuznyechik kernels share and can be checked without them: the S-box `pi`
//! and its inverse, the field GF(2^8) of the standard, the linear map `L` (and its
//! inverse) as 16x16 matrices over that field, each entry also as the 8x8 bit matrix of a
//! GFNI affine instruction, the key schedule, and a one-block reference cipher over them.
//!
//! Facts of GOST R 34.12-2015 (RFC 7801): `pi` (section 4.1.1), the field with the
//! polynomial x^8 + x^7 + x^6 + x + 1 and the coefficients of `l` (section 4.1.2), the
//! key schedule with the constants `C_i = L(Vec128(i))` (section 4.3). A block is written
//! as the standard writes it, most significant byte first: byte 0 of the array is
//! `a_15`.

use zeroize::Zeroize;

/// The S-box `pi` (RFC 7801 section 4.1.1).
pub(super) const PI: [u8; 256] = [
    0xfc, 0xee, 0xdd, 0x11, 0xcf, 0x6e, 0x31, 0x16, 0xfb, 0xc4, 0xfa, 0xda, 0x23, 0xc5, 0x04, 0x4d,
    0xe9, 0x77, 0xf0, 0xdb, 0x93, 0x2e, 0x99, 0xba, 0x17, 0x36, 0xf1, 0xbb, 0x14, 0xcd, 0x5f, 0xc1,
    0xf9, 0x18, 0x65, 0x5a, 0xe2, 0x5c, 0xef, 0x21, 0x81, 0x1c, 0x3c, 0x42, 0x8b, 0x01, 0x8e, 0x4f,
    0x05, 0x84, 0x02, 0xae, 0xe3, 0x6a, 0x8f, 0xa0, 0x06, 0x0b, 0xed, 0x98, 0x7f, 0xd4, 0xd3, 0x1f,
    0xeb, 0x34, 0x2c, 0x51, 0xea, 0xc8, 0x48, 0xab, 0xf2, 0x2a, 0x68, 0xa2, 0xfd, 0x3a, 0xce, 0xcc,
    0xb5, 0x70, 0x0e, 0x56, 0x08, 0x0c, 0x76, 0x12, 0xbf, 0x72, 0x13, 0x47, 0x9c, 0xb7, 0x5d, 0x87,
    0x15, 0xa1, 0x96, 0x29, 0x10, 0x7b, 0x9a, 0xc7, 0xf3, 0x91, 0x78, 0x6f, 0x9d, 0x9e, 0xb2, 0xb1,
    0x32, 0x75, 0x19, 0x3d, 0xff, 0x35, 0x8a, 0x7e, 0x6d, 0x54, 0xc6, 0x80, 0xc3, 0xbd, 0x0d, 0x57,
    0xdf, 0xf5, 0x24, 0xa9, 0x3e, 0xa8, 0x43, 0xc9, 0xd7, 0x79, 0xd6, 0xf6, 0x7c, 0x22, 0xb9, 0x03,
    0xe0, 0x0f, 0xec, 0xde, 0x7a, 0x94, 0xb0, 0xbc, 0xdc, 0xe8, 0x28, 0x50, 0x4e, 0x33, 0x0a, 0x4a,
    0xa7, 0x97, 0x60, 0x73, 0x1e, 0x00, 0x62, 0x44, 0x1a, 0xb8, 0x38, 0x82, 0x64, 0x9f, 0x26, 0x41,
    0xad, 0x45, 0x46, 0x92, 0x27, 0x5e, 0x55, 0x2f, 0x8c, 0xa3, 0xa5, 0x7d, 0x69, 0xd5, 0x95, 0x3b,
    0x07, 0x58, 0xb3, 0x40, 0x86, 0xac, 0x1d, 0xf7, 0x30, 0x37, 0x6b, 0xe4, 0x88, 0xd9, 0xe7, 0x89,
    0xe1, 0x1b, 0x83, 0x49, 0x4c, 0x3f, 0xf8, 0xfe, 0x8d, 0x53, 0xaa, 0x90, 0xca, 0xd8, 0x85, 0x61,
    0x20, 0x71, 0x67, 0xa4, 0x2d, 0x2b, 0x09, 0x5b, 0xcb, 0x9b, 0x25, 0xd0, 0xbe, 0xe5, 0x6c, 0x52,
    0x59, 0xa6, 0x74, 0xd2, 0xe6, 0xf4, 0xb4, 0xc0, 0xd1, 0x66, 0xaf, 0xc2, 0x39, 0x4b, 0x63, 0xb6,
];

/// `pi^-1`.
pub(super) const PI_INV: [u8; 256] = invert(&PI);

const fn invert(s: &[u8; 256]) -> [u8; 256] {
    let mut out = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        out[s[i] as usize] = i as u8;
        i += 1;
    }
    out
}

/// The coefficients of `l`, for the bytes `a_15` (byte 0) to `a_0` (byte 15).
const L_COEF: [u8; 16] = [
    148, 32, 133, 16, 194, 192, 1, 251, 1, 192, 194, 16, 133, 32, 148, 1,
];

/// Multiplication in GF(2^8) modulo x^8 + x^7 + x^6 + x + 1.
pub(super) const fn mul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0xc3;
        }
        b >>= 1;
    }
    p
}

/// `R`: the bytes shift one place towards the end, and byte 0 becomes `l` of them all.
const fn r(a: [u8; 16]) -> [u8; 16] {
    let mut l = 0u8;
    let mut k = 0;
    while k < 16 {
        l ^= mul(L_COEF[k], a[k]);
        k += 1;
    }
    let mut out = [0u8; 16];
    out[0] = l;
    let mut k = 1;
    while k < 16 {
        out[k] = a[k - 1];
        k += 1;
    }
    out
}

/// `R^-1`: the bytes shift one place towards the start, and the last byte is recovered
/// from `l` (its coefficient is 1).
const fn r_inv(b: [u8; 16]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let mut k = 0;
    while k < 15 {
        out[k] = b[k + 1];
        k += 1;
    }
    let mut last = b[0];
    let mut k = 0;
    while k < 15 {
        last ^= mul(L_COEF[k], out[k]);
        k += 1;
    }
    out[15] = last;
    out
}

/// `L = R^16`.
pub(super) const fn l(mut a: [u8; 16]) -> [u8; 16] {
    let mut i = 0;
    while i < 16 {
        a = r(a);
        i += 1;
    }
    a
}

/// `L^-1`.
pub(super) const fn l_inv(mut a: [u8; 16]) -> [u8; 16] {
    let mut i = 0;
    while i < 16 {
        a = r_inv(a);
        i += 1;
    }
    a
}

/// A linear map of blocks as its matrix over GF(2^8): `m[j][i]` is the coefficient of
/// input byte `i` in output byte `j`.
type Matrix = [[u8; 16]; 16];

const fn matrix(inverse: bool) -> Matrix {
    let mut m = [[0u8; 16]; 16];
    let mut i = 0;
    while i < 16 {
        let mut e = [0u8; 16];
        e[i] = 1;
        let col = if inverse { l_inv(e) } else { l(e) };
        let mut j = 0;
        while j < 16 {
            m[j][i] = col[j];
            j += 1;
        }
        i += 1;
    }
    m
}

/// The matrix of `L`.
pub(super) const L_MATRIX: Matrix = matrix(false);
/// The matrix of `L^-1`.
pub(super) const L_INV_MATRIX: Matrix = matrix(true);

/// Multiplication by `c` as the bit matrix of `vgf2p8affineqb`: output bit `i` is the
/// parity of the input ANDed with byte `7 - i` of the quadword, so that byte holds bit
/// `i` of `c x^k` for every input bit `k`.
pub(super) const fn affine_of(c: u8) -> u64 {
    let mut q = 0u64;
    let mut i = 0;
    while i < 8 {
        let mut row = 0u8;
        let mut k = 0;
        while k < 8 {
            if (mul(c, 1 << k) >> i) & 1 != 0 {
                row |= 1 << k;
            }
            k += 1;
        }
        q |= (row as u64) << (8 * (7 - i));
        i += 1;
    }
    q
}

const fn affine_matrix(m: &Matrix) -> [[u64; 16]; 16] {
    let mut out = [[0u64; 16]; 16];
    let mut j = 0;
    while j < 16 {
        let mut i = 0;
        while i < 16 {
            out[j][i] = affine_of(m[j][i]);
            i += 1;
        }
        j += 1;
    }
    out
}

/// [`L_MATRIX`] entry by entry as affine bit matrices.
pub(super) const L_AFFINE: [[u64; 16]; 16] = affine_matrix(&L_MATRIX);
/// [`L_INV_MATRIX`] entry by entry as affine bit matrices.
pub(super) const L_INV_AFFINE: [[u64; 16]; 16] = affine_matrix(&L_INV_MATRIX);

/// `S` (`pi` on every byte), or `S^-1` with `PI_INV`.
fn s(sbox: &[u8; 256], a: &mut [u8; 16]) {
    for x in a.iter_mut() {
        *x = sbox[usize::from(*x)];
    }
}

fn xor(a: &mut [u8; 16], k: &[u8; 16]) {
    for (x, y) in a.iter_mut().zip(k) {
        *x ^= y;
    }
}

/// The ten round keys `K_1..K_10` of a 32-byte key (RFC 7801 section 4.3).
pub(super) fn schedule(key: &[u8; 32]) -> [[u8; 16]; 10] {
    let mut k = [[0u8; 16]; 10];
    k[0].copy_from_slice(&key[..16]);
    k[1].copy_from_slice(&key[16..]);
    for pair in 1..5 {
        let (mut a1, mut a0) = (k[2 * pair - 2], k[2 * pair - 1]);
        for i in 1..=8u8 {
            let mut v = [0u8; 16];
            v[15] = 8 * (pair as u8 - 1) + i;
            let c = l(v);
            // F[C](a1, a0) = (LSX[C](a1) ^ a0, a1).
            let mut t = a1;
            xor(&mut t, &c);
            s(&PI, &mut t);
            let mut t = l(t);
            xor(&mut t, &a0);
            a0 = a1;
            a1 = t;
        }
        k[2 * pair] = a1;
        k[2 * pair + 1] = a0;
        a1.zeroize();
        a0.zeroize();
    }
    k
}

/// One direction of the cipher in the form the kernels run: optionally `L^-1` first, nine
/// rounds of "XOR the key, the S-box, the linear map" (the last without the map when
/// `last_map` is false), then the XOR of the final key. Encryption is `L` with the round
/// keys as they are; decryption is `L^-1` applied first and to the keys `K_10..K_2`,
/// which moves each `L^-1` across the XOR before it.
pub(super) struct Pass {
    /// The nine round keys and the final one.
    pub(super) keys: [[u8; 16]; 10],
    /// `L^-1` before the first round (decryption).
    pub(super) first_map: bool,
    /// The linear map after the ninth round (encryption).
    pub(super) last_map: bool,
    /// Encryption (`pi` and `L`) or decryption (`pi^-1` and `L^-1`).
    pub(super) encrypt: bool,
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.keys.zeroize();
    }
}

impl Pass {
    /// The encryption and decryption passes of a 32-byte key.
    pub(super) fn both(key: &[u8; 32]) -> [Pass; 2] {
        let mut k = schedule(key);
        let enc = Pass {
            keys: k,
            first_map: false,
            last_map: true,
            encrypt: true,
        };
        let mut dk = [[0u8; 16]; 10];
        for (r, d) in dk.iter_mut().take(9).enumerate() {
            *d = l_inv(k[9 - r]);
        }
        dk[9] = k[0];
        k.zeroize();
        let dec = Pass {
            keys: dk,
            first_map: true,
            last_map: false,
            encrypt: false,
        };
        dk.zeroize();
        [enc, dec]
    }

    /// The pass on one block (the reference the kernels are checked against).
    #[cfg(test)]
    pub(super) fn apply_block(&self, a: &mut [u8; 16]) {
        type Map = fn([u8; 16]) -> [u8; 16];
        let (sbox, map): (&[u8; 256], Map) = if self.encrypt {
            (&PI, l)
        } else {
            (&PI_INV, l_inv)
        };
        if self.first_map {
            *a = map(*a);
        }
        for r in 0..9 {
            xor(a, &self.keys[r]);
            s(sbox, a);
            if r < 8 || self.last_map {
                *a = map(*a);
            }
        }
        xor(a, &self.keys[9]);
    }
}

/// A [`Pass`] in the kernels' form: each byte of each key repeated in a 32-bit word (one
/// broadcast load per byte register).
pub(super) struct Wide {
    pub(super) k: [[u32; 16]; 10],
    pub(super) first_map: bool,
    pub(super) last_map: bool,
    pub(super) encrypt: bool,
}

impl Wide {
    pub(super) fn new(p: &Pass) -> Wide {
        let mut k = [[0u32; 16]; 10];
        for (w, key) in k.iter_mut().zip(&p.keys) {
            for (x, b) in w.iter_mut().zip(key) {
                *x = u32::from_ne_bytes([*b; 4]);
            }
        }
        Wide {
            k,
            first_map: p.first_map,
            last_map: p.last_map,
            encrypt: p.encrypt,
        }
    }
}

impl Drop for Wide {
    fn drop(&mut self) {
        self.k.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 7801 section 5.1-5.3: `S`, `R` and `L` on the standard's examples.
    #[test]
    fn transformations_match_the_standard_examples() {
        let mut a: [u8; 16] = unhex("ffeeddccbbaa99881122334455667700")
            .try_into()
            .unwrap();
        s(&PI, &mut a);
        assert_eq!(a.to_vec(), unhex("b66cd8887d38e8d77765aeea0c9a7efc"));
        let a: [u8; 16] = unhex("00000000000000000000000000000100")
            .try_into()
            .unwrap();
        assert_eq!(r(a).to_vec(), unhex("94000000000000000000000000000001"));
        let a: [u8; 16] = unhex("64a59400000000000000000000000000")
            .try_into()
            .unwrap();
        assert_eq!(l(a).to_vec(), unhex("d456584dd0e3e84cc3166e4b7fa2890d"));
        assert_eq!(l_inv(l(a)), a);
        assert_eq!(r_inv(r(a)), a);
        for x in 0..=255u8 {
            assert_eq!(PI_INV[usize::from(PI[usize::from(x)])], x);
        }
    }

    /// RFC 7801 section 5.4: the round keys of the example key, and the block.
    #[test]
    fn key_schedule_and_block_match_the_standard() {
        let key = unhex("8899aabbccddeeff0011223344556677fedcba98765432100123456789abcdef");
        let k = schedule(key.as_slice().try_into().unwrap());
        assert_eq!(k[2].to_vec(), unhex("db31485315694343228d6aef8cc78c44"));
        assert_eq!(k[9].to_vec(), unhex("72e9dd7416bcf45b755dbaa88e4a4043"));
        let [enc, dec] = Pass::both(key.as_slice().try_into().unwrap());
        let plain: [u8; 16] = unhex("1122334455667700ffeeddccbbaa9988")
            .try_into()
            .unwrap();
        let mut b = plain;
        enc.apply_block(&mut b);
        assert_eq!(b.to_vec(), unhex("7f679d90bebc24305a468d42b9d4edcd"));
        dec.apply_block(&mut b);
        assert_eq!(b, plain);
    }

    /// Every affine matrix multiplies as the field does (checked bit by bit here; the
    /// kernel tests check the instruction's reading of it).
    #[test]
    fn affine_matrices_multiply() {
        for c in [0u8, 1, 2, 0x94, 0xc3, 0xff] {
            let q = affine_of(c);
            for x in 0..=255u8 {
                let mut y = 0u8;
                for i in 0..8 {
                    let row = (q >> (8 * (7 - i))) as u8;
                    y |= (((row & x).count_ones() & 1) as u8) << i;
                }
                assert_eq!(y, mul(c, x), "{c} * {x}");
            }
        }
    }
}

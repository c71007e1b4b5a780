//! The bitsliced AES round functions: four blocks at a time in eight `u64` bit planes.
//!
//! Layout: plane `k` holds bit `k` of all 64 bytes of four blocks; the byte at index `i`
//! (0..16) of block `j` (0..4) sits at bit position `16 * j + i`. Since AES loads its state
//! column by column, `i = 4 * column + row`, so each 16-bit lane of a plane is one block and
//! each nibble is one column.
//!
//! Why this is constant-time: every operation below is AND, XOR, OR, NOT or a shift by a
//! constant amount on whole planes. There is no table, no branch and no memory address that
//! depends on key or data. The S-box is computed, not looked up: the GF(2^8) inverse as
//! x^254 (four multiplications, seven squarings, each a fixed network of ANDs and XORs over
//! the planes) followed by the affine map of FIPS-197 section 5.1.1.

/// Eight bit planes of four AES states.
pub(super) type State = [u64; 8];

/// Repeats a 16-bit pattern into each of the four lanes.
const fn lanes(pattern: u64) -> u64 {
    pattern * 0x0001_0001_0001_0001
}

/// Transposes an 8x8 bit matrix held in a `u64` (byte `r`, bit `c` <-> byte `c`, bit `r`).
#[inline(always)]
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^= t ^ (t << 28);
    x
}

/// Four blocks (64 bytes) into bit planes.
#[inline(always)]
pub(super) fn pack(bytes: &[u8; 64]) -> State {
    let mut s = [0u64; 8];
    for g in 0..8 {
        let word = u64::from_le_bytes(bytes[8 * g..8 * g + 8].try_into().unwrap_or([0; 8]));
        let t = transpose8(word);
        for (k, plane) in s.iter_mut().enumerate() {
            *plane |= ((t >> (8 * k)) & 0xff) << (8 * g);
        }
    }
    s
}

/// Bit planes back into four blocks.
#[inline(always)]
pub(super) fn unpack(s: &State) -> [u8; 64] {
    let mut out = [0u8; 64];
    for g in 0..8 {
        let mut t = 0u64;
        for (k, plane) in s.iter().enumerate() {
            t |= ((plane >> (8 * g)) & 0xff) << (8 * k);
        }
        out[8 * g..8 * g + 8].copy_from_slice(&transpose8(t).to_le_bytes());
    }
    out
}

/// Reduces a product of degree <= 14 modulo the AES polynomial x^8 + x^4 + x^3 + x + 1.
#[inline(always)]
fn reduce(mut c: [u64; 15]) -> State {
    for k in (8..15).rev() {
        let h = c[k];
        c[k - 4] ^= h;
        c[k - 5] ^= h;
        c[k - 7] ^= h;
        c[k - 8] ^= h;
    }
    [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]
}

#[inline(always)]
fn gf_mul(a: &State, b: &State) -> State {
    let mut c = [0u64; 15];
    for i in 0..8 {
        for j in 0..8 {
            c[i + j] ^= a[i] & b[j];
        }
    }
    reduce(c)
}

#[inline(always)]
fn gf_square(a: &State) -> State {
    let mut c = [0u64; 15];
    for i in 0..8 {
        c[2 * i] = a[i];
    }
    reduce(c)
}

/// x^254, which is x^-1 for x != 0 and 0 for x = 0 (as AES requires).
#[inline(always)]
fn gf_inverse(x: &State) -> State {
    let x2 = gf_square(x);
    let x3 = gf_mul(&x2, x);
    let x6 = gf_square(&x3);
    let x12 = gf_square(&x6);
    let x15 = gf_mul(&x12, &x3);
    let x30 = gf_square(&x15);
    let x60 = gf_square(&x30);
    let x120 = gf_square(&x60);
    let x240 = gf_square(&x120);
    let x252 = gf_mul(&x240, &x12);
    gf_mul(&x252, &x2)
}

/// All-ones in plane `k` when bit `k` of `c` is set.
#[inline(always)]
fn constant_plane(c: u8, k: usize) -> u64 {
    0u64.wrapping_sub(((c >> k) & 1) as u64)
}

/// SubBytes (FIPS-197 5.1.1): inverse, then b'_i = b_i + b_(i+4) + b_(i+5) + b_(i+6) +
/// b_(i+7) + c_i with c = 0x63.
#[inline(always)]
pub(super) fn sub_bytes(s: &mut State) {
    let inv = gf_inverse(s);
    for i in 0..8 {
        s[i] = inv[i]
            ^ inv[(i + 4) % 8]
            ^ inv[(i + 5) % 8]
            ^ inv[(i + 6) % 8]
            ^ inv[(i + 7) % 8]
            ^ constant_plane(0x63, i);
    }
}

/// InvSubBytes (FIPS-197 5.3.2): the inverse affine map b_i = b'_(i+2) + b'_(i+5) +
/// b'_(i+7) + d_i with d = 0x05, then the inverse.
#[inline(always)]
pub(super) fn inv_sub_bytes(s: &mut State) {
    let mut a = [0u64; 8];
    for i in 0..8 {
        a[i] = s[(i + 2) % 8] ^ s[(i + 5) % 8] ^ s[(i + 7) % 8] ^ constant_plane(0x05, i);
    }
    *s = gf_inverse(&a);
}

/// Rotates each 16-bit lane right by `n` bits (0 < n < 16).
#[inline(always)]
fn lane_rotr(t: u64, n: u32) -> u64 {
    let low = lanes((1u64 << (16 - n)) - 1);
    ((t >> n) & low) | ((t << (16 - n)) & !low)
}

/// Row `r` of every column: bit positions 4c + r in each lane.
const ROW: [u64; 4] = [lanes(0x1111), lanes(0x2222), lanes(0x4444), lanes(0x8888)];

/// ShiftRows: `s'[r][c] = s[r][c + r mod 4]`, i.e. row `r` rotates right by 4r bits.
#[inline(always)]
pub(super) fn shift_rows(s: &mut State) {
    rotate_rows(s, [4, 8, 12]);
}

/// InvShiftRows: row `r` rotates left by 4r bits (right by 16 - 4r).
#[inline(always)]
pub(super) fn inv_shift_rows(s: &mut State) {
    rotate_rows(s, [12, 8, 4]);
}

/// Rotates rows 1, 2 and 3 of every lane right by `by[0]`, `by[1]` and `by[2]` bits.
#[inline(always)]
fn rotate_rows(s: &mut State, by: [u32; 3]) {
    for p in s.iter_mut() {
        let x = *p;
        *p = (x & ROW[0])
            | lane_rotr(x & ROW[1], by[0])
            | lane_rotr(x & ROW[2], by[1])
            | lane_rotr(x & ROW[3], by[2]);
    }
}

/// Within each column (nibble), row r takes the byte of row r + n (mod 4).
#[inline(always)]
fn rot_rows(x: u64, n: u32) -> u64 {
    let keep = lanes(0x1111 * ((1u64 << (4 - n)) - 1));
    ((x >> n) & keep) | ((x << (4 - n)) & !keep)
}

/// Multiplication by x (0x02) on every byte: a shift across planes with the feedback of
/// x^8 = x^4 + x^3 + x + 1.
#[inline(always)]
fn xtime(t: &State) -> State {
    [
        t[7],
        t[0] ^ t[7],
        t[1],
        t[2] ^ t[7],
        t[3] ^ t[7],
        t[4],
        t[5],
        t[6],
    ]
}

/// MixColumns: out_r = 2 a_r + 3 a_(r+1) + a_(r+2) + a_(r+3)
///                   = 2 (a_r + a_(r+1)) + a_(r+1) + a_(r+2) + a_(r+3).
#[inline(always)]
pub(super) fn mix_columns(s: &mut State) {
    let r1: State = core::array::from_fn(|k| rot_rows(s[k], 1));
    let t: State = core::array::from_fn(|k| s[k] ^ r1[k]);
    let xt = xtime(&t);
    for k in 0..8 {
        s[k] = xt[k] ^ r1[k] ^ rot_rows(s[k], 2) ^ rot_rows(s[k], 3);
    }
}

/// InvMixColumns, as MixColumns after the circulant (05, 00, 04, 00):
/// u_r = a_r + 4 (a_r + a_(r+2)), since (02 03 01 01) x (05 00 04 00) = (0e 0b 0d 09).
#[inline(always)]
pub(super) fn inv_mix_columns(s: &mut State) {
    let t: State = core::array::from_fn(|k| s[k] ^ rot_rows(s[k], 2));
    let x4 = xtime(&xtime(&t));
    for k in 0..8 {
        s[k] ^= x4[k];
    }
    mix_columns(s);
}

#[inline(always)]
pub(super) fn add_round_key(s: &mut State, rk: &State) {
    for k in 0..8 {
        s[k] ^= rk[k];
    }
}

/// The cipher (FIPS-197 5.1) on four blocks; `rk` holds `rounds + 1` packed round keys.
#[inline(always)]
pub(super) fn encrypt(rk: &[State], rounds: usize, s: &mut State) {
    add_round_key(s, &rk[0]);
    for key in &rk[1..rounds] {
        sub_bytes(s);
        shift_rows(s);
        mix_columns(s);
        add_round_key(s, key);
    }
    sub_bytes(s);
    shift_rows(s);
    add_round_key(s, &rk[rounds]);
}

/// The inverse cipher (FIPS-197 5.3) on four blocks.
#[inline(always)]
pub(super) fn decrypt(rk: &[State], rounds: usize, s: &mut State) {
    add_round_key(s, &rk[rounds]);
    for key in rk[1..rounds].iter().rev() {
        inv_shift_rows(s);
        inv_sub_bytes(s);
        add_round_key(s, key);
        inv_mix_columns(s);
    }
    inv_shift_rows(s);
    inv_sub_bytes(s);
    add_round_key(s, &rk[0]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_puts_bit_k_of_byte_i_at_plane_k_position_i() {
        for i in 0..64 {
            for k in 0..8 {
                let mut b = [0u8; 64];
                b[i] = 1 << k;
                let s = pack(&b);
                for (kk, plane) in s.iter().enumerate() {
                    let want = if kk == k { 1u64 << i } else { 0 };
                    assert_eq!(*plane, want, "byte {i} bit {k} plane {kk}");
                }
                assert_eq!(unpack(&s), b);
            }
        }
    }

    #[test]
    fn sbox_matches_fips197_figure7_samples() {
        // FIPS-197 Figure 7: S(00)=63, S(01)=7c, S(53)=ed, S(ff)=16, S(10)=ca.
        let mut b = [0u8; 64];
        let samples = [
            (0x00u8, 0x63u8),
            (0x01, 0x7c),
            (0x53, 0xed),
            (0xff, 0x16),
            (0x10, 0xca),
        ];
        for (i, (x, _)) in samples.iter().enumerate() {
            b[i] = *x;
        }
        let mut s = pack(&b);
        sub_bytes(&mut s);
        let out = unpack(&s);
        for (i, (_, y)) in samples.iter().enumerate() {
            assert_eq!(out[i], *y);
        }
        inv_sub_bytes(&mut s);
        assert_eq!(unpack(&s), b);
    }

    #[test]
    fn round_functions_invert() {
        let b: [u8; 64] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        let mut s = pack(&b);
        shift_rows(&mut s);
        mix_columns(&mut s);
        inv_mix_columns(&mut s);
        inv_shift_rows(&mut s);
        assert_eq!(unpack(&s), b);
    }
}

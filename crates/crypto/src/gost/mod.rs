//! GOST 28147-89 and Magma (GOST R 34.12-2015, RFC 8891): the 64-bit block cipher with its
//! eight S-box parameter sets, both byte conventions, and every mode of both standards.
//!
//! # Two byte conventions, one cipher
//! GOST 28147-89 libraries (CryptoPro, gost-engine, libgcrypt, Botan) read key word `K_i`
//! as the little-endian word of key bytes `4i..4i+3`, and a block's bytes 0..3 (little
//! endian) are the half `N1` that enters the first round. Magma (RFC 8891) reads key and
//! block as big-endian strings. Internally a block is a `u64` whose low word is `N1`; the
//! GOST 28147-89 types read it little-endian, the Magma types big-endian, and the key words
//! are read in the matching order. That is exactly the documented mapping
//! `Magma(K, P) = rev8(GOST89_Z(wordrev(K), rev8(P)))` (tested in `tests/gost`).
//!
//! # Parameter sets
//! [`Sbox`] names the eight S-box sets by their OID names (`id-Gost28147-89-CryptoPro-A-ParamSet`,
//! ..., `id-tc26-gost-28147-param-Z`). GOST 28147-89 types take one explicitly (libraries
//! disagree on the default); Magma always uses `id-tc26-gost-28147-param-Z`.
//!
//! # Modes
//! GOST 28147-89 (little-endian): [`Gost89Ecb`], [`Gost89Cnt`] (gamming, N4 added modulo
//! 2^32 - 1 with the end-around carry), [`Gost89Cfb`], [`Gost89Cbc`], [`Gost89Mac`]
//! (imitovstavka, with the extra zero block for messages of at most 8 bytes), each with
//! optional CryptoPro key meshing (RFC 4357 section 2.3).
//! Magma (GOST R 34.13-2015, big-endian): [`MagmaEcb`], [`MagmaCtr`], [`MagmaOfb`],
//! [`MagmaCbc`], [`MagmaCfb`] (the last three with an m = z*64-bit register, z chains
//! interleaved), [`MagmaMac`], [`MagmaCtrAcpkm`] (RFC 8645) and [`MagmaMgm`] (RFC 9058).
//!
//! # Backends ([`GostBackend`])
//! - `soft` (`soft.rs`): portable, no `unsafe`, one block at a time, S-boxes evaluated as
//!   lookups inside 64-bit registers (a shift by a secret count), never in memory;
//! - `avx2` (`avx2.rs`): 32 blocks per group byte-sliced over eight ymm registers, the
//!   S-boxes as `vpshufb` nibble tables held in registers, for ECB and everything built on
//!   ECB of independent blocks (CNT/CTR/CTR-ACPKM keystreams, CBC and CFB decryption, MGM's
//!   two counter streams).
//!
//! Selection follows the AES rule: the fastest usable backend, unless
//! `SECTORCRYPT_BACKEND` names one. A name that only AES has (`aesni`, `vaes`) gives GOST
//! the portable backend; an unknown name, or a name this CPU cannot run, is an error. Each
//! backend passes a known-answer self-test before first use.
//!
//! # Constant time
//! No memory address and no branch depends on the key, the data or the S-box: `soft.rs`
//! and `avx2.rs` explain how, and how it was checked: `scripts/gost-ct-disasm.sh` (the
//! addressing forms and branches of the hot loops) and `scripts/gost-ct-cachegrind.sh`
//! (identical instruction, access and L1-miss counts for different secrets).

mod avx2_shim;
mod backend;
mod gost89;
mod magma;
pub(crate) mod sbox_tables;
pub(crate) mod soft;

pub use backend::GostBackend;
pub use gost89::{
    Gost89Cbc, Gost89Cfb, Gost89CfbStream, Gost89Cnt, Gost89CntStream, Gost89Ecb, Gost89Mac,
    Gost89MacState,
};
pub use magma::{
    MagmaCbc, MagmaCfb, MagmaCtr, MagmaCtrAcpkm, MagmaEcb, MagmaMac, MagmaMgm, MagmaOfb,
    MAGMA_BLOCK,
};

use crate::error::{InputError, KeyError};
use crate::Error;
use soft::{PackedSbox, Schedule, SideJob, DEC_ORDER, ENC_ORDER};

/// The GOST block size in bytes.
pub const GOST_BLOCK: usize = 8;

/// The eight S-box parameter sets of GOST 28147-89, by OID name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sbox {
    /// id-GostR3411-94-TestParamSet, 1.2.643.2.2.30.0 (libgcrypt's and Botan's default).
    GostR3411_94Test,
    /// id-GostR3411-94-CryptoProParamSet, 1.2.643.2.2.30.1.
    GostR3411_94CryptoPro,
    /// id-Gost28147-89-TestParamSet, 1.2.643.2.2.31.0.
    Gost28147Test,
    /// id-Gost28147-89-CryptoPro-A-ParamSet, 1.2.643.2.2.31.1.
    CryptoProA,
    /// id-Gost28147-89-CryptoPro-B-ParamSet, 1.2.643.2.2.31.2.
    CryptoProB,
    /// id-Gost28147-89-CryptoPro-C-ParamSet, 1.2.643.2.2.31.3.
    CryptoProC,
    /// id-Gost28147-89-CryptoPro-D-ParamSet, 1.2.643.2.2.31.4.
    CryptoProD,
    /// id-tc26-gost-28147-param-Z, 1.2.643.7.1.2.5.1.1 (Magma's, RFC 8891).
    Tc26Z,
}

impl Sbox {
    /// Every parameter set.
    pub const ALL: [Sbox; 8] = [
        Sbox::GostR3411_94Test,
        Sbox::GostR3411_94CryptoPro,
        Sbox::Gost28147Test,
        Sbox::CryptoProA,
        Sbox::CryptoProB,
        Sbox::CryptoProC,
        Sbox::CryptoProD,
        Sbox::Tc26Z,
    ];

    /// The OID name, e.g. `id-Gost28147-89-CryptoPro-A-ParamSet`.
    pub fn name(self) -> &'static str {
        match self {
            Sbox::GostR3411_94Test => "id-GostR3411-94-TestParamSet",
            Sbox::GostR3411_94CryptoPro => "id-GostR3411-94-CryptoProParamSet",
            Sbox::Gost28147Test => "id-Gost28147-89-TestParamSet",
            Sbox::CryptoProA => "id-Gost28147-89-CryptoPro-A-ParamSet",
            Sbox::CryptoProB => "id-Gost28147-89-CryptoPro-B-ParamSet",
            Sbox::CryptoProC => "id-Gost28147-89-CryptoPro-C-ParamSet",
            Sbox::CryptoProD => "id-Gost28147-89-CryptoPro-D-ParamSet",
            Sbox::Tc26Z => "id-tc26-gost-28147-param-Z",
        }
    }

    /// The dotted OID.
    pub fn oid(self) -> &'static str {
        match self {
            Sbox::GostR3411_94Test => "1.2.643.2.2.30.0",
            Sbox::GostR3411_94CryptoPro => "1.2.643.2.2.30.1",
            Sbox::Gost28147Test => "1.2.643.2.2.31.0",
            Sbox::CryptoProA => "1.2.643.2.2.31.1",
            Sbox::CryptoProB => "1.2.643.2.2.31.2",
            Sbox::CryptoProC => "1.2.643.2.2.31.3",
            Sbox::CryptoProD => "1.2.643.2.2.31.4",
            Sbox::Tc26Z => "1.2.643.7.1.2.5.1.1",
        }
    }

    /// Parses an OID name or a dotted OID.
    pub fn from_name(name: &str) -> Result<Sbox, Error> {
        Sbox::ALL
            .into_iter()
            .find(|s| s.name() == name || s.oid() == name)
            .ok_or_else(|| Error::unknown_name("s-box", name, Sbox::ALL.map(Sbox::name)))
    }

    /// The table rows `pi[i][x]`.
    pub(crate) fn rows(self) -> &'static sbox_tables::Rows {
        match self {
            Sbox::GostR3411_94Test => &sbox_tables::GOSTR3411_94_TEST,
            Sbox::GostR3411_94CryptoPro => &sbox_tables::GOSTR3411_94_CRYPTOPRO,
            Sbox::Gost28147Test => &sbox_tables::GOST28147_TEST,
            Sbox::CryptoProA => &sbox_tables::CRYPTOPROA,
            Sbox::CryptoProB => &sbox_tables::CRYPTOPROB,
            Sbox::CryptoProC => &sbox_tables::CRYPTOPROC,
            Sbox::CryptoProD => &sbox_tables::CRYPTOPROD,
            Sbox::Tc26Z => &sbox_tables::TC26Z,
        }
    }
}

impl std::fmt::Display for Sbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How block bytes map to the integer block (and key bytes to key words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// GOST 28147-89 libraries: little-endian.
    Gost89,
    /// Magma (RFC 8891): big-endian.
    Magma,
}

impl Order {
    #[inline(always)]
    pub(crate) fn load(self, b: &[u8]) -> u64 {
        let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
        match self {
            Order::Gost89 => u64::from_le_bytes(a),
            Order::Magma => u64::from_be_bytes(a),
        }
    }

    #[inline(always)]
    pub(crate) fn store(self, x: u64) -> [u8; 8] {
        match self {
            Order::Gost89 => x.to_le_bytes(),
            Order::Magma => x.to_be_bytes(),
        }
    }
}

/// Encrypt or decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Encrypt,
    Decrypt,
}

/// A key bound to its S-box, byte convention and backend. Zeroized on drop; `Debug` never
/// shows key material.
#[derive(Clone)]
pub(crate) struct Core {
    pub(crate) s: Schedule,
    pub(crate) sbox: Sbox,
    pub(crate) order: Order,
    pub(crate) backend: GostBackend,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GostKey")
            .field("order", &self.order)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Reads a 32-byte key into words K1..K8 in the convention of `order`.
fn key_words(key: &[u8], order: Order, what: &'static str) -> Result<[u32; 8], Error> {
    if key.len() != 32 {
        return Err(Error::Key(KeyError::Length {
            what,
            got: key.len(),
            expected: "32 bytes",
        }));
    }
    Ok(core::array::from_fn(|i| {
        let w: [u8; 4] = key[4 * i..4 * i + 4].try_into().expect("4 bytes");
        match order {
            Order::Gost89 => u32::from_le_bytes(w),
            Order::Magma => u32::from_be_bytes(w),
        }
    }))
}

/// The CryptoPro key meshing constant C (RFC 4357 section 2.3.2).
const MESH_C: [u8; 32] = [
    0x69, 0x00, 0x72, 0x22, 0x64, 0xC9, 0x04, 0x23, 0x8D, 0x3A, 0xDB, 0x96, 0x46, 0xE9, 0x2A, 0xC4,
    0x18, 0xFE, 0xAC, 0x94, 0x00, 0xED, 0x07, 0x12, 0xC0, 0x86, 0xDC, 0xC2, 0xEF, 0x4C, 0xA9, 0x2B,
];

/// Bytes between two CryptoPro key meshings.
pub(crate) const MESH_BYTES: usize = 1024;

impl Core {
    pub(crate) fn new(
        key: &[u8],
        sbox: Sbox,
        order: Order,
        backend: Option<GostBackend>,
        what: &'static str,
    ) -> Result<Core, Error> {
        let backend = match backend {
            Some(b) => b,
            None => GostBackend::selected()?,
        };
        backend.ensure_usable()?;
        Ok(Core::new_unchecked(
            key_words(key, order, what)?,
            sbox,
            order,
            backend,
        ))
    }

    pub(crate) fn new_unchecked(
        k: [u32; 8],
        sbox: Sbox,
        order: Order,
        backend: GostBackend,
    ) -> Core {
        Core {
            s: Schedule {
                k,
                sbox: PackedSbox::pack(sbox.rows()),
            },
            sbox,
            order,
            backend,
        }
    }

    #[inline(always)]
    pub(crate) fn enc(&self, x: u64) -> u64 {
        self.s.encrypt(x)
    }

    /// ECB over whole blocks of `buf`, in place, on this key's backend.
    pub(crate) fn ecb(&self, dir: Dir, buf: &mut [u8]) {
        self.ecb_with_side(dir, buf, None);
    }

    /// [`Core::ecb`], running the rounds of `side` (a one-block encryption under another
    /// key) among the kernel's rounds where the backend can; `side` is finished on return.
    pub(crate) fn ecb_with_side(&self, dir: Dir, buf: &mut [u8], side: Option<&mut SideJob>) {
        debug_assert!(buf.len().is_multiple_of(GOST_BLOCK));
        let order = match dir {
            Dir::Encrypt => &ENC_ORDER,
            Dir::Decrypt => &DEC_ORDER,
        };
        let mut side = side;
        let done = if self.backend == GostBackend::Avx2 {
            avx2_shim::ecb(
                &self.s.k,
                order,
                self.sbox,
                self.order,
                buf,
                side.as_deref_mut(),
            )
        } else {
            0
        };
        if let Some(j) = side {
            j.finish();
        }
        for b in buf[done..].chunks_exact_mut(GOST_BLOCK) {
            let x = self.order.load(b);
            let y = match dir {
                Dir::Encrypt => self.s.encrypt(x),
                Dir::Decrypt => self.s.decrypt(x),
            };
            b.copy_from_slice(&self.order.store(y));
        }
    }

    /// CryptoPro key meshing (RFC 4357 section 2.3): the key becomes the ECB decryption of
    /// the constant C under the current key. Only GOST 28147-89 (little-endian) uses it.
    pub(crate) fn mesh(&mut self) {
        let mut nk = [0u32; 8];
        for i in 0..4 {
            let y = self.s.decrypt(Order::Gost89.load(&MESH_C[8 * i..]));
            nk[2 * i] = y as u32;
            nk[2 * i + 1] = (y >> 32) as u32;
        }
        self.s.k = nk;
        zeroize::Zeroize::zeroize(&mut nk);
    }
}

/// Refuses out-of-place calls with different lengths.
pub(crate) fn same_len(src: &[u8], dst: &[u8]) -> Result<(), Error> {
    if src.len() != dst.len() {
        return Err(Error::Input(InputError::LengthMismatch {
            src: src.len(),
            dst: dst.len(),
        }));
    }
    Ok(())
}

/// Refuses lengths that are not a whole number of 8-byte blocks.
pub(crate) fn whole_blocks(len: usize) -> Result<(), Error> {
    if !len.is_multiple_of(GOST_BLOCK) {
        return Err(Error::Input(InputError::Length {
            got: len,
            why: "must be a multiple of 8 bytes",
        }));
    }
    Ok(())
}

/// The known-answer self-test of a backend, run once before first use: RFC 8891 A.4 and
/// a GOST 28147-89 ECB vector, then (for SIMD backends) ECB both ways in both byte orders
/// against `soft` at 1, 33, 67 and 131 blocks (the one-group, two-group and four-group
/// paths of the kernel, with tails).
pub(crate) fn self_test(backend: GostBackend) -> bool {
    let key: Vec<u8> = (0..32u8)
        .map(|i| i.wrapping_mul(37).wrapping_add(11))
        .collect();
    // RFC 8891 A.4.
    let k: [u8; 32] = [
        0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x00, 0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd,
        0xfe, 0xff,
    ];
    let Ok(kw) = key_words(&k, Order::Magma, "magma") else {
        return false;
    };
    let c = Core::new_unchecked(kw, Sbox::Tc26Z, Order::Magma, backend);
    let mut b = [0u8; 64];
    for blk in b.chunks_exact_mut(8) {
        blk.copy_from_slice(&[0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10]);
    }
    c.ecb(Dir::Encrypt, &mut b);
    if b.chunks_exact(8)
        .any(|x| x != [0x4e, 0xe9, 0x01, 0xe5, 0xc2, 0xd8, 0xca, 0x3d])
    {
        return false;
    }
    c.ecb(Dir::Decrypt, &mut b);
    if b[..8] != [0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10] {
        return false;
    }
    if backend == GostBackend::Soft {
        return true;
    }
    for (order, sbox) in [
        (Order::Gost89, Sbox::CryptoProA),
        (Order::Magma, Sbox::Tc26Z),
    ] {
        let Ok(kw) = key_words(&key, order, "gost") else {
            return false;
        };
        let soft = Core::new_unchecked(kw, sbox, order, GostBackend::Soft);
        let tested = Core::new_unchecked(kw, sbox, order, backend);
        for blocks in [1usize, 33, 67, 131] {
            let input: Vec<u8> = (0..blocks * 8).map(|i| (i * 7 + 3) as u8).collect();
            for dir in [Dir::Encrypt, Dir::Decrypt] {
                let mut want = input.clone();
                soft.ecb(dir, &mut want);
                let mut got = input.clone();
                tested.ecb(dir, &mut got);
                if want != got {
                    return false;
                }
            }
        }
    }
    true
}

//! The decrypted view of a BitLocker volume, as Windows shows it, and its sector
//! ciphers.
//!
//! **The view** (cryptsetup's `_activate` builds the same map from dm-crypt and dm-zero
//! targets): bytes `0..H` are the original volume header, stored encrypted at the
//! volume-header offset `O` and decrypted with the IV of where they are stored; the three
//! 64 KiB FVE metadata areas and `O..O+H` read as zeros; every other sector decrypts in
//! place. The IV of a sector is always taken from its stored byte offset `p`.
//!
//! **The ciphers** (methods 0x8000 to 0x8005):
//! - AES-XTS-128/256: tweak = `p / sector size` (dm-crypt's `plain64` with large-sector
//!   IVs);
//! - AES-CBC-128/256: IV = AES-ECB under the FVEK of `LE128(p)` (dm-crypt's `eboiv`);
//! - AES-CBC-128/256 with the Elephant diffuser (Ferguson, "AES-CBC + Elephant diffuser",
//!   2006; dm-crypt's `elephant` IV): decryption is CBC (IV as above), then diffuser B (3
//!   cycles, rotations 0, 10, 0, 25), then diffuser A (5 cycles, rotations 9, 0, 13, 0),
//!   then XOR with the 32-byte sector key `E_T(LE128(p)) || E_T(LE128(p) with byte 15 =
//!   0x80)` under the tweak key `T`. Encryption runs the same steps backwards.
//!
//! Sectors are 512 or 4096 bytes; every region boundary lies on a sector (checked when
//! the view is built).

use super::metadata::FVE_AREA;
use crate::error::{Error, Result};
use crate::store::Store;
use sectorcrypt_crypto::aes::{Cbc, Ecb};
use sectorcrypt_crypto::dmcrypt::{CipherMode, CipherSpec, IvMode, SectorCipher, SectorLayout};
use zeroize::Zeroizing;

/// An encryption method of BitLocker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// AES-CBC with the Elephant diffuser, 128 (0x8000) or 256 (0x8001) bits.
    CbcElephant(usize),
    /// AES-CBC, 128 (0x8002) or 256 (0x8003) bits.
    Cbc(usize),
    /// AES-XTS, 128 (0x8004) or 256 (0x8005) bits.
    Xts(usize),
}

impl Method {
    /// The method of code `m`.
    pub fn from_code(m: u16) -> Result<Method> {
        Ok(match m {
            0x8000 => Method::CbcElephant(128),
            0x8001 => Method::CbcElephant(256),
            0x8002 => Method::Cbc(128),
            0x8003 => Method::Cbc(256),
            0x8004 => Method::Xts(128),
            0x8005 => Method::Xts(256),
            m => {
                return Err(Error::unsupported(format!(
                    "BitLocker encryption method 0x{m:04x} is not supported (supported: \
                     0x8000-0x8005, AES-CBC with and without the Elephant diffuser and \
                     AES-XTS)"
                )))
            }
        })
    }

    /// cryptsetup's cipher mode name: `cbc-elephant`, `cbc-eboiv`, `xts-plain64`.
    pub fn mode_name(self) -> &'static str {
        match self {
            Method::CbcElephant(_) => "cbc-elephant",
            Method::Cbc(_) => "cbc-eboiv",
            Method::Xts(_) => "xts-plain64",
        }
    }

    /// Bits of the key cryptsetup reports (both XTS halves, or CBC and tweak key).
    pub fn key_bits(self) -> usize {
        match self {
            Method::CbcElephant(b) | Method::Xts(b) => 2 * b,
            Method::Cbc(b) => b,
        }
    }

    /// The data key in cryptsetup's layout from the FVEK entry's key bytes: XTS keys as
    /// stored; a CBC key as stored; Elephant: CBC key then tweak key (each half of the
    /// stored 64 bytes, of which 128-bit keys use the first 16).
    pub fn data_key(self, stored: &[u8]) -> Result<Zeroizing<Vec<u8>>> {
        let bytes = self.key_bits() / 8;
        let key = match self {
            Method::CbcElephant(b) => {
                let half = b / 8;
                if stored.len() < 32 + half {
                    None
                } else {
                    let mut k = Zeroizing::new(stored[..half].to_vec());
                    k.extend_from_slice(&stored[32..32 + half]);
                    Some(k)
                }
            }
            _ => (stored.len() >= bytes).then(|| Zeroizing::new(stored[..bytes].to_vec())),
        };
        key.ok_or_else(|| {
            Error::corrupt(format!(
                "the BitLocker FVEK holds {} bytes, too few for {} with a {}-bit key",
                stored.len(),
                self.mode_name(),
                self.key_bits()
            ))
        })
    }
}

/// The sector cipher of one method under one key.
enum SectorCrypt {
    Xts(SectorCipher),
    Cbc {
        cbc: Cbc,
        /// The FVEK as ECB, for the IVs.
        ecb: Ecb,
        /// The Elephant tweak key.
        tweak: Option<Ecb>,
    },
}

/// The IV input of a sector at byte offset `p`: `LE128(p)`.
fn offset_block(p: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&p.to_le_bytes());
    b
}

impl SectorCrypt {
    fn new(method: Method, key: &[u8], sector_size: usize) -> Result<SectorCrypt> {
        Ok(match method {
            Method::Xts(_) => {
                let spec = CipherSpec::aes(CipherMode::Xts, IvMode::Plain64);
                SectorCrypt::Xts(SectorCipher::new(
                    spec,
                    key,
                    SectorLayout::new(sector_size, true)?,
                )?)
            }
            Method::Cbc(_) => SectorCrypt::Cbc {
                cbc: Cbc::new(key)?,
                ecb: Ecb::new(key)?,
                tweak: None,
            },
            Method::CbcElephant(b) => {
                let (k, t) = key.split_at(b / 8);
                SectorCrypt::Cbc {
                    cbc: Cbc::new(k)?,
                    ecb: Ecb::new(k)?,
                    tweak: Some(Ecb::new(t)?),
                }
            }
        })
    }

    /// Decrypts whole sectors `buf` stored at byte offset `p`.
    fn decrypt(&self, p: u64, ss: usize, buf: &mut [u8]) -> Result<()> {
        match self {
            SectorCrypt::Xts(c) => c.decrypt(p / ss as u64, buf)?,
            SectorCrypt::Cbc { cbc, ecb, tweak } => {
                for (i, sector) in buf.chunks_exact_mut(ss).enumerate() {
                    let at = p + (i * ss) as u64;
                    let mut iv = offset_block(at);
                    ecb.encrypt(&mut iv)?;
                    cbc.decrypt(&iv, sector)?;
                    if let Some(t) = tweak {
                        let key = sector_key(t, at)?;
                        elephant::decrypt(sector);
                        // The key repeats over the sector.
                        for (b, k) in sector.iter_mut().zip(key.iter().cycle()) {
                            *b ^= k;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Encrypts whole sectors `buf` to be stored at byte offset `p`.
    fn encrypt(&self, p: u64, ss: usize, buf: &mut [u8]) -> Result<()> {
        match self {
            SectorCrypt::Xts(c) => c.encrypt(p / ss as u64, buf)?,
            SectorCrypt::Cbc { cbc, ecb, tweak } => {
                for (i, sector) in buf.chunks_exact_mut(ss).enumerate() {
                    let at = p + (i * ss) as u64;
                    if let Some(t) = tweak {
                        let key = sector_key(t, at)?;
                        for (b, k) in sector.iter_mut().zip(key.iter().cycle()) {
                            *b ^= k;
                        }
                        elephant::encrypt(sector);
                    }
                    let mut iv = offset_block(at);
                    ecb.encrypt(&mut iv)?;
                    cbc.encrypt(&iv, sector)?;
                }
            }
        }
        Ok(())
    }
}

/// Elephant's 32-byte sector key for the sector at byte offset `p`.
fn sector_key(tweak: &Ecb, p: u64) -> Result<Zeroizing<[u8; 32]>> {
    let mut k = Zeroizing::new([0u8; 32]);
    k[..16].copy_from_slice(&offset_block(p));
    k[16..].copy_from_slice(&offset_block(p));
    k[31] = 0x80;
    tweak.encrypt(&mut k[..])?;
    Ok(k)
}

/// The Elephant diffusers over a sector's 32-bit little-endian words `d[0..n)`, indices
/// mod `n` (Ferguson 2006, section 5): A cycles `d[i] += d[i-2] ^ rotl(d[i-5], RA[i%4])`,
/// B cycles `d[i] += d[i+2] ^ rotl(d[i+5], RB[i%4])` when decrypting; encrypting undoes
/// them in reverse order with subtraction.
mod elephant {
    const RA: [u32; 4] = [9, 0, 13, 0];
    const RB: [u32; 4] = [0, 10, 0, 25];
    const A_CYCLES: usize = 5;
    const B_CYCLES: usize = 3;

    /// Words in a sector of up to 4096 bytes.
    const MAX_WORDS: usize = 1024;

    fn words(sector: &[u8]) -> ([u32; MAX_WORDS], usize) {
        let mut d = [0u32; MAX_WORDS];
        for (w, c) in d.iter_mut().zip(sector.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        (d, sector.len() / 4)
    }

    fn store(sector: &mut [u8], d: &[u32]) {
        for (c, w) in sector.chunks_exact_mut(4).zip(d) {
            c.copy_from_slice(&w.to_le_bytes());
        }
    }

    /// `i + k` mod `n`, for `k < n`.
    fn ahead(i: usize, k: usize, n: usize) -> usize {
        let j = i + k;
        if j >= n {
            j - n
        } else {
            j
        }
    }

    /// `i - k` mod `n`, for `k < n`.
    fn behind(i: usize, k: usize, n: usize) -> usize {
        if i >= k {
            i - k
        } else {
            i + n - k
        }
    }

    /// Diffuser B then diffuser A, decrypting.
    pub(super) fn decrypt(sector: &mut [u8]) {
        let (mut buf, n) = words(sector);
        let d = &mut buf[..n];
        for _ in 0..B_CYCLES {
            for i in 0..n {
                let v = d[ahead(i, 2, n)] ^ d[ahead(i, 5, n)].rotate_left(RB[i & 3]);
                d[i] = d[i].wrapping_add(v);
            }
        }
        for _ in 0..A_CYCLES {
            for i in 0..n {
                let v = d[behind(i, 2, n)] ^ d[behind(i, 5, n)].rotate_left(RA[i & 3]);
                d[i] = d[i].wrapping_add(v);
            }
        }
        store(sector, d);
    }

    /// Diffuser A then diffuser B, encrypting (the inverse of [`decrypt`]).
    pub(super) fn encrypt(sector: &mut [u8]) {
        let (mut buf, n) = words(sector);
        let d = &mut buf[..n];
        for _ in 0..A_CYCLES {
            for i in (0..n).rev() {
                let v = d[behind(i, 2, n)] ^ d[behind(i, 5, n)].rotate_left(RA[i & 3]);
                d[i] = d[i].wrapping_sub(v);
            }
        }
        for _ in 0..B_CYCLES {
            for i in (0..n).rev() {
                let v = d[ahead(i, 2, n)] ^ d[ahead(i, 5, n)].rotate_left(RB[i & 3]);
                d[i] = d[i].wrapping_sub(v);
            }
        }
        store(sector, d);
    }
}

/// Where a piece of the view comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Stored at this byte offset.
    Stored(u64),
    /// Zeros.
    Zero,
}

/// Where each part of the view comes from: the relocated header, the zeroed ranges,
/// the rest in place.
#[derive(Debug, Clone)]
pub struct Map {
    sector_size: usize,
    size: u64,
    /// The original volume header: (stored offset, bytes).
    header: (u64, u64),
    /// Ranges that read as zeros, sorted: (start, end).
    zeros: Vec<(u64, u64)>,
}

impl Map {
    /// The map of a volume of `size` bytes (whole sectors of `sector_size`) whose original
    /// header is `header` (stored offset, bytes) and whose FVE areas start at
    /// `fve_offsets`.
    pub fn new(
        sector_size: usize,
        size: u64,
        header: (u64, u64),
        fve_offsets: [u64; 3],
    ) -> Result<Map> {
        let ss = sector_size as u64;
        let mut zeros: Vec<(u64, u64)> = fve_offsets.iter().map(|&o| (o, o + FVE_AREA)).collect();
        zeros.push((header.0, header.0 + header.1));
        for &(a, b) in zeros.iter().chain(std::iter::once(&(0, header.1))) {
            if !a.is_multiple_of(ss) || !b.is_multiple_of(ss) || b > size {
                return Err(Error::corrupt(format!(
                    "BitLocker region {a}..{b} does not lie on {ss}-byte sectors inside the \
                     {size}-byte volume"
                )));
            }
        }
        zeros.sort_unstable();
        Ok(Map {
            sector_size,
            size: size - size % ss,
            header,
            zeros,
        })
    }

    /// Refuses a request that is not whole sectors inside the view.
    fn check(&self, offset: u64, len: usize) -> Result<()> {
        let ss = self.sector_size as u64;
        if !offset.is_multiple_of(ss) || !(len as u64).is_multiple_of(ss) {
            return Err(Error::invalid(format!(
                "BitLocker reads take whole {ss}-byte sectors (offset {offset}, {len} bytes)"
            )));
        }
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > self.size)
        {
            return Err(Error::invalid(format!(
                "read of {len} bytes at {offset} goes past the end of the {}-byte volume",
                self.size
            )));
        }
        Ok(())
    }

    /// The pieces of `len` bytes of the view at `offset`: each with its source, its offset
    /// in the view and its range in the caller's buffer.
    fn pieces(&self, offset: u64, len: usize) -> Vec<(Source, u64, std::ops::Range<usize>)> {
        let mut out = Vec::new();
        let mut done = 0usize;
        while done < len {
            let v = offset + done as u64;
            let (src, n) = self.piece(v, (len - done) as u64);
            out.push((src, v, done..done + n as usize));
            done += n as usize;
        }
        out
    }

    /// The longest piece of the view from `v` (up to `len` bytes) that comes from one
    /// source, and that source.
    fn piece(&self, v: u64, len: u64) -> (Source, u64) {
        if v < self.header.1 {
            return (
                Source::Stored(self.header.0 + v),
                len.min(self.header.1 - v),
            );
        }
        let mut end = v + len;
        for &(a, b) in &self.zeros {
            if v >= a && v < b {
                return (Source::Zero, len.min(b - v));
            }
            if a > v {
                end = end.min(a);
            }
        }
        if self.header.1 > v {
            end = end.min(self.header.1);
        }
        (Source::Stored(v), end - v)
    }
}

/// The decrypted view of a BitLocker volume (see the module doc).
pub struct View {
    crypt: SectorCrypt,
    map: Map,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("map", &self.map)
            .finish_non_exhaustive()
    }
}

impl View {
    /// The view of `map` under the data key `key` of `method`.
    pub fn new(method: Method, key: &[u8], map: Map) -> Result<View> {
        Ok(View {
            crypt: SectorCrypt::new(method, key, map.sector_size)?,
            map,
        })
    }

    /// Bytes of the view.
    pub fn size(&self) -> u64 {
        self.map.size
    }

    /// Bytes per sector.
    pub fn sector_size(&self) -> usize {
        self.map.sector_size
    }

    /// Reads `buf` (whole sectors) of the view at `offset` (a sector boundary), from the
    /// ciphertext in `store`.
    pub fn read_at(&self, store: &dyn Store, buf: &mut [u8], offset: u64) -> Result<()> {
        self.map.check(offset, buf.len())?;
        let mut done = 0usize;
        while done < buf.len() {
            let v = offset + done as u64;
            let (src, n) = self.map.piece(v, (buf.len() - done) as u64);
            let part = &mut buf[done..done + n as usize];
            match src {
                Source::Zero => part.fill(0),
                Source::Stored(p) => {
                    crate::store::read_exact(store, part, p, "BitLocker data")?;
                    self.crypt.decrypt(p, self.map.sector_size, part)?;
                }
            }
            done += n as usize;
        }
        Ok(())
    }
}

/// A volume's ciphertext as the sector engine needs it: every sector of the view
/// encrypted with `aes-xts-plain64` under the IV of its own place (one IV per sector, from
/// sector 0).
///
/// - AES-XTS volumes, under their own key: sectors stored in place pass through
///   untouched, both ways; the relocated header is decrypted under the IVs of where it is
///   stored and encrypted again under those of where the view shows it (16 sectors of 512
///   bytes on most volumes), and the other way when written.
/// - AES-CBC volumes, with or without the Elephant diffuser (sector ciphers the engine
///   does not have): every sector is decrypted with BitLocker's cipher at its stored
///   place and encrypted again under a random XTS key of this process (the engine's key,
///   [`Unlocked::with_engine_key`](crate::Unlocked::with_engine_key)), and the other way
///   when written: the engine never sees BitLocker's cipher, and the extra XTS pass costs
///   little beside CBC.
///
/// The zeroed ranges read as zeros encrypted, and a write that touches them is refused
/// whole, before anything is written (they hold BitLocker's metadata, which Windows keeps
/// out of the file system's reach).
pub struct Translated {
    inner: Box<dyn Store>,
    /// The engine's XTS cipher.
    xts: SectorCipher,
    /// BitLocker's own cipher, when it is not `xts` (AES-CBC volumes).
    own: Option<SectorCrypt>,
    map: Map,
}

impl std::fmt::Debug for Translated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Translated")
            .field("inner", &self.inner)
            .field("map", &self.map)
            .finish_non_exhaustive()
    }
}

impl Translated {
    /// The translation of `inner`, whose data is under `method` with the data key `key`,
    /// for an engine under the XTS key `engine_key` (for an XTS volume, `key` itself).
    pub fn new(
        inner: Box<dyn Store>,
        method: Method,
        key: &[u8],
        engine_key: &[u8],
        map: Map,
    ) -> Result<Translated> {
        let spec = CipherSpec::aes(CipherMode::Xts, IvMode::Plain64);
        let layout = SectorLayout::new(map.sector_size, true)?;
        let own = match method {
            Method::Xts(_) if key == engine_key => None,
            _ => Some(SectorCrypt::new(method, key, map.sector_size)?),
        };
        Ok(Translated {
            inner,
            xts: SectorCipher::new(spec, engine_key, layout)?,
            own,
            map,
        })
    }

    /// Decrypts `part`, stored at `p`, with BitLocker's cipher.
    fn own_decrypt(&self, p: u64, part: &mut [u8]) -> Result<()> {
        let ss = self.map.sector_size;
        match &self.own {
            Some(c) => c.decrypt(p, ss, part),
            None => Ok(self.xts.decrypt(p / ss as u64, part)?),
        }
    }

    /// Encrypts `part`, to be stored at `p`, with BitLocker's cipher.
    fn own_encrypt(&self, p: u64, part: &mut [u8]) -> Result<()> {
        let ss = self.map.sector_size;
        match &self.own {
            Some(c) => c.encrypt(p, ss, part),
            None => Ok(self.xts.encrypt(p / ss as u64, part)?),
        }
    }

    fn translate(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.map.check(offset, buf.len())?;
        let ss = self.map.sector_size as u64;
        let mut done = 0usize;
        while done < buf.len() {
            let v = offset + done as u64;
            let (src, n) = self.map.piece(v, (buf.len() - done) as u64);
            let part = &mut buf[done..done + n as usize];
            match src {
                Source::Stored(p) if p == v && self.own.is_none() => {
                    crate::store::read_exact(&*self.inner, part, p, "BitLocker data")?
                }
                Source::Stored(p) => {
                    crate::store::read_exact(&*self.inner, part, p, "BitLocker data")?;
                    self.own_decrypt(p, part)?;
                    self.xts.encrypt(v / ss, part)?;
                }
                Source::Zero => {
                    part.fill(0);
                    self.xts.encrypt(v / ss, part)?;
                }
            }
            done += n as usize;
        }
        Ok(())
    }

    fn write(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.map.check(offset, buf.len())?;
        let ss = self.map.sector_size as u64;
        let pieces = self.map.pieces(offset, buf.len());
        for &(src, v, ref range) in &pieces {
            if src == Source::Zero {
                return Err(Error::invalid(format!(
                    "bytes {v}..{} of the BitLocker volume hold its metadata (shown as \
                     zeros): they are not written",
                    v + range.len() as u64
                )));
            }
        }
        for (src, v, range) in pieces {
            let Source::Stored(at) = src else {
                unreachable!("refused above")
            };
            let part = &buf[range];
            if at == v && self.own.is_none() {
                crate::store::write_all(&*self.inner, part, at, "BitLocker data")?;
                continue;
            }
            let mut moved = Zeroizing::new(part.to_vec());
            self.xts.decrypt(v / ss, &mut moved)?;
            self.own_encrypt(at, &mut moved)?;
            crate::store::write_all(&*self.inner, &moved, at, "BitLocker data")?;
        }
        Ok(())
    }
}

/// An `io::Error` of a volume error (an I/O error's own source, otherwise the message).
fn io_error(e: Error) -> std::io::Error {
    match e {
        Error::Io { source, .. } => source,
        Error::Invalid(_) => std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
        e => std::io::Error::other(e.to_string()),
    }
}

impl Store for Translated {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn size(&self) -> std::io::Result<u64> {
        Ok(self.map.size)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.translate(buf, offset).map_err(io_error)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.write(buf, offset).map_err(io_error)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The diffusers undo each other on both sector sizes, and change every word.
    #[test]
    fn elephant_encrypt_undoes_decrypt() {
        for ss in [512usize, 4096] {
            let orig: Vec<u8> = (0..ss).map(|i| (i * 7 + 3) as u8).collect();
            let mut s = orig.clone();
            elephant::decrypt(&mut s);
            assert_ne!(s, orig);
            elephant::encrypt(&mut s);
            assert_eq!(s, orig, "sector size {ss}");
        }
    }

    /// Sector encryption and decryption agree for every method.
    #[test]
    fn sector_round_trip_every_method() {
        for method in [
            Method::CbcElephant(128),
            Method::CbcElephant(256),
            Method::Cbc(128),
            Method::Cbc(256),
            Method::Xts(128),
            Method::Xts(256),
        ] {
            let key: Vec<u8> = (0..method.key_bits() / 8).map(|i| i as u8 + 1).collect();
            for ss in [512usize, 4096] {
                let c = SectorCrypt::new(method, &key, ss).unwrap();
                let orig: Vec<u8> = (0..3 * ss).map(|i| (i % 251) as u8).collect();
                let mut buf = orig.clone();
                c.encrypt(8 * ss as u64, ss, &mut buf).unwrap();
                assert_ne!(buf, orig);
                c.decrypt(8 * ss as u64, ss, &mut buf).unwrap();
                assert_eq!(buf, orig, "{method:?} {ss}");
            }
        }
    }
}

//! Authenticated sectors: how a sector is cut into tagged units, and the two operations on
//! runs of whole sectors, [`Layout::seal`] (encrypt, then tag) and [`Layout::open`]
//! (verify every tag of the run, then decrypt).
//!
//! A sector of `sector_size` bytes is stored as `n = ceil(sector_size / d)` units of
//! `unit_len` bytes, `d` being [`super::SectorMetadata::data_per_unit`]; unit `j` holds
//!
//! ```text
//! tag (tag_len) | ciphertext of plaintext bytes j*d .. j*d + len_j | zero padding
//! ```
//!
//! where `len_j = d` for all but the last unit, which holds the rest (FreeBSD
//! `g_eli_integrity.c`: 4096-byte sectors on 512-byte units with HMAC-SHA256 take eight
//! units of 480 bytes and one of 256). Each unit is encrypted alone; its position, which
//! gives its IV number, its key zone and its tag key, is its byte offset in the data area,
//! `sector * stored_len + j * unit_len`.
//!
//! The tags of a whole run go to the crypto core in one call ([`SectorMac::sign`],
//! [`SectorMac::verify`]), so that independent units can be hashed side by side. `open`
//! verifies the whole run before the first byte is decrypted into the caller's buffer: a
//! run with a bad tag leaves the caller's buffer as it was and names the first sector
//! whose tag fails. Per-unit cipher calls are cheap beside the tags; zone ciphers come
//! from the layout's cache, looked up once per zone crossed, not per unit.

use super::{CipherLayouts, CryptoResult, Geometry, KeyCiphers, Keys, Layout};
use crate::error::{AuthenticationFailed, Error, Result};
use sectorcrypt_crypto::dmcrypt::{IvStep, SectorCipher, SectorLayout};
use sectorcrypt_crypto::mac::{SectorMac, UnitShape};
use std::ops::Range;
use std::sync::Arc;

/// The tag maker and the unit shape of an authenticated layout.
pub(super) struct Auth {
    mac: SectorMac,
    shape: UnitShape,
}

impl Auth {
    /// The tags of `geometry` under `auth_key`, and the layouts of the unit ciphers.
    pub(super) fn new(geometry: &Geometry, auth_key: &[u8]) -> Result<(Auth, CipherLayouts)> {
        let Some(md) = geometry.metadata else {
            return Err(Error::invalid(
                "an authenticated layout needs a geometry with sector tags",
            ));
        };
        let ss = geometry.sector_size;
        let d = md.data_per_unit();
        if d < 16 || md.unit_len == 0 || !ss.is_multiple_of(16) || ss == 0 {
            return Err(Error::invalid(format!(
                "{}-byte units with {}-byte tags cannot hold {ss}-byte sectors",
                md.unit_len,
                md.mac.tag_len()
            )));
        }
        let n = md.units_per_sector(ss);
        let shape = UnitShape {
            unit_len: md.unit_len,
            units_per_group: n,
            msg_len: d,
            last_msg_len: ss - (n - 1) * d,
        };
        let stored = n
            .checked_mul(md.unit_len)
            .ok_or_else(|| Error::invalid("sectors too large"))?;
        super::check_extent(geometry, stored as u64)?;
        // One unit per cipher call: the IV step never applies, any length of whole
        // blocks is allowed.
        let layout = |len| SectorLayout::with_step(len, IvStep::Sector);
        let ciphers = CipherLayouts {
            main: layout(shape.msg_len)?,
            last: Some(layout(shape.last_msg_len)?),
        };
        let auth = Auth {
            mac: SectorMac::new(md.mac, auth_key)?,
            shape,
        };
        Ok((auth, ciphers))
    }

    /// Bytes a sector takes in the store.
    pub(super) fn stored_sector_len(&self) -> usize {
        self.shape.unit_len * self.shape.units_per_group
    }
}

impl Layout {
    /// Encrypts whole sectors `plain`, the first being sector `first`, into their stored
    /// form `stored` (units with tags and zeroed padding, [`Layout::stored_sector_len`]
    /// bytes per sector).
    pub fn seal(&self, first: u64, plain: &[u8], stored: &mut [u8]) -> Result<()> {
        let auth = self.sealed_run(plain.len(), stored.len())?;
        let (tag, unit) = (auth.mac.tag_len(), auth.shape.unit_len);
        self.units(first, plain.len(), |cipher, iv, s, p| {
            let pad = s.end..s.start - tag + unit;
            stored[pad].fill(0);
            match cipher {
                Some(c) => c.encrypt_to(iv, &plain[p], &mut stored[s]),
                None => {
                    stored[s].copy_from_slice(&plain[p]);
                    Ok(())
                }
            }
        })?;
        auth.mac.sign(stored, auth.shape, self.offset(first))?;
        Ok(())
    }

    /// Verifies the tags of the stored sectors `stored`, the first being sector `first`,
    /// and only when every tag verifies decrypts them into `plain`. A bad tag gives
    /// [`Error::Authentication`] naming the first sector whose tag fails, with `plain`
    /// untouched.
    pub fn open(&self, first: u64, stored: &[u8], plain: &mut [u8]) -> Result<()> {
        let auth = self.sealed_run(plain.len(), stored.len())?;
        if let Some(unit) = auth.mac.verify(stored, auth.shape, self.offset(first))? {
            let sector = first + (unit / auth.shape.units_per_group) as u64;
            return Err(AuthenticationFailed { sector }.into());
        }
        self.units(first, plain.len(), |cipher, iv, s, p| match cipher {
            Some(c) => c.decrypt_to(iv, &stored[s], &mut plain[p]),
            None => {
                plain[p].copy_from_slice(&stored[s]);
                Ok(())
            }
        })
    }

    /// The tags of an authenticated layout, after checking that `plain` bytes are whole
    /// sectors stored in `stored` bytes.
    fn sealed_run(&self, plain: usize, stored: usize) -> Result<&Auth> {
        let Some(auth) = &self.auth else {
            return Err(Error::invalid(
                "this layout stores no tags: encrypt and decrypt its sectors",
            ));
        };
        let ss = self.geometry.sector_size;
        if !plain.is_multiple_of(ss) || stored != plain / ss * self.stored_sector_len() {
            return Err(Error::invalid(format!(
                "{plain} bytes of plaintext in {stored} stored bytes are not whole {ss}-byte \
                 sectors of {} stored bytes",
                self.stored_sector_len()
            )));
        }
        Ok(auth)
    }

    /// The byte offset of sector `sector` in the data area (the position of its first
    /// unit, from which every unit's tag key is derived).
    fn offset(&self, sector: u64) -> u64 {
        sector * self.stored
    }

    /// Calls `f(cipher, IV number, stored message range, plaintext range)` for every unit
    /// of the `len` bytes of plaintext from sector `first`, in order; `cipher` is `None`
    /// for a layout without encryption.
    fn units(
        &self,
        first: u64,
        len: usize,
        mut f: impl FnMut(Option<&SectorCipher>, u64, Range<usize>, Range<usize>) -> CryptoResult,
    ) -> Result<()> {
        let Some(auth) = &self.auth else {
            unreachable!("units exist only in authenticated layouts")
        };
        let shape = auth.shape;
        let (tag, per) = (auth.mac.tag_len(), shape.units_per_group);
        let ss = self.geometry.sector_size;
        let rule = self.geometry.iv;
        let first_unit = first * per as u64;
        let mut held: Option<(u64, Arc<KeyCiphers>)> = None;
        for i in 0..len / ss * per {
            let (k, j) = (i / per, i % per);
            let unit = first_unit + i as u64;
            let last = j + 1 == per;
            let msg = if last {
                shape.last_msg_len
            } else {
                shape.msg_len
            };
            let s = i * shape.unit_len + tag;
            let p = k * ss + j * shape.msg_len;
            let ciphers = match &self.keys {
                Keys::Plaintext => None,
                Keys::Single(c) => Some(c),
                Keys::Zoned { zone_sectors, .. } => {
                    let zone = unit / zone_sectors;
                    if held.as_ref().is_none_or(|(z, _)| *z != zone) {
                        held = Some((zone, self.zone_cipher(zone)?));
                    }
                    held.as_ref().map(|(_, c)| &**c)
                }
            };
            let cipher = ciphers.map(|c| match (&c.last, last) {
                (Some(l), true) => l,
                _ => &c.main,
            });
            f(
                cipher,
                rule.number(unit, shape.unit_len),
                s..s + msg,
                p..p + msg,
            )?;
        }
        Ok(())
    }
}

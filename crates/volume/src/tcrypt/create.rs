//! Creation of a VeraCrypt volume on a store, with a hidden volume inside it on request.
//!
//! **The outer (normal) volume**: the header at 0 and its backup 128 KiB before the end,
//! each under its own random salt, the master keys random, the data area from 128 KiB to
//! 128 KiB before the end. Both 128 KiB header areas (the header, the hidden-volume header
//! slot, the rest) are first filled with random bytes, as VeraCrypt does, so an unused
//! hidden header slot cannot be told from a used one. The data area is left as it is (a
//! quick format).
//!
//! **A hidden volume** ([`Hidden`]), as VeraCrypt's `Format.c` lays it out: its header in
//! the outer volume's hidden header slot at 64 KiB, its backup 64 KiB before the end, and
//! its data at the end of the outer data area: from `size - 128 KiB - hidden size` to
//! `size - 128 KiB`. Its header says so: hidden size = volume size = encrypted area
//! length = the hidden size, encrypted area start = that offset. The outer header records
//! nothing of it (its hidden-size field stays 0), so without the hidden passphrase the
//! hidden header reads as the random filler around it. Sizes follow VeraCrypt's limits
//! (`Volumes.h`): a hidden volume of at least 40 KiB (`TC_MIN_HIDDEN_VOLUME_SIZE`), a host
//! of at least 340 KiB (`TC_MIN_HIDDEN_VOLUME_HOST_SIZE`), and 36 KiB of the outer data area
//! left to the outer volume (`TC_MIN_FAT_FS_SIZE`, what VeraCrypt's Linux creator keeps).
//! Both volumes are made at once here (VeraCrypt adds a hidden volume to an existing outer
//! one; that is not offered). Every refusal comes before anything is written.

use super::header::{Chain, Fields, Function, Made, Prf, CHAINS, HEADER_LEN, KDFS, SALT_LEN};
use crate::error::{Error, Result};
use crate::store::{self, Store};
use sectorcrypt_crypto::cascade::Cascade;
use std::fmt;
use zeroize::Zeroizing;

/// The bytes of each header area (the header, the hidden header slot) at either end.
pub const HEADER_AREA: u64 = 131_072;
/// Where the hidden volume's header goes, from the start (its backup: this far from the
/// end).
const HIDDEN_SLOT: u64 = 65_536;
/// VeraCrypt's sector size for volumes it makes.
const SECTOR: u64 = 512;
/// VeraCrypt's smallest file system (`TC_MIN_FAT_FS_SIZE`): what the outer volume keeps.
pub const MIN_OUTER_LEFT: u64 = 9 * 4096;
/// VeraCrypt's smallest hidden volume (`TC_MIN_HIDDEN_VOLUME_SIZE`).
pub const MIN_HIDDEN_SIZE: u64 = MIN_OUTER_LEFT + 4096;
/// VeraCrypt's smallest host of a hidden volume (`TC_MIN_HIDDEN_VOLUME_HOST_SIZE`: the
/// smallest volume, the smallest hidden volume and two 4096-byte sectors).
pub const MIN_HIDDEN_HOST_SIZE: u64 = 4 * HIDDEN_SLOT + MIN_OUTER_LEFT + MIN_HIDDEN_SIZE + 8192;

/// What [`create`] makes.
#[derive(Debug, Clone)]
pub struct Create {
    /// The chain, by the name the reading side uses (`aes`, `aes-twofish-serpent`, ...).
    pub chain: String,
    /// The PBKDF2 hash.
    pub prf: Prf,
    /// VeraCrypt's PIM (`None` or 0: the default iterations).
    pub pim: Option<u32>,
    /// A hidden volume inside this one.
    pub hidden: Option<Hidden>,
}

impl Default for Create {
    fn default() -> Create {
        Create {
            chain: "aes".to_string(),
            prf: Prf::Sha512,
            pim: None,
            hidden: None,
        }
    }
}

/// A hidden volume at the end of the outer data area, under its own password.
#[derive(Clone)]
pub struct Hidden {
    /// Bytes of the hidden volume (a multiple of 512).
    pub size: u64,
    /// Its password, already mixed with any keyfiles by [`super::header::password`].
    pub password: Zeroizing<Vec<u8>>,
    /// Its chain (the reading side's name).
    pub chain: String,
    /// Its PBKDF2 hash.
    pub prf: Prf,
    /// Its PIM (`None` or 0: the default iterations).
    pub pim: Option<u32>,
}

impl fmt::Debug for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hidden")
            .field("size", &self.size)
            .field("chain", &self.chain)
            .field("prf", &self.prf)
            .field("pim", &self.pim)
            .finish_non_exhaustive()
    }
}

/// What [`create`] made: the decrypted outer header and its chain, as
/// [`crate::format::Format::unlock_key`] of a [`super::Tcrypt`] gives them (the key that
/// [`crate::format::Format::unlocked`] takes), and where the hidden volume's data went.
pub struct Created {
    /// The outer volume's key for [`crate::format::Format::unlocked`].
    pub key: Zeroizing<Vec<u8>>,
    /// The hidden volume's data: (offset in the store, bytes).
    pub hidden: Option<(u64, u64)>,
}

impl fmt::Debug for Created {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Created")
            .field("hidden", &self.hidden)
            .finish_non_exhaustive()
    }
}

/// The chain called `name`.
fn chain(name: &str) -> Result<(usize, &'static Chain)> {
    CHAINS
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = CHAINS.iter().map(|c| c.name).collect();
            Error::invalid(format!(
                "unknown VeraCrypt cipher {name:?} (supported: {})",
                names.join(", ")
            ))
        })
}

/// VeraCrypt's KDF row of `prf`.
fn kdf(prf: Prf) -> Result<&'static super::header::Kdf> {
    KDFS.iter()
        .find(|k| k.function == Function::Pbkdf2(prf) && k.made == Made::VeraCrypt)
        .ok_or_else(|| Error::invalid(format!("no VeraCrypt volume uses {prf:?}")))
}

fn random(buf: &mut [u8]) -> Result<()> {
    getrandom::getrandom(buf).map_err(|e| Error::invalid(format!("no random bytes: {e}")))
}

/// One header to write: its fields, keys and how it is encrypted.
struct Plan<'a> {
    fields: Fields,
    chain: &'static Chain,
    kdf: &'static super::header::Kdf,
    pim: Option<u32>,
    password: &'a [u8],
    keys: Zeroizing<Vec<u8>>,
}

impl Plan<'_> {
    /// The header, encrypted under a fresh salt.
    fn sealed(&self) -> Result<Zeroizing<[u8; HEADER_LEN]>> {
        let plain = self
            .fields
            .encode(&self.keys)
            .ok_or_else(|| Error::invalid("the chain's keys do not fit a header"))?;
        let mut h = Zeroizing::new([0u8; HEADER_LEN]);
        h.copy_from_slice(&plain[..]);
        random(&mut h[..SALT_LEN])?;
        let dk = self.kdf.derive(self.password, &h[..SALT_LEN], self.pim)?;
        Cascade::new(self.chain.layers, &dk[..self.chain.key_len()])?.encrypt(
            0,
            HEADER_LEN - SALT_LEN,
            &mut h[SALT_LEN..],
        )?;
        Ok(h)
    }
}

fn fields(volume: u64, hidden: u64, start: u64) -> Fields {
    Fields {
        magic: *b"VERA",
        version: 5,
        min_program: 0x010b,
        hidden_size: hidden,
        volume_size: volume,
        mk_offset: start,
        mk_size: volume,
        flags: 0,
        sector_size: SECTOR as u32,
    }
}

/// Checks a hidden volume of `hidden` bytes in a store of `size` bytes whose outer data
/// area has `outer` bytes; its data offset.
fn hidden_place(name: &str, size: u64, outer: u64, hidden: u64) -> Result<u64> {
    if hidden == 0 || !hidden.is_multiple_of(SECTOR) {
        return Err(Error::invalid(format!(
            "a hidden volume's size is a positive multiple of 512 bytes, not {hidden}"
        )));
    }
    if hidden < MIN_HIDDEN_SIZE {
        return Err(Error::invalid(format!(
            "a hidden volume of {hidden} bytes is too small: VeraCrypt's smallest is \
             {MIN_HIDDEN_SIZE} bytes"
        )));
    }
    if size < MIN_HIDDEN_HOST_SIZE {
        return Err(Error::invalid(format!(
            "{name} has {size} bytes: a volume holding a hidden volume needs at least \
             {MIN_HIDDEN_HOST_SIZE} (VeraCrypt's smallest)"
        )));
    }
    if !size.is_multiple_of(SECTOR) {
        return Err(Error::invalid(format!(
            "{name} has {size} bytes, not whole 512-byte sectors: a hidden volume's data \
             would not start on a sector"
        )));
    }
    let most = outer.saturating_sub(MIN_OUTER_LEFT);
    if hidden > most {
        return Err(Error::invalid(format!(
            "a hidden volume of {hidden} bytes does not fit in {name}: its outer data area \
             has {outer} bytes, and the outer volume keeps at least {MIN_OUTER_LEFT}, so the \
             hidden volume can have at most {most}"
        )));
    }
    Ok(size - HEADER_AREA - hidden)
}

/// Makes a VeraCrypt volume filling `store`, opened by `password` (the passphrase already
/// mixed with any keyfiles by [`super::header::password`]), with the hidden volume of
/// `what.hidden` inside it. Every refusal (an unknown chain or hash, a store too small,
/// a hidden volume that does not fit) comes before anything is written.
pub fn create(store: &dyn Store, password: &[u8], what: &Create) -> Result<Created> {
    let (chain_index, outer_chain) = chain(&what.chain)?;
    let outer_kdf = kdf(what.prf)?;
    let size = store::size(store)?;
    let data_len = size.saturating_sub(2 * HEADER_AREA) / SECTOR * SECTOR;
    if data_len == 0 {
        return Err(Error::invalid(format!(
            "{} has {size} bytes; a VeraCrypt volume needs more than {} (two 128 KiB header areas)",
            store.name(),
            2 * HEADER_AREA
        )));
    }
    let mut keys = Zeroizing::new(vec![0u8; outer_chain.key_len()]);
    random(&mut keys)?;
    let outer = Plan {
        fields: fields(data_len, 0, HEADER_AREA),
        chain: outer_chain,
        kdf: outer_kdf,
        pim: what.pim.filter(|&p| p != 0),
        password,
        keys,
    };
    let hidden = match &what.hidden {
        None => None,
        Some(h) => {
            let (_, hidden_chain) = chain(&h.chain)?;
            let hidden_kdf = kdf(h.prf)?;
            let at = hidden_place(store.name(), size, data_len, h.size)?;
            let mut keys = Zeroizing::new(vec![0u8; hidden_chain.key_len()]);
            random(&mut keys)?;
            Some(Plan {
                fields: fields(h.size, h.size, at),
                chain: hidden_chain,
                kdf: hidden_kdf,
                pim: h.pim.filter(|&p| p != 0),
                password: &h.password,
                keys,
            })
        }
    };
    // Every header is derived and sealed before the first byte is written.
    let mut areas = Vec::with_capacity(2);
    for area in [0, size - HEADER_AREA] {
        let mut filler = vec![0u8; HEADER_AREA as usize];
        random(&mut filler)?;
        filler[..HEADER_LEN].copy_from_slice(&outer.sealed()?[..]);
        if let Some(h) = &hidden {
            let slot = HIDDEN_SLOT as usize;
            filler[slot..slot + HEADER_LEN].copy_from_slice(&h.sealed()?[..]);
        }
        areas.push((area, filler));
    }
    for (area, filler) in &areas {
        store
            .write_at(filler, *area)
            .map_err(|e| Error::io(format!("writing a VeraCrypt header to {}", store.name()), e))?;
    }
    store
        .sync()
        .map_err(|e| Error::io(format!("syncing {}", store.name()), e))?;
    let plain = outer
        .fields
        .encode(&outer.keys)
        .ok_or_else(|| Error::invalid("the chain's keys do not fit a header"))?;
    let mut key = Zeroizing::new(Vec::with_capacity(HEADER_LEN + 1));
    key.extend_from_slice(&plain[..]);
    key.push(chain_index as u8);
    Ok(Created {
        key,
        hidden: hidden.map(|h| (h.fields.mk_offset, h.fields.mk_size)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veracrypt_size_limits() {
        assert_eq!(MIN_HIDDEN_SIZE, 40_960);
        assert_eq!(MIN_HIDDEN_HOST_SIZE, 348_160);
    }

    #[test]
    fn hidden_data_ends_where_the_outer_data_ends() {
        let size = 4 << 20;
        let outer = size - 2 * HEADER_AREA;
        let at = hidden_place("x", size, outer, 1 << 20).unwrap();
        assert_eq!(at + (1 << 20), size - HEADER_AREA);
        // The largest fit leaves the outer volume 36 KiB; one sector more does not fit.
        assert!(hidden_place("x", size, outer, outer - MIN_OUTER_LEFT).is_ok());
        let e = hidden_place("x", size, outer, outer - MIN_OUTER_LEFT + 512).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
        assert!(hidden_place("x", size, outer, 1000).is_err());
        assert!(hidden_place("x", size, outer, 512).is_err());
        assert!(hidden_place("x", 300_000, 300_000 - 2 * HEADER_AREA, 40_960).is_err());
    }
}

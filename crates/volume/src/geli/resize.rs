//! `geli resize -s oldsize`: after the provider grew, its metadata is still in the last
//! sector of the old size. It is moved to the new last sector with `provsize` updated (and
//! its MD5 recomputed), then the old sector is overwritten with zeros
//! (`lib/geom/eli/geom_eli.c`, `eli_resize`: the same checks; geli's `eli_trash_metadata`
//! writes random bytes there 5 times, zeros here make the wipe visible). A provider cannot
//! shrink this way: its metadata would be beyond the end. `geli restore -f`
//! ([`restore_resized`]) puts a backup on a provider of another size the same way.

use super::metadata::{self, Metadata};
use super::{check, Geli, PROVIDER_SECTORS};
use crate::error::{Error, Result};
use crate::store::{self, Store};

/// Moves the metadata of `store` from the last sector of a provider of `old_size` bytes to
/// the last sector of its current size. Nothing is written when `old_size` is 0, not below
/// the current size, or when no GELI metadata naming `old_size` as its provider size is
/// in the sector ending at `old_size`. Returns the metadata as written.
pub fn resize(store: &dyn Store, old_size: u64) -> Result<Geli> {
    let size = store::size(store)?;
    if old_size == 0 || old_size > size {
        return Err(Error::invalid(format!(
            "old size {old_size} is out of range: the provider has {size} bytes (geli resize \
             only grows a provider; give the size it had before it grew)"
        )));
    }
    let mut found = None;
    for prov in PROVIDER_SECTORS {
        if !old_size.is_multiple_of(prov) || old_size < prov {
            continue;
        }
        let mut sector = vec![0u8; metadata::ENCODED_LEN];
        store::read_exact(store, &mut sector, old_size - prov, "the old GELI metadata")?;
        if metadata::has_magic(&sector) {
            found = Some(check(Metadata::decode(&sector)?, prov)?);
            break;
        }
    }
    let Some(old) = found else {
        return Err(Error::invalid(format!(
            "no GELI metadata in the last sector of a {old_size}-byte provider (is the old \
             size right?)"
        )));
    };
    let prov = old.provider_sector();
    let new_size = (size / prov) * prov;
    if new_size == old_size {
        return Err(Error::invalid(format!(
            "the provider's size has not changed ({old_size} bytes)"
        )));
    }
    if old.metadata().provsize != old_size {
        return Err(Error::invalid(format!(
            "provider size mismatch at the old size: the metadata there names {} bytes, not \
             {old_size}",
            old.metadata().provsize
        )));
    }
    let mut md = old.metadata().clone();
    md.provsize = new_size;
    let moved = Geli::new(md, prov);
    moved.write(store)?;
    let zeros = vec![0u8; prov as usize];
    store::write_all(store, &zeros, old_size - prov, "the old GELI metadata")?;
    store::sync(store)?;
    Ok(moved)
}

/// `geli restore -f`: writes the metadata held in `backup` (a `geli backup` file: one
/// sector) to the last sector of `store` with `provsize` set to the provider's current
/// size, whatever size the backup names. Returns the metadata as written.
pub fn restore_resized(store: &dyn Store, backup: &dyn Store) -> Result<Geli> {
    let len = store::size(backup)?;
    let saved = super::locate(backup, len)
        .ok_or_else(|| Error::invalid(format!("{} holds no GELI metadata", backup.name())))??;
    let prov = saved.provider_sector();
    if len != prov {
        return Err(Error::invalid(format!(
            "{} is not a GELI metadata backup: {len} bytes, not one {prov}-byte sector",
            backup.name()
        )));
    }
    let size = store::size(store)?;
    let new_size = (size / prov) * prov;
    if new_size <= prov {
        return Err(Error::invalid(format!(
            "{} is too small for a GELI provider ({size} bytes)",
            store.name()
        )));
    }
    let mut md = saved.metadata().clone();
    md.provsize = new_size;
    let geli = Geli::new(md, prov);
    geli.write(store)?;
    Ok(geli)
}

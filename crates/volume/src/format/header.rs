//! [`Header`]: a volume's header of whichever format, with the format-neutral steps
//! around the [`Format`] it holds (check the key before adding a keyslot, unlock before
//! changing one, measure the header's end in the data's store, render the dump), and the
//! header backups ([`backup_header`], [`restore_header`]) that copy the pieces a format
//! names ([`Format::backup_pieces`]), restored in the order `restore.rs` argues for.

use super::{backup_extent, dump, restore, Format, NewKeyslot, Unlocked, VolumeInfo};
use crate::error::{Error, HeaderError, Result};
use crate::kdf::{Kdf, KdfKind, KdfOptions};
use crate::store::{self, FileStore, Placement, Store};
use std::any::Any;
use zeroize::Zeroizing;

/// A volume's header, of whichever format.
#[derive(Debug)]
pub struct Header(pub(super) Box<dyn Format>);

impl Header {
    /// Wraps a header a format made.
    pub fn new(format: Box<dyn Format>) -> Header {
        Header(format)
    }

    /// The format's interface.
    pub fn format(&self) -> &dyn Format {
        &*self.0
    }

    /// The concrete header, when it is a `T`.
    pub fn downcast_ref<T: Format>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref()
    }

    /// The concrete header, mutable, when it is a `T` (format-specific changes).
    pub fn downcast_mut<T: Format>(&mut self) -> Option<&mut T> {
        let any: &mut dyn Any = &mut *self.0;
        any.downcast_mut()
    }

    /// The format's name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// The volume UUID, when the format has one.
    pub fn uuid(&self) -> Option<&str> {
        self.0.uuid()
    }

    /// Where the data is and how it is encrypted, without the key.
    pub fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo> {
        self.0.volume_info(store)
    }

    /// Numbers of the active keyslots.
    pub fn active_keyslots(&self) -> Result<Vec<usize>> {
        self.0.active_keyslots()
    }

    /// How keyslot `slot` turns a passphrase into its key.
    pub fn keyslot_kdf(&self, slot: usize) -> Result<Kdf> {
        self.0.keyslot_kdf(slot)
    }

    /// The KDFs new keyslots may use, the default first.
    pub fn kdf_kinds(&self) -> &'static [KdfKind] {
        self.0.kdf_kinds()
    }

    /// Keyfiles that form the user key beside the passphrase (GELI), in order; refused by
    /// formats without keyfile components.
    pub fn set_keyfiles(&mut self, files: Vec<Zeroizing<Vec<u8>>>) -> Result<()> {
        self.0.set_keyfiles(files)
    }

    /// Whether a passphrase is part of the key (GELI's `-p`); refused by formats whose
    /// keys always have one.
    pub fn set_passphrase_component(&mut self, used: bool) -> Result<()> {
        self.0.set_passphrase_component(used)
    }

    /// Opens the volume with `passphrase`, trying every keyslot.
    pub fn unlock(&self, store: &dyn Store, passphrase: &[u8]) -> Result<Unlocked> {
        self.unlock_slot(store, passphrase, None)
    }

    /// Opens the volume with `passphrase`, trying only keyslot `slot` when given.
    pub fn unlock_slot(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<Unlocked> {
        self.unlock_at(Placement::Attached(store), passphrase, slot)
    }

    /// Opens the volume placed as `at` with `passphrase` (only keyslot `slot` when given):
    /// the keyslots are read from the header's store, the data is measured in the data's.
    /// With an attached header the data must start after the header's metadata and
    /// keyslots, which [`Unlocked::engine`] checks (a header whose data offset is 0 is a
    /// detached one: its keyslots open, its data does not).
    pub fn unlock_at(
        &self,
        at: Placement<'_>,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<Unlocked> {
        let (key, n) = self.0.unlock_key(at.header(), passphrase, slot)?;
        let mut unlocked = self.0.unlocked(at.data(), key, n)?;
        if !at.is_detached() {
            // The header's bytes at the start of the store (LUKS); a header kept at the
            // end (GELI) names its piece elsewhere in the backup than in the image.
            let pieces = self.0.backup_pieces(store::size(at.header())?);
            unlocked.header_end = pieces
                .iter()
                .filter(|p| p.image == p.backup)
                .map(|p| p.image + p.len)
                .max()
                .unwrap_or(0);
        }
        Ok(unlocked)
    }

    /// Adds a keyslot for `new_passphrase` holding the volume key of `unlocked`. Returns
    /// its number.
    pub fn add_key(
        &mut self,
        store: &dyn Store,
        unlocked: &Unlocked,
        new_passphrase: &[u8],
        kdf: &KdfOptions,
        slot: Option<usize>,
    ) -> Result<usize> {
        if !self.0.verify_key(unlocked.volume_key())? {
            return Err(Error::invalid("the key does not match this volume"));
        }
        let new = NewKeyslot {
            key: unlocked.volume_key(),
            passphrase: new_passphrase,
            kdf,
            slot,
        };
        self.0.add_keyslot(store, &new)
    }

    /// Replaces the passphrase of the keyslot `old_passphrase` opens (only `slot` when
    /// given). Returns the keyslot now holding the new passphrase (see each format for
    /// whether it moves).
    pub fn change_key(
        &mut self,
        store: &dyn Store,
        old_passphrase: &[u8],
        new_passphrase: &[u8],
        kdf: &KdfOptions,
        slot: Option<usize>,
    ) -> Result<usize> {
        let (key, old) = self.0.unlock_key(store, old_passphrase, slot)?;
        let new = NewKeyslot {
            key: &key,
            passphrase: new_passphrase,
            kdf,
            slot: None,
        };
        self.0.change_keyslot(store, old, &new)
    }

    /// The keyslot `passphrase` opens (only `slot` when given), from the header's store
    /// alone: what a keyslot command needs, without the data.
    pub fn opened_keyslot(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<usize> {
        Ok(self.0.unlock_key(store, passphrase, slot)?.1)
    }

    /// Destroys keyslot `slot` (metadata first, then its material).
    pub fn remove_key(&mut self, store: &dyn Store, slot: usize) -> Result<()> {
        self.0.remove_keyslots(store, Some(slot))
    }

    /// The active keyslots that still open the volume once `slot` is destroyed: the
    /// others, less any whose material lies in `slot`'s area (wiped with it).
    pub fn keyslots_left_without(&self, slot: usize) -> Result<Vec<usize>> {
        let gone = self.0.keyslot_area(slot);
        let overlaps = |n: usize| match (self.0.keyslot_area(n), gone) {
            (Some((o, l)), Some((go, gl))) => o < go.saturating_add(gl) && go < o.saturating_add(l),
            _ => false,
        };
        Ok(self
            .active_keyslots()?
            .into_iter()
            .filter(|&n| n != slot && !overlaps(n))
            .collect())
    }

    /// Destroys every keyslot: the data cannot be opened again without a header backup.
    pub fn erase(&mut self, store: &dyn Store) -> Result<()> {
        self.0.remove_keyslots(store, None)
    }

    /// Whether a redundant copy of the header is damaged or stale.
    pub fn needs_repair(&self) -> bool {
        self.0.needs_repair()
    }

    /// Rewrites damaged or stale copies from the good one; returns what was done.
    pub fn repair(&mut self, store: &dyn Store) -> Result<Vec<String>> {
        self.0.repair(store)
    }

    /// Bytes of a header backup of this volume in an image of `image_size` bytes.
    pub fn backup_len(&self, image_size: u64) -> u64 {
        backup_extent(&self.0.backup_pieces(image_size))
    }

    /// The metadata as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        self.0.to_json()
    }

    /// A human-readable description, in the spirit of `cryptsetup luksDump`.
    pub fn dump(&self) -> String {
        dump::render(&self.0.report())
    }
}

/// Copies the header pieces of `image` (see [`Format::backup_pieces`]) to `out`, a new file
/// (it must not exist).
pub fn backup_header(image: &dyn Store, out: &std::path::Path) -> Result<()> {
    let header = Header::read(image)?;
    let pieces = header.0.backup_pieces(store::size(image)?);
    if out.symlink_metadata().is_ok() {
        return Err(Error::io(
            format!("creating {}", out.display()),
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it already exists"),
        ));
    }
    // Written beside the backup and renamed over it once complete and synced: a failure
    // leaves no partial backup. Only the owner may read it (it holds keyslot material).
    let creating = |e| Error::io(format!("creating {}", out.display()), e);
    let file = crate::atomic::AtomicFile::create(out).map_err(creating)?;
    let dst = FileStore::new(
        file.file().try_clone().map_err(creating)?,
        out.display().to_string(),
    );
    for p in &pieces {
        store::copy(
            image,
            p.image,
            &dst,
            p.backup,
            p.len,
            "header and keyslot areas",
        )?;
    }
    file.commit().map_err(creating)
}

/// Writes the header pieces of the backup `backup` onto `image`, after checking the
/// backup's header and that it fits the image: in the format's order (keyslot areas
/// before the metadata naming them), each piece synced before the next, except the bytes
/// under the keyslot areas of the image's current header, written last (after moving
/// the current keyslots out of the way of the backup's, when both need the same bytes);
/// see `restore.rs` for why a crash at any point leaves a volume that opens with the old
/// header or the restored one. Returns the restored header, read back from the image.
pub fn restore_header(image: &dyn Store, backup: &dyn Store) -> Result<Header> {
    restore_header_at(Placement::Attached(image), backup)
}

/// [`restore_header`] onto the header's store of a volume placed as `at`. A detached
/// header's file needs room for the backup's pieces only (no data follows them there).
pub fn restore_header_at(at: Placement<'_>, backup: &dyn Store) -> Result<Header> {
    let image = at.header();
    let header = Header::read(backup).map_err(|e| match e {
        Error::Header(HeaderError::Unrecognised(m)) => {
            Error::Header(HeaderError::Unrecognised(format!("the backup file: {m}")))
        }
        e => e,
    })?;
    let size = store::size(image)?;
    let pieces = header.0.backup_pieces(size);
    let need = backup_extent(&pieces);
    let have = store::size(backup)?;
    if have < need {
        return Err(Error::truncated(format!(
            "the backup file has {have} bytes, its header describes {need} bytes of metadata \
             and keyslot areas"
        )));
    }
    if !at.is_detached() {
        header.0.check_restore_target(size)?;
    } else if size < need {
        return Err(Error::invalid(format!(
            "the header file has {size} bytes, the backup's header and keyslots need {need}"
        )));
    }
    let current = Header::read(image).ok();
    if let (false, Some(now)) = (at.is_detached(), &current) {
        // Where the data starts, as the two headers place it: a backup that ends
        // elsewhere would move the data, or write its keyslots over it.
        let ends = now.backup_len(size);
        if ends != need {
            return Err(Error::invalid(format!(
                "the backup's header and keyslots end at byte {need}, the image's current \
                 header's at {ends}: a different layout, whose restore would move or \
                 overwrite the data (cryptsetup refuses it too)"
            )));
        }
    }
    restore::write(image, backup, &*header.0, &pieces, current.map(|h| h.0))?;
    Header::read(image)
}

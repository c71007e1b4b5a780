//! What creating a volume needs from its stores, written once for the command line's
//! `format` and `geli init` and Python's `format`: [`Target`] opens the image (creating a
//! file when missing, with a size) and a detached header's file (created empty when
//! missing), claims both exclusively (a volume in use is refused: its server would go on
//! under the old key), finds the signatures the new header will wipe, takes the exclusive
//! header lock, and removes the files it made when the format fails ([`Target::discard`]).
//! [`luks_key_bits`] is the default and the refusal of a LUKS key size; [`seal`] writes
//! every sector of a new authenticated GELI provider, with a progress callback.

use crate::error::{Error, Result};
use crate::image::{claim, lock_header, open_or_create, Claims, Context};
use crate::store::{Guard, ImageStore};
use sectorcrypt_crypto::dmcrypt::{CipherMode, CipherSpec};
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::lock::Mode;
use sectorcrypt_volume::{formats, Placement, Store, Unlocked};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The stores a new volume is written to, claimed exclusively.
#[derive(Debug)]
pub struct Target {
    /// The image (the data, and the header unless it is detached).
    pub image: PathBuf,
    /// The image's store (shared with an engine that seals a new GELI provider).
    pub store: Arc<ImageStore>,
    created: bool,
    /// A detached header: its store, whether this made its file, its path.
    header: Option<(ImageStore, bool, PathBuf)>,
    claims: Claims,
}

impl Target {
    /// Opens the image at `image` for formatting, creating it with `size` bytes when
    /// missing, and `header` (a detached header's file, created empty when missing; the
    /// image itself given twice is an attached header), then claims them exclusively.
    /// Files made here are removed again when this fails.
    pub fn open(
        image: &Path,
        header: Option<&Path>,
        size: Option<u64>,
        cx: &Context,
    ) -> Result<Target> {
        let (store, created) = open_or_create(image, size, false, &cx.remote)?;
        let mut target = Target {
            image: image.to_path_buf(),
            store: Arc::new(store),
            created,
            header: None,
            claims: Claims::default(),
        };
        if let Some(h) = header {
            match open_or_create(h, None, true, &cx.remote) {
                Ok((hdr, made)) if !hdr.same_as(&target.store) => {
                    target.header = Some((hdr, made, h.to_path_buf()));
                }
                Ok(_) => {}
                Err(e) => {
                    target.discard();
                    return Err(e);
                }
            }
        }
        if let Err(e) = target.claim(cx) {
            target.discard();
            return Err(e);
        }
        Ok(target)
    }

    fn claim(&mut self, cx: &Context) -> Result<()> {
        let c = claim(&self.store, &self.image, Mode::Exclusive, cx.on_wait)?;
        self.claims.push(Some(c));
        if let Some((hdr, _, p)) = &self.header {
            let c = claim(hdr, p, Mode::Exclusive, cx.on_wait)?;
            self.claims.push(Some(c));
        }
        Ok(())
    }

    /// Whether the file the header goes to existed before (its contents will be
    /// overwritten: a front end asks first).
    pub fn existed(&self) -> bool {
        match &self.header {
            Some((_, made, _)) => !made,
            None => !self.created,
        }
    }

    /// Whether this made the image's file.
    pub fn created(&self) -> bool {
        self.created
    }

    /// Where the header goes: the image, or the detached header's file.
    pub fn header_path(&self) -> &Path {
        self.header.as_ref().map_or(&self.image, |(_, _, p)| p)
    }

    /// The header's store.
    pub fn header_store(&self) -> &ImageStore {
        self.header.as_ref().map_or(&*self.store, |(h, _, _)| h)
    }

    /// Whether the header is detached.
    pub fn detached(&self) -> bool {
        self.header.is_some()
    }

    /// Where the header and the data go.
    pub fn placement(&self) -> Placement<'_> {
        match &self.header {
            Some((hdr, _, _)) => Placement::Detached {
                header: hdr,
                data: &*self.store,
            },
            None => Placement::Attached(&*self.store),
        }
    }

    /// The signatures of every format found on the stores now (what formatting wipes).
    pub fn signatures(&self) -> Result<Vec<formats::Signature>> {
        let mut found = formats::signatures(&*self.store)?;
        if let Some((hdr, _, _)) = &self.header {
            found.extend(formats::signatures(hdr)?);
        }
        Ok(found)
    }

    /// The exclusive header lock, waiting (through `cx.on_wait`) for another process's.
    pub fn lock(&self, cx: &Context) -> Result<Guard> {
        lock_header(
            self.header_store(),
            self.header_path(),
            Mode::Exclusive,
            cx.on_wait,
        )
    }

    /// Gives up: the claims are released and the files this made are removed.
    pub fn discard(self) {
        let Target {
            image,
            store,
            created,
            header,
            claims,
        } = self;
        drop(claims);
        if let Some((hdr, true, p)) = header {
            drop(hdr);
            let _ = std::fs::remove_file(p);
        }
        if created {
            drop(store);
            let _ = std::fs::remove_file(image);
        }
    }
}

/// Seals every sector of a new authenticated GELI provider on `store` (zeros written
/// through the engine of `unlocked`, with their tags), so that reading any sector
/// succeeds; `done` is told the bytes sealed so far after each step of 64 MiB.
pub fn seal(store: &Arc<ImageStore>, unlocked: &Unlocked, done: &dyn Fn(u64)) -> Result<()> {
    let vol = unlocked.engine(Box::new(Arc::clone(store)), EngineOptions::default())?;
    let total = vol.size();
    let failed = |e| Error::io(store.name(), e);
    let step = 64u64 << 20;
    let mut sealed = 0;
    while sealed < total {
        let n = step.min(total - sealed);
        vol.write_zeroes(sealed, n).map_err(failed)?;
        sealed += n;
        done(sealed);
    }
    vol.flush().map_err(failed)
}

/// The key size in bits of a LUKS volume with `cipher`: `bits` when given (a multiple of
/// 8), otherwise 512 for XTS (two AES-256 keys) and 256 for the other modes.
pub fn luks_key_bits(cipher: &str, bits: Option<usize>) -> Result<usize> {
    let xts = cipher
        .parse::<CipherSpec>()
        .is_ok_and(|s| s.mode == CipherMode::Xts);
    let bits = bits.unwrap_or(if xts { 512 } else { 256 });
    if !bits.is_multiple_of(8) {
        return Err(Error::invalid("the key size is in bits, a multiple of 8"));
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_claim_removes_the_files_made_and_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let hdr = dir.path().join("hdr");
        let cx = Context::default();
        let first = Target::open(&img, None, Some(1 << 20), &cx).unwrap();
        assert!(first.created() && !first.existed() && !first.detached());
        // In use by `first`: refused, and the header file it would have made is gone.
        let e = Target::open(&img, Some(&hdr), None, &cx).unwrap_err();
        assert_eq!(e.class(), crate::Class::InUse, "{e}");
        assert!(img.exists() && !hdr.exists());
        first.discard();
        assert!(!img.exists());
        let e = Target::open(&img, None, None, &cx).unwrap_err();
        assert!(e.message().contains("give a size"), "{e}");
        assert!(!img.exists());
    }

    #[test]
    fn luks_key_sizes_default_by_mode_and_are_whole_bytes() {
        assert_eq!(luks_key_bits("aes-xts-plain64", None).unwrap(), 512);
        assert_eq!(luks_key_bits("aes-cbc-essiv:sha256", None).unwrap(), 256);
        assert_eq!(luks_key_bits("aes-xts-plain64", Some(256)).unwrap(), 256);
        assert!(luks_key_bits("aes-xts-plain64", Some(255)).is_err());
    }
}

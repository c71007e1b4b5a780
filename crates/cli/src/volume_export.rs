//! Opening a volume to serve it (`serve`, `mount`): unlocking (or a one-time key), the
//! sector engine, and the adapter from the engine to the NBD crate's [`Export`] trait.

use crate::args::{KeyArgs, OpenArgs};
use crate::failure::Failure;
use crate::image::{self, Claims};
use sectorcrypt_nbd::Export;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::geli::{self, onetime::OnetimeOptions};
use sectorcrypt_volume::lock::{self, Mode};
use sectorcrypt_volume::{Store, Unlocked};
use std::io::{self, Write};

/// An open volume as an NBD export, with the claims on its files (dropped after it).
#[derive(Debug)]
pub struct VolumeExport {
    volume: Volume,
    discards: bool,
    /// The format's name and the cipher string, as `status` shows them.
    described: (&'static str, String),
    _claims: Claims,
}

impl VolumeExport {
    /// Offers NBD TRIM, passed on as discards (holes in a file) (cryptsetup's
    /// `--allow-discards`: it reveals which sectors are unused).
    pub fn allow_discards(&mut self, yes: bool) {
        self.discards = yes;
    }

    /// The volume's format (its name) and cipher (a cipher string).
    pub fn described(&self) -> (&'static str, &str) {
        (self.described.0, &self.described.1)
    }
}

impl Export for VolumeExport {
    fn size(&self) -> u64 {
        self.volume.size()
    }
    fn preferred_block_size(&self) -> u32 {
        self.volume.sector_size() as u32
    }
    fn read_only(&self) -> bool {
        self.volume.read_only()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.volume.read_at(buf, offset)
    }
    fn read_owned(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        self.volume.read_owned(buf, range, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.volume.write_at(buf, offset)
    }
    fn write_owned(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        self.volume.write_owned(buf, range, offset)
    }
    fn starts_write(&self, offset: u64, len: usize) -> bool {
        self.volume.starts_write(offset, len)
    }
    fn start_write(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
        done: sectorcrypt_nbd::WriteDone,
    ) {
        self.volume.start_write(buf, range, offset, done)
    }
    fn flush(&self) -> io::Result<()> {
        self.volume.flush()
    }
    fn can_fua(&self) -> bool {
        self.volume.can_fua()
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.volume.write_at_fua(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, length: u64) -> io::Result<()> {
        self.volume.write_zeroes(offset, length)
    }
    fn can_trim(&self) -> bool {
        self.discards
    }
    fn trim(&self, offset: u64, length: u64) -> io::Result<()> {
        self.volume.discard(offset, length)
    }
}

fn options(a: &OpenArgs) -> Result<EngineOptions, Failure> {
    if a.threads == Some(0) {
        return Err(Failure::usage("--threads must be at least 1"));
    }
    Ok(EngineOptions {
        threads: a.threads,
        read_only: a.read_only,
        chunk_bytes: None,
    })
}

/// Opens the volume `a` describes.
pub fn open(a: &OpenArgs) -> Result<VolumeExport, Failure> {
    crate::memory::hold_keys_for_long();
    let export = open_export(a);
    crate::memory::scrub_after_unlock();
    crate::memory::warn_if_key_memory_not_locked();
    export
}

fn open_export(a: &OpenArgs) -> Result<VolumeExport, Failure> {
    if a.onetime {
        return onetime(a);
    }
    let key = KeyArgs {
        key_file: a.key_file.clone(),
        keyfile_component: a.keyfile_component.clone(),
        no_passphrase: a.no_passphrase,
        key_slot: a.key_slot,
        batch: false,
    };
    let image::Opened {
        volume,
        unlocked,
        format,
        claims,
    } = image::open_volume(&a.image, &a.header, &key, options(a)?, a.shared)?;
    require_integrity(a, &unlocked, format)?;
    let _ = writeln!(
        io::stderr(),
        "sectorcrypt: {} unlocked with keyslot {}: {} bytes of {}, {}-byte sectors",
        crate::locator::redacted(&a.image),
        unlocked.keyslot,
        unlocked.data_size,
        unlocked.cipher,
        unlocked.sector_size
    );
    Ok(VolumeExport {
        volume,
        discards: false,
        described: (format, unlocked.cipher.clone()),
        _claims: claims,
    })
}

/// `--integrity`: refuses a volume whose sectors are not authenticated.
fn require_integrity(a: &OpenArgs, unlocked: &Unlocked, format: &str) -> Result<(), Failure> {
    if !a.integrity || unlocked.authenticated() {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{} ({format}) has no data authentication, and --integrity asks for it: {}",
        crate::locator::redacted(&a.image),
        if format == "geli" {
            "its metadata's AUTH flag is clear (made without geli init -a, or cleared by \
             whoever could write the metadata: the flag is not itself authenticated)"
        } else {
            "its sectors carry no authentication tags"
        }
    )))
}

/// GELI's one-time mode (`geli onetime`, or `--onetime`: AES-XTS with 256-bit AES keys
/// and 512-byte sectors): the whole file is the data area under a fresh random master
/// key that exists only in memory; no metadata is written, no sector reserved.
fn onetime(a: &OpenArgs) -> Result<VolumeExport, Failure> {
    if a.read_only {
        return Err(Failure::usage(
            "--onetime with --read-only: nothing written under a fresh key could be read",
        ));
    }
    let opts = a.onetime_geli.clone().unwrap_or(OnetimeOptions {
        keylen: 256,
        ..OnetimeOptions::default()
    });
    let store = image::open_store(&a.image, true)?;
    let mut claims = Claims::from(image::claim(&store, &a.image, Mode::Shared)?);
    // It writes: one writer at a time, as for any volume.
    claims.push(image::claim_access(&store, lock::Access::Writer)?);
    let len = store
        .size()
        .map_err(|e| Failure::runtime(format!("{}: {e}", crate::locator::redacted(&a.image))))?;
    let (md, unlocked) = geli::onetime::onetime(len, &opts)?;
    require_integrity(a, &unlocked, "geli-onetime")?;
    let volume = unlocked.engine(Box::new(store), options(a)?)?;
    let _ = writeln!(
        io::stderr(),
        "sectorcrypt: one-time GELI provider of {} bytes: {} with a {}-bit key, {}-byte \
         sectors (a random master key held in memory only)",
        unlocked.data_size,
        geli::metadata::algo::name(md.ealgo),
        md.keylen,
        md.sectorsize
    );
    Ok(VolumeExport {
        volume,
        discards: false,
        described: ("geli-onetime", unlocked.cipher.clone()),
        _claims: claims,
    })
}

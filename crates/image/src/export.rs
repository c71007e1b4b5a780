//! A volume's engine as an NBD export: the adapter from [`Volume`] to the NBD crate's
//! [`Export`] trait, holding the use claims of the volume's stores for as long as it is
//! served (`sectorcrypt serve`, `mount`, `open`, and any program serving a volume).

use crate::image::Claims;
use sectorcrypt_nbd::Export;
use sectorcrypt_volume::engine::Volume;
use std::io;

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
    /// `volume` as an export, described as `format` with `cipher`, holding `claims` until
    /// it is dropped (after the engine). Discards are not offered until
    /// [`VolumeExport::allow_discards`].
    pub fn new(
        volume: Volume,
        format: &'static str,
        cipher: String,
        claims: Claims,
    ) -> VolumeExport {
        VolumeExport {
            volume,
            discards: false,
            described: (format, cipher),
            _claims: claims,
        }
    }

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
    fn quick_reads(&self) -> bool {
        self.volume.quick_reads()
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

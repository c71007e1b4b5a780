//! Re-encryption while the volume is served: the engine keeps working under the old
//! layout (old key, cipher and sector size) over a [`Translated`] store that presents the
//! part already under the new key as if it were under the old one, and the run moves the
//! progress line ([`Line`]) hotzone by hotzone.
//!
//! - Every request of the engine holds the line's read lock for as long as it touches the
//!   store; the run holds its write lock for a whole hotzone step (resilience data, header,
//!   data, sync, header), so no request sees a hotzone half rewritten, and the line moves
//!   at the end of the step.
//! - Below the line a read is decrypted under the new key and encrypted under the old one
//!   for the engine; a write goes the other way. Above it, requests pass through.
//! - On disk the metadata is what an offline run writes: a crash leaves a state that the
//!   next run (online or offline) or cryptsetup recovers.
//!
//! The old and the new sector size must be equal (a sector of one layout must be a sector
//! of the other): change the sector size offline.

use super::line::Line;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::store::Store;
use std::io;
use zeroize::Zeroizing;

/// The data's store as the engine of the old layout sees it during an online
/// re-encryption (see the module documentation).
pub struct Translated {
    inner: Box<dyn Store>,
    line: std::sync::Arc<Line>,
    old: Layout,
    new: Layout,
    /// The data offset in the store.
    offset: u64,
    sector: u64,
}

impl std::fmt::Debug for Translated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Translated")
            .field("inner", &self.inner.name())
            .field("line", &self.line.get())
            .finish_non_exhaustive()
    }
}

impl Translated {
    /// `inner` translated below `line`: `old` is the engine's layout, `new` the one the
    /// data below the line is under (same data offset and sector size).
    pub fn new(
        inner: Box<dyn Store>,
        line: std::sync::Arc<Line>,
        old: Layout,
        new: Layout,
    ) -> Result<Translated> {
        let (og, ng) = (old.geometry(), new.geometry());
        if og.sector_size != ng.sector_size || og.data_offset != ng.data_offset {
            return Err(Error::unsupported(format!(
                "an online re-encryption from {}-byte to {}-byte sectors: change the sector \
                 size offline (sectorcrypt reencrypt on the volume while nothing serves it)",
                og.sector_size, ng.sector_size
            )));
        }
        Ok(Translated {
            inner,
            line,
            offset: og.data_offset,
            sector: og.sector_size as u64,
            old,
            new,
        })
    }

    /// The part of `[offset, offset + len)` below the line `line`, as a byte count from
    /// `offset` (0: none).
    fn below(&self, offset: u64, len: usize, line: u64) -> usize {
        let end = self.offset + line;
        if offset >= end || offset < self.offset {
            return 0;
        }
        (end - offset).min(len as u64) as usize
    }

    fn sector_of(&self, offset: u64) -> io::Result<u64> {
        let rel = offset - self.offset;
        if !rel.is_multiple_of(self.sector) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a request at {offset} is not on a sector boundary"),
            ));
        }
        Ok(rel / self.sector)
    }
}

fn crypt(e: Error) -> io::Error {
    io::Error::other(e)
}

impl Store for Translated {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let line = self.line.read();
        self.inner.read_at(buf, offset)?;
        let n = self.below(offset, buf.len(), *line);
        if n > 0 {
            let s = self.sector_of(offset)?;
            self.new.decrypt(s, &mut buf[..n]).map_err(crypt)?;
            self.old.encrypt(s, &mut buf[..n]).map_err(crypt)?;
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let line = self.line.read();
        let n = self.below(offset, buf.len(), *line);
        if n > 0 {
            let s = self.sector_of(offset)?;
            let mut copy = Zeroizing::new(buf[..n].to_vec());
            self.old.decrypt(s, &mut copy).map_err(crypt)?;
            self.new.encrypt(s, &mut copy).map_err(crypt)?;
            self.inner.write_at(&copy, offset)?;
        }
        if n < buf.len() {
            self.inner.write_at(&buf[n..], offset + n as u64)?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        let _line = self.line.read();
        self.inner.discard(offset, len)
    }
}

impl super::super::Luks2 {
    /// The engine of a volume whose re-encryption is in progress (state clean), over
    /// `store` (the data's store), under the old layout with the part already done
    /// translated, and the line a run moves ([`super::RunOptions::line`]). `data` is the
    /// data's store as the header sees it (for its size).
    pub fn reencrypt_engine(
        &self,
        data: &dyn Store,
        keys: &super::Keys,
        store: Box<dyn Store>,
        opts: crate::engine::EngineOptions,
    ) -> Result<(crate::engine::Volume, std::sync::Arc<Line>)> {
        let engine = self.rekey_state(data, keys)?;
        let p = self.rekey_state(data, keys)?;
        if p.backward {
            return Err(Error::unsupported(
                "serving a volume whose reencryption runs backward (a decryption): finish \
                 it offline first (sectorcrypt reencrypt IMAGE)",
            ));
        }
        let line = std::sync::Arc::new(Line::new(p.done));
        let translated = Translated::new(store, line.clone(), p.old.layout()?, p.new.layout()?)?;
        let volume = crate::engine::Volume::new(Box::new(translated), engine.old.layout()?, opts)?;
        Ok((volume, line))
    }
}

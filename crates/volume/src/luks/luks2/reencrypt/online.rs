//! Re-encryption while the volume is served: the engine keeps working under the old
//! layout (old key, cipher and sector size) over a [`Translated`] store that presents the
//! part already under the new key as if it were under the old one, and the run moves the
//! progress line ([`Line`]) hotzone by hotzone.
//!
//! - Every request of the engine holds the line's read lock for as long as it touches the
//!   store; the run holds its write lock for a whole hotzone step (resilience data, header,
//!   data, sync, header), so no request sees a hotzone half rewritten, and the line moves
//!   at the end of the step.
//! - On the done side of the line (below it in a forward run, above it in a backward one)
//!   a read is decrypted under the new key and encrypted under the old one for the
//!   engine; a write goes the other way. On the other side, requests pass through.
//! - An encryption or a decryption in place runs the same way: the plaintext side is a
//!   layout without encryption ([`Layout::plaintext`]), so the engine of an encryption
//!   serves plaintext from the start.
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
use std::ops::Range;
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
    /// The data area's bytes.
    total: u64,
    /// The done part is at the end (the line counts bytes done from the end).
    backward: bool,
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
    /// `inner` translated on the done side of `line` (the first `line` bytes of the
    /// `total`-byte data area, or the last ones when `backward`): `old` is the engine's
    /// layout, `new` the one the done data is under (same data offset and sector size).
    pub fn new(
        inner: Box<dyn Store>,
        line: std::sync::Arc<Line>,
        (old, new): (Layout, Layout),
        total: u64,
        backward: bool,
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
            total,
            backward,
            old,
            new,
        })
    }

    /// The part of `[offset, offset + len)` on the done side of `line` bytes done, as a
    /// range of the request's bytes (empty: none).
    fn done_part(&self, offset: u64, len: usize, line: u64) -> Range<usize> {
        let end = offset.saturating_add(len as u64);
        let (from, to) = if self.backward {
            (
                self.offset + self.total.saturating_sub(line),
                self.offset + self.total,
            )
        } else {
            (self.offset, self.offset + line)
        };
        let (a, b) = (offset.max(from), end.min(to));
        if a >= b {
            return 0..0;
        }
        (a - offset) as usize..(b - offset) as usize
    }

    /// The line, held for a request, unless a hotzone step failed (then every request
    /// fails: the zone may be half rewritten).
    fn line_unless_failed(&self) -> io::Result<std::sync::RwLockReadGuard<'_, u64>> {
        let line = self.line.read();
        if self.line.failed() {
            return Err(failed());
        }
        Ok(line)
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

/// The error of every request after a hotzone step failed.
fn failed() -> io::Error {
    io::Error::other(
        "the online re-encryption failed in the middle of a hotzone: stop the server, then \
         sectorcrypt repair and sectorcrypt reencrypt (or cryptsetup) recover it",
    )
}

impl Store for Translated {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let line = self.line_unless_failed()?;
        self.inner.read_at(buf, offset)?;
        let done = self.done_part(offset, buf.len(), *line);
        if !done.is_empty() {
            let s = self.sector_of(offset + done.start as u64)?;
            self.new.decrypt(s, &mut buf[done.clone()]).map_err(crypt)?;
            self.old.encrypt(s, &mut buf[done]).map_err(crypt)?;
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let line = self.line_unless_failed()?;
        let done = self.done_part(offset, buf.len(), *line);
        if done.is_empty() {
            return self.inner.write_at(buf, offset);
        }
        let s = self.sector_of(offset + done.start as u64)?;
        let mut copy = Zeroizing::new(buf[done.clone()].to_vec());
        self.old.decrypt(s, &mut copy).map_err(crypt)?;
        self.new.encrypt(s, &mut copy).map_err(crypt)?;
        // The parts on either side of the done one (one of them, or both, empty).
        let parts = [
            (&buf[..done.start], 0),
            (&copy[..], done.start),
            (&buf[done.end..], done.end),
        ];
        for (bytes, at) in parts.into_iter().filter(|(b, _)| !b.is_empty()) {
            self.inner.write_at(bytes, offset + at as u64)?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        let _line = self.line_unless_failed()?;
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
        if p.source != p.offset {
            return Err(Error::unsupported(
                "serving a volume while its data is moved (a re-key with \
                 --reduce-device-size): run it offline (sectorcrypt reencrypt)",
            ));
        }
        let (offset, total) = (p.offset, p.total);
        let line = std::sync::Arc::new(Line::new(p.done));
        let layouts = (p.old.layout(offset, total)?, p.new.layout(offset, total)?);
        let translated = Translated::new(store, line.clone(), layouts, total, p.backward)?;
        let old = engine.old.layout(offset, total)?;
        let volume = crate::engine::Volume::new(Box::new(translated), old, opts)?;
        Ok((volume, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Geometry, IvRule};
    use crate::store::MemStore;
    use std::sync::Arc;

    const OFFSET: u64 = 4096;
    const SECTOR: usize = 512;
    const TOTAL: u64 = 16 * SECTOR as u64;

    fn geometry() -> Geometry {
        Geometry {
            sector_size: SECTOR,
            data_offset: OFFSET,
            size: TOTAL,
            iv: IvRule::Units512 { first: 0 },
            metadata: None,
        }
    }

    fn aes(key_byte: u8) -> Layout {
        let spec = crate::luks::keyslot::cipher_spec("aes-xts-plain64", 64).unwrap();
        let key: Vec<u8> = (0..64u8).map(|i| i ^ key_byte).collect();
        Layout::single(geometry(), spec, &key).unwrap()
    }

    /// An encryption (plaintext to AES, forward) and a decryption (AES to plaintext,
    /// backward) with the line at 5 sectors: the engine's layout sees its own ciphertext
    /// everywhere, and the store holds the new layout's bytes on the done side only, for
    /// requests on either side and across the line.
    #[test]
    fn the_done_side_is_translated_forward_and_backward() {
        let plain: Vec<u8> = (0..TOTAL as usize).map(|i| (i * 7 % 251) as u8).collect();
        let line_at = 5 * SECTOR as u64;
        for backward in [false, true] {
            // The old and the new layout: each test's own, and the store's copy.
            let pair = || {
                let plaintext = Layout::plaintext(geometry()).unwrap();
                if backward {
                    (aes(1), plaintext)
                } else {
                    (plaintext, aes(2))
                }
            };
            let (old, new) = pair();
            // The done part: the first 5 sectors forward, the last 5 backward.
            let done = if backward {
                TOTAL - line_at..TOTAL
            } else {
                0..line_at
            };
            let mem = Arc::new(MemStore::new((OFFSET + TOTAL) as usize));
            let line = Arc::new(Line::new(line_at));
            let t = Translated::new(Box::new(mem.clone()), line, pair(), TOTAL, backward).unwrap();
            // The engine writes the whole area in three requests that cut the line.
            let mut ct = plain.clone();
            old.encrypt(0, &mut ct).unwrap();
            for (a, b) in [(0, 3), (3, 13), (13, 16)] {
                let r = a * SECTOR..b * SECTOR;
                t.write_at(&ct[r.clone()], OFFSET + r.start as u64).unwrap();
            }
            let on_disk = mem.to_vec()[OFFSET as usize..].to_vec();
            for s in 0..16u64 {
                let r = (s as usize * SECTOR)..(s as usize + 1) * SECTOR;
                let mut want = plain[r.clone()].to_vec();
                if done.contains(&(s * SECTOR as u64)) {
                    new.encrypt(s, &mut want).unwrap();
                } else {
                    old.encrypt(s, &mut want).unwrap();
                }
                assert_eq!(
                    on_disk[r],
                    want[..],
                    "backward {backward}: sector {s} on disk"
                );
            }
            // Reads that cut the line give the engine its own ciphertext back.
            for (a, b) in [(0, 16), (4, 6), (10, 12), (2, 4)] {
                let mut got = vec![0u8; (b - a) * SECTOR];
                t.read_at(&mut got, OFFSET + (a * SECTOR) as u64).unwrap();
                assert_eq!(
                    got,
                    ct[a * SECTOR..b * SECTOR],
                    "backward {backward}: {a}..{b}"
                );
            }
        }
    }

    /// After a failed hotzone step every request is refused and nothing is written.
    #[test]
    fn a_failed_step_refuses_every_request() {
        let mem = Arc::new(MemStore::new((OFFSET + TOTAL) as usize));
        let line = Arc::new(Line::new(SECTOR as u64));
        let layouts = (Layout::plaintext(geometry()).unwrap(), aes(2));
        let t =
            Translated::new(Box::new(mem.clone()), line.clone(), layouts, TOTAL, false).unwrap();
        t.write_at(&[1u8; SECTOR], OFFSET).unwrap();
        let before = mem.to_vec();
        line.fail();
        let mut buf = [0u8; SECTOR];
        for e in [
            t.read_at(&mut buf, OFFSET).unwrap_err(),
            t.write_at(&[2u8; SECTOR], OFFSET + SECTOR as u64)
                .unwrap_err(),
            t.discard(OFFSET, SECTOR as u64).unwrap_err(),
        ] {
            assert!(
                e.to_string().contains("failed in the middle of a hotzone"),
                "{e}"
            );
        }
        assert!(mem.to_vec() == before, "a refused request wrote");
    }
}

//! `luks::convert` stopped at its k-th write, for every k, judged by cryptsetup and here:
//! a store that fails every write from the k-th on (the writes before it landed whole)
//! leaves an image that `cryptsetup open --test-passphrase` opens with every passphrase
//! and `isLuks` calls the old or the new version, and that sectorcrypt opens with every
//! passphrase to the same plaintext. (Torn writes and lost unsynced writes are the crash
//! harness's, `tests/crash`, which judges with sectorcrypt alone.) Running the same
//! conversion again on each such image completes it (or says the volume already is of
//! the version asked for, once the new header is in place).

use super::common::{fast_pbkdf2, file_with, open_rw, read_plain, write_plain, MIB};
use sectorcrypt_testkit::{pattern, require};
use sectorcrypt_volume::luks::{self, convert, FormatOptions, Version};
use sectorcrypt_volume::{FileStore, Header, Store};
use std::io;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file store whose writes fail from the `budget`-th on.
#[derive(Debug)]
struct Failing {
    inner: FileStore,
    budget: AtomicUsize,
}

impl Store for Failing {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let left = self
            .budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match left {
            Err(_) => Err(io::Error::other("injected: the power is gone")),
            Ok(_) => self.inner.write_at(buf, offset),
        }
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
}

const PASSES: [&str; 2] = ["pass-zero", "pass-one"];

/// `dir/v.img` of `version` with keyslots for both passphrases and known plaintext.
fn volume(dir: &Path, version: Version) -> (std::path::PathBuf, Vec<u8>) {
    let img = dir.join("v.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(4 * MIB)
        .unwrap();
    let store = open_rw(&img);
    let opts = FormatOptions {
        version,
        kdf: fast_pbkdf2(),
        data_offset: (version == Version::Luks2).then_some(2 * MIB),
        ..FormatOptions::default()
    };
    let (mut h, u) = luks::format(&store, &opts, PASSES[0].as_bytes(), None).unwrap();
    h.add_key(&store, &u, PASSES[1].as_bytes(), &fast_pbkdf2(), None)
        .unwrap();
    let plain = pattern(MIB as usize, 5);
    write_plain(&store, &u, 0, &plain);
    (img, plain)
}

/// What cryptsetup and sectorcrypt make of `img`: `Err` with the reason when either
/// does not open it with both passphrases, or the plaintext differs.
fn judge(img: &Path, keys: &[std::path::PathBuf], plain: &[u8]) -> Result<&'static str, String> {
    let is = |t: &str| {
        Command::new("cryptsetup")
            .args(["isLuks", "--disable-locks", "--type", t])
            .arg(img)
            .status()
            .unwrap()
            .success()
    };
    let version = match (is("luks1"), is("luks2")) {
        (true, false) => "luks1",
        (false, true) => "luks2",
        other => return Err(format!("cryptsetup isLuks says {other:?}")),
    };
    for k in keys {
        let ok = Command::new("cryptsetup")
            .args(["open", "--test-passphrase", "--disable-locks", "--key-file"])
            .arg(k)
            .arg(img)
            .status()
            .unwrap()
            .success();
        if !ok {
            return Err(format!("cryptsetup does not open it with {}", k.display()));
        }
    }
    let store = FileStore::open(img, false).unwrap();
    let h = Header::read(&store).map_err(|e| e.to_string())?;
    if h.name() != version {
        return Err(format!(
            "sectorcrypt reads {}, cryptsetup {version}",
            h.name()
        ));
    }
    for p in PASSES {
        let u = h
            .unlock(&store, p.as_bytes())
            .map_err(|e| format!("{p}: {e}"))?;
        if read_plain(&store, &u, 0, plain.len()) != plain {
            return Err(format!("{p}: the plaintext differs"));
        }
    }
    Ok(version)
}

fn every_write(from: Version, to: Version) {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (base, plain) = volume(dir.path(), from);
    let keys: Vec<_> = PASSES
        .iter()
        .enumerate()
        .map(|(i, p)| file_with(dir.path(), &format!("k{i}"), p))
        .collect();
    let img = dir.path().join("cut.img");
    let mut seen = Vec::new();
    for k in 0..200 {
        std::fs::copy(&base, &img).unwrap();
        let store = Failing {
            inner: open_rw(&img),
            budget: AtomicUsize::new(k),
        };
        let h = Header::read(&store).unwrap();
        let done = convert::convert(&store, &h, to).is_ok();
        drop(store);
        let v = judge(&img, &keys, &plain).unwrap_or_else(|e| panic!("cut at write {k}: {e}"));
        seen.push(v);
        // Run again, without failures: it completes the conversion.
        let store = open_rw(&img);
        let h = Header::read(&store).unwrap();
        match convert::convert(&store, &h, to) {
            Ok(()) => {}
            Err(e) if v == to.name() && e.to_string().contains("already") => {}
            Err(e) => panic!("cut at write {k} ({v}), run again: {e}"),
        }
        drop(store);
        let again = judge(&img, &keys, &plain)
            .unwrap_or_else(|e| panic!("cut at write {k}, run again: {e}"));
        assert_eq!(again, to.name(), "cut at write {k}, run again");
        if done {
            assert_eq!(v, to.name(), "the completed conversion");
            eprintln!(
                "convert {} -> {}: {k} writes, every cut judged",
                from.name(),
                to.name()
            );
            assert_eq!(seen[0], from.name());
            return;
        }
    }
    panic!("the conversion did not complete within 200 writes");
}

#[test]
fn luks1_to_luks2_cut_at_every_write_opens_in_cryptsetup() {
    every_write(Version::Luks1, Version::Luks2);
}

#[test]
fn luks2_to_luks1_cut_at_every_write_opens_in_cryptsetup() {
    every_write(Version::Luks2, Version::Luks1);
}

/// A LUKS1 header with librbd's layered-clone magic is librbd's: refused, nothing written.
#[test]
fn a_layered_clone_header_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = volume(dir.path(), Version::Luks1);
    let store = open_rw(&img);
    store.write_at(luks::Magic::RbdClone.primary(), 0).unwrap();
    let before = std::fs::read(&img).unwrap();
    let h = Header::read(&store).unwrap();
    let e = convert::convert(&store, &h, Version::Luks2).unwrap_err();
    assert!(e.to_string().contains("layered-clone"), "{e}");
    assert_eq!(std::fs::read(&img).unwrap(), before);
}

//! Volumes for RBD images: librbd formats with libcryptsetup, asking for the data to be
//! aligned to the image's object size (Ceph's src/librbd/crypto/luks/FormatRequest.cc and
//! Header.cc: `data_alignment = object_size`). A volume made here with the same alignment
//! must have the layout `cryptsetup luksFormat --align-payload` gives, and a store that
//! has an object size gets it without being asked.

use super::common::*;
use sectorcrypt_testkit::{require, run_stdout};
use sectorcrypt_volume::luks::{format, FormatOptions, Version};
use sectorcrypt_volume::{FileStore, Header, Store};
use std::io;
use std::process::Command;

/// Data offset, keyslots area (LUKS2) and sector size, as `cryptsetup luksDump` says.
fn cryptsetup_layout(img: &std::path::Path) -> (u64, Option<u64>, u64) {
    let dump = run_stdout(Command::new("cryptsetup").arg("luksDump").arg(img));
    let num = |key: &str| {
        dump.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(|v| {
                let v = v.trim_start_matches(':').trim();
                v.split_whitespace().next().unwrap().parse::<u64>().unwrap()
            })
    };
    match num("Payload offset") {
        Some(sectors) => (sectors * 512, None, 512),
        None => (
            num("offset").expect("a data segment offset"),
            num("Keyslots area"),
            num("sector").expect("a sector size"),
        ),
    }
}

fn options(version: Version, align: u64) -> FormatOptions {
    FormatOptions {
        version,
        sector_size: if version == Version::Luks2 { 4096 } else { 512 },
        kdf: fast_pbkdf2(),
        data_alignment: Some(align),
        ..FormatOptions::default()
    }
}

#[test]
fn rbd_object_size_alignment_matches_cryptsetup_align_payload() {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let size = 160 * MIB;
    for (version, name) in [(Version::Luks1, "luks1"), (Version::Luks2, "luks2")] {
        for align in [64 << 10, 4 * MIB, 8 * MIB, 32 * MIB] {
            let mine = blank_image(dir.path(), size);
            format(&open_rw(&mine), &options(version, align), b"pass", None).unwrap();
            let layout = cryptsetup_layout(&mine);
            std::fs::remove_file(&mine).unwrap();
            let (theirs, _) = cryptsetup_volume(
                dir.path(),
                size,
                "pass",
                &[
                    "--type",
                    name,
                    "--pbkdf",
                    "pbkdf2",
                    "--pbkdf-force-iterations",
                    "1000",
                    "--sector-size",
                    if name == "luks2" { "4096" } else { "512" },
                    "--key-size",
                    "512",
                    "--align-payload",
                    &(align / 512).to_string(),
                ],
            );
            assert_eq!(
                layout,
                cryptsetup_layout(&theirs),
                "{name} aligned to {align} bytes"
            );
            assert_eq!(layout.0 % align, 0);
            std::fs::remove_file(&theirs).unwrap();
        }
    }
}

/// A file store that says it is cut into 32 MiB objects, as an RBD image may be.
#[derive(Debug)]
struct Objects(FileStore);

impl Store for Objects {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn size(&self) -> io::Result<u64> {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.0.sync()
    }
    fn object_size(&self) -> Option<u64> {
        Some(32 * MIB)
    }
}

#[test]
fn a_store_with_objects_gets_its_data_aligned_to_them() {
    let dir = tempfile::tempdir().unwrap();
    for version in [Version::Luks1, Version::Luks2] {
        let img = blank_image(dir.path(), 96 * MIB);
        let store = Objects(open_rw(&img));
        let opts = FormatOptions {
            data_alignment: None,
            ..options(version, 0)
        };
        let (_, u) = format(&store, &opts, b"pass", None).unwrap();
        assert_eq!(u.data_offset, 32 * MIB, "{version:?}");
        let h = Header::read(&store).unwrap();
        h.unlock(&store, b"pass").unwrap();
    }
}

#[test]
fn alignments_that_are_no_power_of_two_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank_image(dir.path(), 64 * MIB);
    for bad in [0, 512, 3 << 20] {
        let e = format(&open_rw(&img), &options(Version::Luks2, bad), b"p", None).unwrap_err();
        assert!(e.to_string().contains("power of two"), "{bad}: {e}");
    }
}

//! librbd's layered-clone headers: a clone formatted with its own key carries `RBDL\xba\xbe`
//! where LUKS has `LUKS\xba\xbe` (and, LUKS2, `LDBR\xba\xbe` for the secondary copy's
//! `SKUL\xba\xbe`), while the checksums stay those computed over the real magic: librbd lets
//! libcryptsetup write the header, then swaps the magic (Ceph's
//! src/librbd/crypto/luks/Magic.cc). Ceph 16 cannot make such clones, so these images are
//! cryptsetup-made headers transformed by Magic.cc's rules here.

use super::common::*;
use sectorcrypt_testkit::{pattern, require, run};
use sectorcrypt_volume::{Header, Store};
use std::path::Path;
use std::process::Command;

const LUKS: &[u8; 6] = b"LUKS\xba\xbe";
const RBDL: &[u8; 6] = b"RBDL\xba\xbe";

/// Magic.cc's secondary transform: bytes 0/3 and 1/2 swapped ("RBDL" <-> "LDBR").
fn secondary(m: &[u8; 6]) -> [u8; 6] {
    [m[3], m[2], m[1], m[0], m[4], m[5]]
}

/// Magic.cc's `replace_magic` from `from` to `to`: the primary's magic and, for LUKS2, the
/// secondary's at `hdr_size`; nothing else (the checksums are left as they are).
fn replace_magic(img: &Path, from: &[u8; 6], to: &[u8; 6]) {
    let f = open_rw(img);
    let mut head = [0u8; 16];
    f.read_at(&mut head, 0).unwrap();
    assert_eq!(&head[..6], from, "primary magic");
    if head[6..8] == [0, 2] {
        let hdr_size = u64::from_be_bytes(head[8..16].try_into().unwrap());
        let mut m = [0u8; 6];
        f.read_at(&mut m, hdr_size).unwrap();
        assert_eq!(m, secondary(from), "secondary magic at {hdr_size}");
        f.write_at(&secondary(to), hdr_size).unwrap();
    }
    f.write_at(to, 0).unwrap();
}

fn magics(img: &Path) -> ([u8; 6], [u8; 6]) {
    let f = open_ro(img);
    let mut p = [0u8; 6];
    let mut s = [0u8; 6];
    f.read_at(&mut p, 0).unwrap();
    f.read_at(&mut s, 16384).unwrap();
    (p, s)
}

/// A cryptsetup volume with a pattern written through the sector cipher, turned into a
/// clone header; it opens with the passphrase, decrypts the same data, and a keyslot
/// added keeps the clone magic; turned back, cryptsetup opens both passphrases.
fn clone_round_trip(version: &str) {
    require!("cryptsetup");
    let dir = tempfile::tempdir().unwrap();
    let (img, key) = cryptsetup_volume(
        dir.path(),
        24 * MIB,
        "clone pass",
        &[
            "--type",
            version,
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
        ],
    );
    let data = pattern(256 << 10, 15);
    {
        let f = open_rw(&img);
        let h = Header::read(&f).unwrap();
        let u = h.unlock(&f, b"clone pass").unwrap();
        write_plain(&f, &u, 4096, &data);
    }
    replace_magic(&img, LUKS, RBDL);

    let f = open_rw(&img);
    let mut h = Header::read(&f).unwrap_or_else(|e| panic!("{version} clone header: {e}"));
    assert_eq!(h.name(), version);
    let u = h.unlock(&f, b"clone pass").unwrap();
    assert_eq!(read_plain(&f, &u, 4096, data.len()), data);
    h.add_key(&f, &u, b"second pass", &fast_pbkdf2(), None)
        .unwrap();
    drop(f);
    let (p, s) = magics(&img);
    assert_eq!(&p, RBDL, "the primary keeps the clone magic");
    if version == "luks2" {
        assert_eq!(s, secondary(RBDL), "the secondary keeps the clone magic");
    }
    let f = open_ro(&img);
    let h = Header::read(&f).unwrap();
    assert!(h.dump().contains("RBDL"), "{}", h.dump());
    h.unlock(&f, b"second pass").unwrap();
    drop(f);

    replace_magic(&img, RBDL, LUKS);
    let second = file_with(dir.path(), "second", "second pass");
    for k in [&key, &second] {
        run(Command::new("cryptsetup")
            .args(["open", "--test-passphrase", "--key-file"])
            .arg(k)
            .arg(&img));
    }
}

#[test]
fn rbd_clone_magic_luks2_opens_and_survives_header_updates() {
    clone_round_trip("luks2");
}

#[test]
fn rbd_clone_magic_luks1_opens_and_survives_header_updates() {
    clone_round_trip("luks1");
}

/// The checksum of a clone header covers the real magic: a copy whose checksum was
/// computed over `RBDL` bytes is refused like any copy with a bad checksum.
#[test]
fn rbd_clone_checksum_is_over_the_real_magic() {
    let dir = tempfile::tempdir().unwrap();
    let img = luks2_image(dir.path());
    replace_magic(&img, LUKS, RBDL);
    Header::read(&open_ro(&img)).unwrap();
    // Checksums recomputed over the clone magic itself: wrong by Ceph's rule.
    rewrite_copy(&img, 0, |_| {});
    rewrite_copy(&img, HDR, |_| {});
    let e = Header::read(&open_ro(&img)).unwrap_err().to_string();
    assert!(e.contains("checksum"), "{e}");
}

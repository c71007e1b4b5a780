//! The `tcrypt` target: the bytes are a *decrypted* VeraCrypt/TrueCrypt header and how it
//! was found, then the start of the host (zeros after it, up to a 16 MiB image): byte 0
//! chooses the options (bit 0 hidden, 1 backup, 2 system, 3 TrueCrypt's KDFs only, 4
//! VeraCrypt's only), byte 1 is the cipher chain's index, bytes 2..514 the decrypted header
//! (zeros where the input is shorter). Its two CRC-32s (the keys at 72, the header at 252)
//! are recomputed first, so mutated fields reach the parser instead of stopping at a
//! checksum; the KDF search that finds a header is too slow to fuzz (hundreds of thousands
//! of PBKDF2 rounds per guess) and is left out. The header is parsed ([`Fields::parse`]
//! must accept it exactly when its magic is `VERA` or `TRUE`), handed to the format as
//! the key an unlock returns (the data range checked against the host, the chain set up),
//! and the first and last sectors of the volume read through the engine; a system
//! volume must refuse a write.
//!
//! Seeds (`fuzz/seeds.sh`): headers of cryptsetup's VeraCrypt and TrueCrypt test images,
//! decrypted with their passphrases (a normal and a hidden volume).

use crate::store::MemStore;
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::format::{dump, Format};
use sectorcrypt_volume::tcrypt::header::{crc32, Fields, HEADER_LEN, KEYS_AT};
use sectorcrypt_volume::tcrypt::{self, Options};

/// The host an input stands for: at least this many bytes.
const IMAGE: u64 = 16 << 20;

/// Recomputes the keys' and the header's CRC-32 of the decrypted header `h`.
pub fn fix_tcrypt_crcs(h: &mut [u8; HEADER_LEN]) {
    let keys = crc32(&h[KEYS_AT..]);
    h[72..76].copy_from_slice(&keys.to_be_bytes());
    let header = crc32(&h[64..252]);
    h[252..256].copy_from_slice(&header.to_be_bytes());
}

/// The harness.
pub fn tcrypt(input: &[u8]) {
    let Some((&flags, rest)) = input.split_first() else {
        return;
    };
    let Some((&chain, rest)) = rest.split_first() else {
        return;
    };
    let mut h = [0u8; HEADER_LEN];
    let n = rest.len().min(HEADER_LEN);
    h[..n].copy_from_slice(&rest[..n]);
    fix_tcrypt_crcs(&mut h);
    let fields = Fields::parse(&h);
    let magic_ok = &h[64..68] == b"VERA" || &h[64..68] == b"TRUE";
    assert_eq!(fields.is_some(), magic_ok, "a header with fixed CRCs");
    let options = Options {
        hidden: flags & 1 != 0,
        backup: flags & 2 != 0,
        system: flags & 4 != 0,
        truecrypt: flags & 16 == 0,
        veracrypt: flags & 8 == 0,
        ..Options::default()
    };
    let writable = !options.system;
    let store = MemStore::new(rest[n..].to_vec(), IMAGE);
    let Ok(t) = tcrypt::open(&store, options) else {
        return;
    };
    let _ = (
        dump::render(&t.report()),
        t.to_json(),
        t.volume_info(&store),
    );
    let mut key = zeroize::Zeroizing::new(h.to_vec());
    key.push(chain);
    let Ok(u) = t.unlocked(&store, key, 0) else {
        return;
    };
    assert!(fields.is_some(), "a header that does not parse opened");
    let _ = format!("{u:?}");
    let opts = EngineOptions {
        threads: Some(1),
        read_only: false,
        chunk_bytes: None,
    };
    let Ok(vol) = u.engine(Box::new(MemStore::new(rest[n..].to_vec(), IMAGE)), opts) else {
        return;
    };
    let sector = vol.sector_size() as u64;
    let mut buf = vec![0u8; sector as usize];
    if vol.size() >= sector {
        let _ = vol.read_at(&mut buf, 0);
        let _ = vol.read_at(&mut buf, vol.size() / sector * sector - sector);
        if !writable {
            assert!(
                vol.write_at(&buf, 0).is_err(),
                "a system volume was written"
            );
        }
    }
}

//! Detached headers through the library: `luks::format_at` with a detached placement
//! writes the header file only (cryptsetup's sizes, data offset 0), the engine of
//! `Header::unlock_at` writes the data file from its first byte, and the header file used
//! on its own opens its keyslots but never its data.

use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::KdfOptions;
use sectorcrypt_volume::luks::{self, FormatOptions, Version};
use sectorcrypt_volume::{backup_header, FileStore, Header, Placement};
use std::fs::OpenOptions;
use std::path::Path;

fn store(path: &Path, len: Option<u64>) -> FileStore {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    if let Some(n) = len {
        f.set_len(n).unwrap();
    }
    FileStore::new(f, path.display().to_string())
}

#[test]
fn detached_headers_hold_no_data_and_refuse_to_be_used_alone() {
    let data_len = 4u64 << 20;
    // LUKS2: 16 MiB of metadata and keyslots; LUKS1: up to the end of keyslot 7.
    for (version, header_len) in [(Version::Luks2, 16u64 << 20), (Version::Luks1, 4040 * 512)] {
        let dir = tempfile::tempdir().unwrap();
        let (hp, dp) = (dir.path().join("hdr"), dir.path().join("data"));
        let (hdr, data) = (store(&hp, None), store(&dp, Some(data_len)));
        let mut opts = FormatOptions {
            version,
            kdf: KdfOptions::pbkdf2(HashAlg::Sha256),
            ..FormatOptions::default()
        };
        opts.kdf.force_iterations = Some(1000);
        let at = Placement::Detached {
            header: &hdr,
            data: &data,
        };
        let (_, u) = luks::format_at(at, &opts, b"pass", None).unwrap();
        assert_eq!((u.data_offset, u.data_size), (0, data_len), "{version:?}");
        assert_eq!(std::fs::metadata(&hp).unwrap().len(), header_len);
        assert!(std::fs::read(&dp).unwrap().iter().all(|&b| b == 0));

        let h = Header::read(&hdr).unwrap();
        let u = h.unlock_at(at, b"pass", None).unwrap();
        assert_eq!(u.data_inside_header(), None);
        let opts = EngineOptions::default();
        let vol = u.engine(Box::new(store(&dp, None)), opts).unwrap();
        vol.write_at(&[0xa5; 4096], 0).unwrap();
        vol.flush().unwrap();
        assert!(std::fs::read(&dp).unwrap()[..4096] != [0u8; 4096][..]);
        assert!(Header::read(&hdr).is_ok());

        // The header file alone: its keyslots open, its data (at offset 0, inside the
        // header) does not.
        let alone = h.unlock_slot(&hdr, b"pass", None).unwrap();
        assert_eq!(alone.data_inside_header().map(|(o, _)| o), Some(0));
        let e = alone
            .engine(Box::new(store(&hp, None)), EngineOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("detached"), "{e}");

        // A backup restored onto the header file: no room for data is needed after it.
        let bak = dir.path().join("bak");
        backup_header(&hdr, &bak).unwrap();
        let backup = store(&bak, None);
        sectorcrypt_volume::format::restore_header_at(at, &backup).unwrap();
        if version == Version::Luks2 {
            // As an attached header, the same file would leave no room for data.
            assert!(sectorcrypt_volume::restore_header(&hdr, &backup).is_err());
        }
    }
}

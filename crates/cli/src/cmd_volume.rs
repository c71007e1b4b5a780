//! The volume commands: format, dump, add-key, remove-key, change-key, test-key, header
//! backup/restore, repair, erase. Each opens the image through the one opener
//! (`image.rs`), which reads and validates the header (never writing while reading) of
//! whatever format it is, asks for passphrases and confirmations, then makes one change.
//! A header that fails validation is refused by all of them (exit 2, naming the rule it
//! breaks); `dump` then still prints what it can read, and `repair` rebuilds what can be
//! rebuilt without guessing. Wrong passphrases exit 3; nothing is written then. Only
//! `format` names a format (`--type`).

use crate::args::{
    AddKeyArgs, DumpArgs, EraseArgs, FormatArgs, HeaderCommand, LuksType, PbkdfArgs, RemoveKeyArgs,
    RepairArgs, TestKeyArgs,
};
use crate::failure::Failure;
use crate::image::{self, Image};
use crate::passphrase::{self, Secret};
use sectorcrypt_volume::format::dump;
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::luks::{self, FormatOptions, Version};
use sectorcrypt_volume::{formats, Header, Store};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;

/// Size suffixes (lowercase) and the power of two they stand for.
const UNITS: [(&[&str], u32); 5] = [
    (&["", "b"], 0),
    (&["k", "kib", "kb"], 10),
    (&["m", "mib", "mb"], 20),
    (&["g", "gib", "gb"], 30),
    (&["t", "tib", "tb"], 40),
];

/// Parses `256M`, `1G`, `1GiB`, `4096` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, Failure> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| Failure::usage(format!("invalid size {s:?}")))?;
    let unit = unit.to_ascii_lowercase();
    let Some((_, shift)) = UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit.as_str()))
    else {
        let names: Vec<String> = UNITS[1..]
            .iter()
            .map(|(n, _)| n[0].to_uppercase())
            .collect();
        return Err(Failure::usage(format!(
            "invalid size unit in {s:?} ({})",
            names.join(", ")
        )));
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| Failure::usage(format!("size {s:?} is too large")))
}

/// The KDF options of a new keyslot of `format`, whose keyslots take `kinds` (the
/// default first).
fn kdf_options(p: &PbkdfArgs, format: &str, kinds: &[KdfKind]) -> Result<KdfOptions, Failure> {
    let kind = match &p.pbkdf {
        Some(k) => KdfKind::parse(k)?,
        None => kinds[0],
    };
    if let Some(why) = kind.refusal(format, kinds) {
        return Err(Failure::usage(why));
    }
    let hash = match &p.hash {
        Some(h) => HashAlg::parse(h)?,
        None => HashAlg::Sha256,
    };
    if p.iter_time == 0 {
        return Err(Failure::usage("--iter-time must be at least 1"));
    }
    Ok(KdfOptions {
        kind,
        hash,
        iter_time_ms: p.iter_time,
        memory_kib: p.pbkdf_memory,
        parallel: p.pbkdf_parallel,
        force_iterations: p.pbkdf_force_iterations,
    })
}

/// How keyslot `slot` derives its key, for messages.
fn describe_kdf(h: &Header, slot: usize) -> String {
    h.keyslot_kdf(slot)
        .map_or_else(|_| "?".to_string(), |k| k.to_string())
}

pub fn format(a: FormatArgs) -> Result<(), Failure> {
    let version = match a.luks_type {
        LuksType::Luks1 => Version::Luks1,
        LuksType::Luks2 => Version::Luks2,
    };
    let vnum = if version == Version::Luks1 { 1 } else { 2 };
    let kdf = kdf_options(&a.pbkdf, version.name(), version.kdf_kinds())?;
    let spec: sectorcrypt_crypto::dmcrypt::CipherSpec = a.cipher.parse().map_err(|_| {
        Failure::usage(format!(
            "unsupported cipher {:?} ({})",
            a.cipher,
            luks::ciphers().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let key_bits = a.key_size.unwrap_or(match spec.mode {
        sectorcrypt_crypto::dmcrypt::CipherMode::Xts => 512,
        _ => 256,
    });
    if !key_bits.is_multiple_of(8) {
        return Err(Failure::usage("--key-size is in bits, a multiple of 8"));
    }
    let size = a.size.as_deref().map(parse_size).transpose()?;
    let (store, created) = if a.image.exists() {
        let store = image::open_store(&a.image, true)?;
        let meta = store
            .file()
            .metadata()
            .map_err(|e| Failure::runtime(e.to_string()))?;
        if let Some(s) = size {
            if meta.is_file() && meta.len() != s {
                return Err(Failure::usage(format!(
                    "{} exists ({} bytes); --size is only for creating a new image",
                    a.image.display(),
                    meta.len()
                )));
            }
        }
        passphrase::confirm(
            &format!(
                "This will overwrite data on {} irrevocably.",
                a.image.display()
            ),
            a.key.batch,
        )?;
        (store, false)
    } else {
        let Some(s) = size else {
            return Err(Failure::usage(format!(
                "{} does not exist: give --size to create it",
                a.image.display()
            )));
        };
        let created = |e: std::io::Error| Failure::runtime(format!("{}: {e}", a.image.display()));
        // Readable by its owner only, as the key material in its header should be (an
        // existing image or device keeps its mode: format changes contents, not access).
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&a.image)
            .map_err(created)?;
        let store = sectorcrypt_volume::FileStore::new(file, a.image.display().to_string());
        store.file().set_len(s).map_err(created)?;
        (store, true)
    };
    let result = (|| {
        let image_size = store.size().map_err(|e| Failure::runtime(e.to_string()))?;
        let sector_size = match (a.sector_size, version) {
            (Some(n), _) => n,
            (None, Version::Luks1) => 512,
            (None, Version::Luks2) => {
                let data = image_size.saturating_sub(luks::LUKS2_DEFAULT_DATA_OFFSET);
                if data > 0 && data.is_multiple_of(4096) {
                    4096
                } else {
                    512
                }
            }
        };
        let opts = FormatOptions {
            version,
            cipher: a.cipher.clone(),
            key_bytes: key_bits / 8,
            sector_size,
            kdf,
            label: a.label.clone().unwrap_or_default(),
            data_offset: None,
            uuid: None,
        };
        let pass = passphrase::new(a.key.key_file.as_deref())?;
        let (h, u) = luks::format(&store, &opts, &pass, None)?;
        println!(
            "{}: LUKS{vnum} volume {}, {} with a {}-bit key, {}-byte sectors, {} bytes of data at offset {}",
            a.image.display(),
            h.uuid().unwrap_or("-"),
            u.cipher,
            key_bits,
            u.sector_size,
            u.data_size,
            u.data_offset
        );
        println!("keyslot {}: {}", u.keyslot, describe_kdf(&h, u.keyslot));
        Ok(())
    })();
    if result.is_err() && created {
        drop(store);
        let _ = std::fs::remove_file(&a.image);
    }
    result
}

fn print_json(v: &serde_json::Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v).map_err(|e| Failure::runtime(e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// Shows the header, as `cryptsetup luksDump`. A header that fails validation exits 2, as
/// there, after what can still be read of it (with each problem) is printed.
pub fn dump(a: DumpArgs) -> Result<(), Failure> {
    let h = match image::open(&a.image, false) {
        Ok(img) => img.header,
        Err(f) => {
            if f.exit_code() == 2 {
                print_salvaged(&a)?;
            }
            return Err(f);
        }
    };
    if a.json {
        print_json(&h.to_json())
    } else {
        print!("{}", h.dump());
        Ok(())
    }
}

/// Prints what is left of the refused header of `a.image`, if anything.
fn print_salvaged(a: &DumpArgs) -> Result<(), Failure> {
    let Ok(store) = image::open_store(&a.image, false) else {
        return Ok(());
    };
    let Ok(Some(s)) = formats::salvage(&store) else {
        return Ok(());
    };
    match (a.json, &s.json) {
        (true, Some(json)) => print_json(json),
        (true, None) => Ok(()),
        (false, _) => {
            print!("{}", dump::render(&s.report));
            Ok(())
        }
    }
}

/// Rebuilds a damaged or stale header copy from the good one.
pub fn repair(a: RepairArgs) -> Result<(), Failure> {
    let store = image::open_store(&a.image, true)?;
    let done = formats::repair_header(&store)?;
    if done.is_empty() {
        println!("{}: no known problems in the header", a.image.display());
    }
    for d in done {
        println!("{}: {d}", a.image.display());
    }
    Ok(())
}

/// What add-key and change-key start with: the image opened for writing, the new
/// keyslot's KDF options and the existing passphrase.
fn open_for_new_key(a: &AddKeyArgs) -> Result<(Image, KdfOptions, Secret), Failure> {
    passphrase::check_one_stdin(a.key.key_file.as_deref(), a.new_key_file.as_deref())?;
    let img = image::open(&a.image, true)?;
    let kdf = kdf_options(&a.pbkdf, img.header.name(), img.header.kdf_kinds())?;
    let old = img.passphrase(&a.key)?;
    Ok((img, kdf, old))
}

pub fn add_key(a: AddKeyArgs) -> Result<(), Failure> {
    let (mut img, kdf, old) = open_for_new_key(&a)?;
    let u = img.header.unlock(&img.store, &old)?;
    let new = passphrase::new(a.new_key_file.as_deref())?;
    let slot = img
        .header
        .add_key(&img.store, &u, &new, &kdf, a.key.key_slot)?;
    println!("keyslot {slot} added ({})", describe_kdf(&img.header, slot));
    Ok(())
}

pub fn change_key(a: AddKeyArgs) -> Result<(), Failure> {
    let (mut img, kdf, old) = open_for_new_key(&a)?;
    // Check the old passphrase before asking for the new one.
    let u = img.header.unlock_slot(&img.store, &old, a.key.key_slot)?;
    let new = passphrase::new(a.new_key_file.as_deref())?;
    let slot = img
        .header
        .change_key(&img.store, &old, &new, &kdf, Some(u.keyslot))?;
    println!(
        "keyslot {} passphrase changed; now in keyslot {slot} ({})",
        u.keyslot,
        describe_kdf(&img.header, slot)
    );
    Ok(())
}

pub fn remove_key(a: RemoveKeyArgs) -> Result<(), Failure> {
    let mut img = image::open(&a.image, true)?;
    let u = img.unlock(&a.key)?;
    if img.header.keyslots_left_without(u.keyslot)?.is_empty() {
        passphrase::confirm(
            &format!(
                "Keyslot {} is the last one: after removing it nobody can open {}.",
                u.keyslot,
                a.image.display()
            ),
            a.key.batch,
        )?;
    }
    img.header.remove_key(&img.store, u.keyslot)?;
    println!("keyslot {} removed", u.keyslot);
    Ok(())
}

pub fn test_key(a: TestKeyArgs) -> Result<(), Failure> {
    let u = image::open(&a.image, false)?.unlock(&a.key)?;
    println!("keyslot {} opens {}", u.keyslot, a.image.display());
    Ok(())
}

pub fn header(c: HeaderCommand) -> Result<(), Failure> {
    match c {
        HeaderCommand::Backup { image, file } => {
            let img = image::open_store(&image, false)?;
            if file.exists() {
                return Err(Failure::usage(format!(
                    "{} exists; the backup goes to a new file",
                    file.display()
                )));
            }
            sectorcrypt_volume::backup_header(&img, &file)?;
            println!(
                "headers and keyslots of {} saved to {}",
                image.display(),
                file.display()
            );
            Ok(())
        }
        HeaderCommand::Restore { image, file, batch } => {
            // Check the backup before asking anything.
            let backup = image::open(&file, false)?;
            let img = image::open_store(&image, true)?;
            let current = Header::read(&img).ok();
            let warning = match (current.as_ref().and_then(Header::uuid), backup.header.uuid()) {
                (Some(now), Some(then)) if now != then => format!(
                    "{} holds another volume ({now}); the backup is of {then}. Its keyslots will be replaced.",
                    image.display(),
                ),
                _ => format!(
                    "The header and keyslots of {} will be replaced with those in {}.",
                    image.display(),
                    file.display()
                ),
            };
            passphrase::confirm(&warning, batch)?;
            let h = sectorcrypt_volume::restore_header(&img, &backup.store)?;
            println!(
                "header of {} restored (volume {})",
                image.display(),
                h.uuid().unwrap_or("-")
            );
            Ok(())
        }
    }
}

pub fn erase(a: EraseArgs) -> Result<(), Failure> {
    let mut img = image::open(&a.image, true)?;
    passphrase::confirm(
        &format!(
            "This will destroy every keyslot of {}: the data cannot be opened again without a header backup.",
            a.image.display()
        ),
        a.batch,
    )?;
    img.header.erase(&img.store)?;
    println!("all keyslots of {} destroyed", a.image.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert!(parse_size("1X").is_err());
        assert!(parse_size("M").is_err());
    }
}

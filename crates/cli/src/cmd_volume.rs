//! The volume commands over `sectorcrypt_volume::luks`: format, dump, add-key, remove-key,
//! change-key, test-key, header backup/restore, erase. Each opens the image, reads the
//! header (never writing while reading), asks for passphrases and confirmations, then
//! makes one change. Wrong passphrases exit 3; nothing is written then.

use crate::args::{
    AddKeyArgs, DumpArgs, EraseArgs, FormatArgs, HeaderCommand, LuksType, PbkdfArgs, RemoveKeyArgs,
    TestKeyArgs,
};
use crate::failure::Failure;
use crate::passphrase;
use sectorcrypt_volume::luks::{
    self, FormatOptions, HashAlg, Header, KdfKind, KdfOptions, Version,
};
use std::fs::{File, OpenOptions};
use std::path::Path;

fn open(image: &Path, write: bool) -> Result<File, Failure> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .open(image)
        .map_err(|e| {
            let msg = format!("{}: {e}", image.display());
            if e.kind() == std::io::ErrorKind::NotFound {
                Failure::usage(msg)
            } else {
                Failure::runtime(msg)
            }
        })
}

/// Parses `256M`, `1G`, `1GiB`, `4096` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, Failure> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| Failure::usage(format!("invalid size {s:?}")))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" | "kb" => 10,
        "m" | "mib" | "mb" => 20,
        "g" | "gib" | "gb" => 30,
        "t" | "tib" | "tb" => 40,
        _ => {
            return Err(Failure::usage(format!(
                "invalid size unit in {s:?} (K, M, G, T)"
            )))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| Failure::usage(format!("size {s:?} is too large")))
}

fn kdf_options(p: &PbkdfArgs, version: u8) -> Result<KdfOptions, Failure> {
    let kind = match &p.pbkdf {
        Some(k) => KdfKind::parse(k)?,
        None if version == 1 => KdfKind::Pbkdf2,
        None => KdfKind::Argon2id,
    };
    if version == 1 && kind != KdfKind::Pbkdf2 {
        return Err(Failure::usage(
            "luks1 keyslots use pbkdf2 only (--pbkdf pbkdf2)",
        ));
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

fn describe_kdf(h: &Header, slot: usize) -> String {
    let json = h.to_json();
    match h {
        Header::Luks1(l) => format!(
            "pbkdf2-{} {} iterations",
            l.hash_spec, l.slots[slot].iterations
        ),
        Header::Luks2(_) => {
            let k = &json["keyslots"][slot.to_string()]["kdf"];
            match k["type"].as_str() {
                Some("pbkdf2") => format!(
                    "pbkdf2-{} {} iterations",
                    k["hash"].as_str().unwrap_or("?"),
                    k["iterations"]
                ),
                Some(t) => format!(
                    "{t} time {} memory {} KiB parallel {}",
                    k["time"], k["memory"], k["cpus"]
                ),
                None => "?".into(),
            }
        }
    }
}

pub fn format(a: FormatArgs) -> Result<(), Failure> {
    let version = match a.luks_type {
        LuksType::Luks1 => Version::Luks1,
        LuksType::Luks2 => Version::Luks2,
    };
    let vnum = if version == Version::Luks1 { 1 } else { 2 };
    let kdf = kdf_options(&a.pbkdf, vnum)?;
    let spec: sectorcrypt_crypto::dmcrypt::CipherSpec = a.cipher.parse().map_err(|_| {
        Failure::usage(format!(
            "unsupported cipher {:?} (aes-xts-plain64, aes-xts-plain, aes-cbc-plain64, aes-cbc-plain, aes-cbc-essiv:sha256)",
            a.cipher
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
    let exists = a.image.exists();
    let file;
    let mut created = false;
    if exists {
        file = open(&a.image, true)?;
        let meta = file
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
    } else {
        let Some(s) = size else {
            return Err(Failure::usage(format!(
                "{} does not exist: give --size to create it",
                a.image.display()
            )));
        };
        file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&a.image)
            .map_err(|e| Failure::runtime(format!("{}: {e}", a.image.display())))?;
        created = true;
        file.set_len(s)
            .map_err(|e| Failure::runtime(format!("{}: {e}", a.image.display())))?;
    }
    let result = (|| {
        let image_size = {
            let mut f: &File = &file;
            std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0))
                .map_err(|e| Failure::runtime(e.to_string()))?
        };
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
        let (h, u) = luks::format(&file, &opts, &pass, None)?;
        println!(
            "{}: LUKS{vnum} volume {}, {} with a {}-bit key, {}-byte sectors, {} bytes of data at offset {}",
            a.image.display(),
            h.uuid(),
            u.cipher,
            key_bits,
            u.layout.sector_size(),
            u.data_size,
            u.data_offset
        );
        println!("keyslot {}: {}", u.keyslot, describe_kdf(&h, u.keyslot));
        Ok(())
    })();
    if result.is_err() && created {
        drop(file);
        let _ = std::fs::remove_file(&a.image);
    }
    result
}

pub fn dump(a: DumpArgs) -> Result<(), Failure> {
    let file = open(&a.image, false)?;
    let h = Header::read(&file)?;
    if a.json {
        let text = serde_json::to_string_pretty(&h.to_json())
            .map_err(|e| Failure::runtime(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", h.dump());
    }
    Ok(())
}

fn version_of(h: &Header) -> u8 {
    h.version()
}

pub fn add_key(a: AddKeyArgs) -> Result<(), Failure> {
    passphrase::check_one_stdin(a.key.key_file.as_deref(), a.new_key_file.as_deref())?;
    let file = open(&a.image, true)?;
    let mut h = Header::read(&file)?;
    let kdf = kdf_options(&a.pbkdf, version_of(&h))?;
    let old = passphrase::existing(&a.key, &a.image)?;
    let u = h.unlock(&file, &old)?;
    let new = passphrase::new(a.new_key_file.as_deref())?;
    let slot = h.add_key(&file, &u, &new, &kdf, a.key.key_slot)?;
    println!("keyslot {slot} added ({})", describe_kdf(&h, slot));
    Ok(())
}

pub fn change_key(a: AddKeyArgs) -> Result<(), Failure> {
    passphrase::check_one_stdin(a.key.key_file.as_deref(), a.new_key_file.as_deref())?;
    let file = open(&a.image, true)?;
    let mut h = Header::read(&file)?;
    let kdf = kdf_options(&a.pbkdf, version_of(&h))?;
    let old = passphrase::existing(&a.key, &a.image)?;
    // Check the old passphrase before asking for the new one.
    let u = h.unlock_slot(&file, &old, a.key.key_slot)?;
    let new = passphrase::new(a.new_key_file.as_deref())?;
    let slot = h.change_key(&file, &old, &new, &kdf, Some(u.keyslot))?;
    println!(
        "keyslot {} passphrase changed; now in keyslot {slot} ({})",
        u.keyslot,
        describe_kdf(&h, slot)
    );
    Ok(())
}

pub fn remove_key(a: RemoveKeyArgs) -> Result<(), Failure> {
    let file = open(&a.image, true)?;
    let mut h = Header::read(&file)?;
    let pass = passphrase::existing(&a.key, &a.image)?;
    let u = h.unlock_slot(&file, &pass, a.key.key_slot)?;
    if h.active_keyslots()?.len() == 1 {
        passphrase::confirm(
            &format!(
                "Keyslot {} is the last one: after removing it nobody can open {}.",
                u.keyslot,
                a.image.display()
            ),
            a.key.batch,
        )?;
    }
    h.remove_key(&file, u.keyslot)?;
    println!("keyslot {} removed", u.keyslot);
    Ok(())
}

pub fn test_key(a: TestKeyArgs) -> Result<(), Failure> {
    let file = open(&a.image, false)?;
    let h = Header::read(&file)?;
    let pass = passphrase::existing(&a.key, &a.image)?;
    let u = h.unlock_slot(&file, &pass, a.key.key_slot)?;
    println!("keyslot {} opens {}", u.keyslot, a.image.display());
    Ok(())
}

pub fn header(c: HeaderCommand) -> Result<(), Failure> {
    match c {
        HeaderCommand::Backup { image, file } => {
            let img = open(&image, false)?;
            if file.exists() {
                return Err(Failure::usage(format!(
                    "{} exists; the backup goes to a new file",
                    file.display()
                )));
            }
            luks::backup_header(&img, &file)?;
            println!(
                "headers and keyslots of {} saved to {}",
                image.display(),
                file.display()
            );
            Ok(())
        }
        HeaderCommand::Restore { image, file, batch } => {
            let backup = open(&file, false)?;
            // Check the backup before asking anything.
            let hb = Header::read(&backup)?;
            let img = open(&image, true)?;
            let current = Header::read(&img).ok();
            let warning = match &current {
                Some(h) if h.uuid() != hb.uuid() => format!(
                    "{} holds another volume ({}); the backup is of {}. Its keyslots will be replaced.",
                    image.display(),
                    h.uuid(),
                    hb.uuid()
                ),
                _ => format!(
                    "The header and keyslots of {} will be replaced with those in {}.",
                    image.display(),
                    file.display()
                ),
            };
            passphrase::confirm(&warning, batch)?;
            let h = luks::restore_header(&img, &backup)?;
            println!(
                "header of {} restored (volume {})",
                image.display(),
                h.uuid()
            );
            Ok(())
        }
    }
}

pub fn erase(a: EraseArgs) -> Result<(), Failure> {
    let file = open(&a.image, true)?;
    let mut h = Header::read(&file)?;
    passphrase::confirm(
        &format!(
            "This will destroy every keyslot of {}: the data cannot be opened again without a header backup.",
            a.image.display()
        ),
        a.batch,
    )?;
    h.erase(&file)?;
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

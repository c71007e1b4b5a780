//! The volume commands: format, dump, add-key, remove-key, change-key, test-key, header
//! backup/restore, repair, erase. Each opens the image through the one opener
//! (`image.rs`), which reads and validates the header (never writing while reading) of
//! whatever format it is, asks for passphrases and confirmations, then makes one change.
//! A header that fails validation is refused by all of them (exit 2, naming the rule it
//! breaks); `dump` then still prints what it can read, and `repair` rebuilds what can be
//! rebuilt without guessing. Wrong passphrases exit 3; nothing is written then. Only
//! `format` names a format (`--type`).

use crate::args::{
    AddKeyArgs, DumpArgs, DumpJson, EraseArgs, FormatArgs, HeaderCommand, LuksType, PbkdfArgs,
    RemoveKeyArgs, RepairArgs, TestKeyArgs,
};
use crate::failure::Failure;
use crate::image::{self, Access, Image, Keys as _};
use crate::json_report;
use crate::passphrase::{self, Secret};
use crate::progress::Progress;
use sectorcrypt_cli::parse_size;
use sectorcrypt_image::create::{luks_key_bits, Target};
use sectorcrypt_image::store::Counted;
use sectorcrypt_volume::format::dump;
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::lock::Mode;
use sectorcrypt_volume::luks::{self, FormatOptions, Version};
use sectorcrypt_volume::{formats, Error as VolumeError, Header, KeyslotError, Store};

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

/// `--rbd-object-size`: a power of two from 4 KiB to 32 MiB, rbd's object sizes.
fn rbd_object_size(a: &FormatArgs) -> Result<Option<u64>, Failure> {
    let Some(text) = &a.rbd_object_size else {
        return Ok(None);
    };
    if a.luks_type == LuksType::Geli {
        return Err(Failure::usage(
            "--rbd-object-size lays out luks1 and luks2 volumes only",
        ));
    }
    let n = parse_size(text)?;
    if !n.is_power_of_two() || !(4096..=32 << 20).contains(&n) {
        return Err(Failure::usage(format!(
            "--rbd-object-size {text}: an rbd object size is a power of two from 4K to 32M"
        )));
    }
    Ok(Some(n))
}

pub fn format(a: FormatArgs) -> Result<(), Failure> {
    let data_alignment = rbd_object_size(&a)?;
    let version = match a.luks_type {
        LuksType::Luks1 => Version::Luks1,
        LuksType::Luks2 => Version::Luks2,
        LuksType::Geli => return crate::cmd_geli::format(a),
    };
    if a.integrity.is_some() || a.no_wipe {
        return Err(Failure::usage(
            "--integrity and --no-wipe are for GELI (--type geli) only",
        ));
    }
    let vnum = if version == Version::Luks1 { 1 } else { 2 };
    let kdf = kdf_options(&a.pbkdf, version.name(), version.kdf_kinds())?;
    // The cipher is checked before anything is opened or created.
    a.cipher
        .parse::<sectorcrypt_crypto::dmcrypt::CipherSpec>()
        .map_err(|_| {
            Failure::usage(format!(
                "unsupported cipher {:?} ({})",
                a.cipher,
                luks::ciphers().collect::<Vec<_>>().join(", ")
            ))
        })?;
    let key_bits = luks_key_bits(&a.cipher, a.key_size)?;
    let size = a.size.as_deref().map(parse_size).transpose()?;
    let cx = image::context();
    // Never a volume in use: its server would go on under the old key.
    let target = Target::open(&a.image, a.header.file.as_deref(), size, &cx)?;
    let result = (|| {
        if target.existed() {
            passphrase::confirm(
                &format!(
                    "This will overwrite data on {} irrevocably{}.",
                    crate::locator::redacted(target.header_path()),
                    crate::cmd_geli::holding(&target.signatures()?)
                ),
                a.key.batch,
            )?;
        }
        let at = target.placement();
        let _lock = target.lock(&cx)?;
        let sector_size = match a.sector_size {
            Some(n) => n,
            None => luks::default_sector_size(version, at)?,
        };
        let opts = FormatOptions {
            version,
            cipher: a.cipher.clone(),
            key_bytes: key_bits / 8,
            sector_size,
            kdf,
            label: a.label.clone().unwrap_or_default(),
            data_offset: None,
            data_alignment,
            uuid: None,
        };
        let pass = passphrase::new(a.key.key_file.as_deref())?;
        let (h, u) = luks::format_at(at, &opts, &pass, None)?;
        let place = if target.detached() {
            format!(
                " (header in {})",
                crate::locator::redacted(target.header_path())
            )
        } else {
            String::new()
        };
        println!(
            "{}: LUKS{vnum} volume {}, {} with a {}-bit key, {}-byte sectors, {} bytes of data at offset {}{place}",
            crate::locator::redacted(&a.image),
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
    if result.is_err() {
        target.discard();
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
    let img = match image::open(&a.image, &a.header, Access::Inspect) {
        Ok(img) => img,
        Err(f) => {
            if f.exit_code() == 2 {
                print_salvaged(&a)?;
            }
            return Err(f);
        }
    };
    match a.json {
        Some(DumpJson::Metadata) => print_json(&img.header.to_json()),
        Some(DumpJson::Common) => print_json(&json_report::common(
            &img.header,
            img.files.placement().data(),
        )),
        None => {
            print!("{}", img.header.dump());
            Ok(())
        }
    }
}

/// Prints what is left of the refused header of `a.image`, if anything.
fn print_salvaged(a: &DumpArgs) -> Result<(), Failure> {
    let Ok(store) = image::open_store(a.header.file.as_ref().unwrap_or(&a.image), false) else {
        return Ok(());
    };
    let Ok(Some(s)) = formats::salvage(&store) else {
        return Ok(());
    };
    match (a.json, &s.json) {
        (Some(DumpJson::Metadata), Some(json)) => print_json(json),
        (Some(DumpJson::Metadata), None) => Ok(()),
        (Some(DumpJson::Common), json) => print_json(&json_report::refused(json.as_ref())),
        (None, _) => {
            print!("{}", dump::render(&s.report));
            Ok(())
        }
    }
}

/// Rebuilds a damaged or stale header copy from the good one.
pub fn repair(a: RepairArgs) -> Result<(), Failure> {
    let path = a.header.file.as_ref().unwrap_or(&a.image);
    let store = image::open_store(path, true)?;
    // Never beside another header update.
    let _lock = image::lock_header(&store, path, Mode::Exclusive)?;
    let done = formats::repair_header(&store)?;
    if done.is_empty() {
        println!(
            "{}: no known problems in the header",
            crate::locator::redacted(&a.image)
        );
    }
    for d in done {
        println!("{}: {d}", crate::locator::redacted(&a.image));
    }
    Ok(())
}

/// What add-key and change-key start with: the volume opened for keyslot changes, the new
/// keyslot's KDF options and the existing passphrase.
fn open_for_new_key(a: &AddKeyArgs) -> Result<(Image, KdfOptions, Secret), Failure> {
    passphrase::check_one_stdin(a.key.key_file.as_deref(), a.new_key_file.as_deref())?;
    let mut img = image::open(&a.image, &a.header, Access::Keyslots)?;
    img.use_key_parts(&a.key)?;
    let kdf = kdf_options(&a.pbkdf, img.header.name(), img.header.kdf_kinds())?;
    let old = img.passphrase(&a.key)?;
    Ok((img, kdf, old))
}

pub fn add_key(a: AddKeyArgs) -> Result<(), Failure> {
    let (mut img, kdf, old) = open_for_new_key(&a)?;
    let u = img.unlock_with(&old, None)?;
    let new = passphrase::new(a.new_key_file.as_deref())?;
    // The volume key is checked against the header as it is now, under the lock.
    let slot = img.change(|h, store| Ok(h.add_key(store, &u, &new, &kdf, a.key.key_slot)?))?;
    println!("keyslot {slot} added ({})", describe_kdf(&img.header, slot));
    Ok(())
}

pub fn change_key(a: AddKeyArgs) -> Result<(), Failure> {
    let (mut img, kdf, old) = open_for_new_key(&a)?;
    // Check the old passphrase before asking for the new one.
    let u = img.unlock_with(&old, a.key.key_slot)?;
    let new = passphrase::new(a.new_key_file.as_deref())?;
    // Opened again under the lock: if another process changed the keyslot meanwhile, the
    // old passphrase is looked for in the other keyslots (unless --key-slot), and when it
    // opens none any more, that is a wrong passphrase (3) and nothing is written.
    let slot =
        img.change(
            |h, store| match h.change_key(store, &old, &new, &kdf, Some(u.keyslot)) {
                Err(
                    VolumeError::WrongPassphrase | VolumeError::Keyslot(KeyslotError::NotActive(_)),
                ) if a.key.key_slot.is_none() => Ok(h.change_key(store, &old, &new, &kdf, None)?),
                r => Ok(r?),
            },
        )?;
    println!(
        "keyslot {} passphrase changed; now in keyslot {slot} ({})",
        u.keyslot,
        describe_kdf(&img.header, slot)
    );
    Ok(())
}

pub fn remove_key(a: RemoveKeyArgs) -> Result<(), Failure> {
    let mut img = image::open(&a.image, &a.header, Access::Keyslots)?;
    img.use_key_parts(&a.key)?;
    let pass = img.passphrase(&a.key)?;
    // Which keyslot, and whether it is the last one, as the header is under the lock.
    let slot = img.change(|h, store| {
        let slot = h.opened_keyslot(store, &pass, a.key.key_slot)?;
        if h.keyslots_left_without(slot)?.is_empty() {
            passphrase::confirm(
                &format!(
                    "Keyslot {slot} is the last one: after removing it nobody can open {}.",
                    crate::locator::redacted(&a.image)
                ),
                a.key.batch,
            )?;
        }
        h.remove_key(store, slot)?;
        Ok(slot)
    })?;
    println!("keyslot {slot} removed");
    Ok(())
}

pub fn test_key(a: TestKeyArgs) -> Result<(), Failure> {
    let opened =
        image::open(&a.image, &a.header, Access::Inspect).and_then(|mut i| i.unlock(&a.key));
    if a.json {
        print_json(&json_report::test_key(
            &a.image,
            opened.as_ref().map(|u| u.keyslot),
        ))?;
    }
    let u = opened?;
    if !a.json {
        println!(
            "keyslot {} opens {}",
            u.keyslot,
            crate::locator::redacted(&a.image)
        );
    }
    Ok(())
}

pub fn header(c: HeaderCommand) -> Result<(), Failure> {
    match c {
        HeaderCommand::Backup {
            image,
            file,
            header,
        } => {
            let files = image::files(&image, &header, Access::Inspect)?;
            if file.exists() {
                return Err(Failure::usage(format!(
                    "{} exists; the backup goes to a new file",
                    file.display()
                )));
            }
            let _lock = files.lock(Mode::Shared)?;
            sectorcrypt_volume::backup_header(&files.store, &file)?;
            println!(
                "headers and keyslots of {} saved to {}",
                crate::locator::redacted(&files.header_path),
                file.display()
            );
            Ok(())
        }
        HeaderCommand::Restore {
            image,
            file,
            batch,
            header,
        } => {
            // Check the backup before asking anything.
            let backup = image::open_store(&file, false)?;
            let saved = Header::read(&backup)?;
            let files = image::files(&image, &header, Access::Replace)?;
            let target = crate::locator::redacted(&files.header_path);
            let current = files.read_header().ok();
            let warning = match (current.as_ref().and_then(Header::uuid), saved.uuid()) {
                (Some(now), Some(then)) if now != then => format!(
                    "{target} holds another volume ({now}); the backup is of {then}. Its keyslots will be replaced.",
                ),
                _ => format!(
                    "The header and keyslots of {target} will be replaced with those in {}.",
                    file.display()
                ),
            };
            passphrase::confirm(&warning, batch)?;
            let _lock = files.lock(Mode::Exclusive)?;
            let h = sectorcrypt_volume::format::restore_header_at(files.placement(), &backup)?;
            println!(
                "header of {target} restored (volume {})",
                h.uuid().unwrap_or("-")
            );
            Ok(())
        }
    }
}

pub fn erase(a: EraseArgs) -> Result<(), Failure> {
    let mut img = image::open(&a.image, &a.header, Access::Replace)?;
    passphrase::confirm(
        &format!(
            "This will destroy every keyslot of {}: the data cannot be opened again without a header backup.",
            crate::locator::redacted(&img.files.header_path)
        ),
        a.batch,
    )?;
    img.change(|h, store| {
        // What erase overwrites lies in the header and keyslot area (a backup's extent).
        let size = store.size().map_err(|e| Failure::runtime(e.to_string()))?;
        let progress = Progress::bytes("erase", Some(h.backup_len(size)));
        h.erase(&Counted::new(store, &|n| progress.add(n)))?;
        progress.finish();
        Ok(())
    })?;
    println!(
        "all keyslots of {} destroyed",
        crate::locator::redacted(&img.files.header_path)
    );
    Ok(())
}

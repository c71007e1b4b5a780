//! The volume commands: format, dump, add-key, remove-key, change-key, test-key, header
//! backup/restore, repair, erase. Each opens the image through the one opener
//! (`volumes/image.rs`), which reads and validates the header (never writing while reading) of
//! whatever format it is, asks for passphrases and confirmations, then makes one change.
//! A header that fails validation is refused by all of them (exit 2, naming the rule it
//! breaks); `dump` then still prints what it can read, and `repair` rebuilds what can be
//! rebuilt without guessing. Wrong passphrases exit 3; nothing is written then. Only
//! `format` names a format (`--type`).

use crate::failure::Failure;
use crate::flags::{
    AddKeyArgs, DumpArgs, DumpJson, EraseArgs, FormatArgs, HeaderCommand, KeyArgs, LuksType,
    PbkdfArgs, RemoveKeyArgs, RepairArgs, TestKeyArgs, VeracryptFormatArgs,
};
use crate::passphrase::{self, Secret};
use crate::present::json_report;
use crate::present::progress::Progress;
use crate::volumes::image::{self, Access, Image, Keys as _};
use sectorcrypt_cli::parse_size;
use sectorcrypt_image::create::{
    self, CreateOptions, GeliOptions, HiddenOptions, Kind, Made, Opt, Overwrite, Pbkdf,
    VeracryptOptions,
};
use sectorcrypt_image::store::Counted;
use sectorcrypt_volume::format::dump;
use sectorcrypt_volume::geli::metadata::algo;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::lock::Mode;
use sectorcrypt_volume::luks::luks2::{reencrypt, Luks2};
use sectorcrypt_volume::{formats, Error as VolumeError, Header, KeyslotError, Store};

/// The KDF options of a new keyslot of `format`, whose keyslots take `kinds` (the
/// default first).
pub(crate) fn kdf_options(
    p: &PbkdfArgs,
    format: &str,
    kinds: &[KdfKind],
) -> Result<KdfOptions, Failure> {
    Ok(create::kdf_options(&pbkdf(p), format, kinds, flag_name)?)
}

/// The KDF flags as the library takes them.
fn pbkdf(p: &PbkdfArgs) -> Pbkdf {
    Pbkdf {
        kind: p.pbkdf.clone(),
        hash: p.hash.clone(),
        iter_time_ms: Some(p.iter_time),
        memory_kib: p.pbkdf_memory,
        parallel: p.pbkdf_parallel,
        iterations: p.pbkdf_force_iterations,
    }
}

/// The flag of each option the library's refusals name.
fn flag_name(o: Opt) -> &'static str {
    match o {
        Opt::Header => "--header",
        Opt::KeySize => "--key-size",
        Opt::SectorSize => "--sector-size",
        Opt::IterTime => "--iter-time",
        Opt::RbdObjectSize => "--rbd-object-size",
        Opt::Integrity => "--integrity",
        Opt::NoWipe => "--no-wipe",
        Opt::Keyfiles => "--keyfile-component",
        Opt::NoPassphrase => "--no-passphrase",
        Opt::VolumeKey => "a volume key",
        Opt::GeliKind => "--type geli",
        Opt::Pim => "--veracrypt-pim",
        Opt::HiddenSize => "--hidden-size",
        Opt::VeracryptKind => "--type veracrypt",
    }
}

/// How keyslot `slot` derives its key, for messages.
fn describe_kdf(h: &Header, slot: usize) -> String {
    h.keyslot_kdf(slot)
        .map_or_else(|_| "?".to_string(), |k| k.to_string())
}

/// The format flags as the library's options.
fn create_options(a: &FormatArgs) -> Result<CreateOptions, Failure> {
    let geli = a.luks_type == LuksType::Geli;
    let veracrypt = a.luks_type == LuksType::Veracrypt;
    // A VeraCrypt chain is named alone or as its dm-crypt spec (aes-xts-plain64).
    let cipher = if veracrypt {
        a.cipher.strip_suffix("-xts-plain64").unwrap_or(&a.cipher)
    } else {
        &a.cipher
    };
    Ok(CreateOptions {
        kind: match a.luks_type {
            LuksType::Luks1 => Kind::Luks1,
            LuksType::Luks2 => Kind::Luks2,
            LuksType::Geli => Kind::Geli,
            LuksType::Veracrypt => Kind::Veracrypt,
        },
        cipher: Some(cipher.to_owned()),
        key_bits: a.key_size,
        sector_size: a.sector_size,
        pbkdf: pbkdf(&a.pbkdf),
        label: a.label.clone(),
        header: a.header.file.clone(),
        size: a.size.as_deref().map(parse_size).transpose()?,
        rbd_object_size: a.rbd_object_size.as_deref().map(parse_size).transpose()?,
        integrity: a.integrity.clone(),
        // Keyfile components key GELI providers and VeraCrypt volumes (LUKS format does not
        // read them).
        keyfiles: if geli || veracrypt {
            passphrase::keyfiles(&a.key)?
                .iter()
                .map(|k| Secret::from_slice(k))
                .collect()
        } else {
            Vec::new()
        },
        volume_key: None,
        geli: GeliOptions {
            version: a.geli_version,
            boot: a.geli_boot,
            boot_loader: a.geli_boot_loader,
            display_pass: a.geli_display_pass,
            no_trim: a.geli_no_trim,
            no_autoresize: a.geli_no_autoresize,
            no_passphrase: a.key.no_passphrase,
            no_wipe: a.no_wipe,
        },
        veracrypt: veracrypt_options(&a.veracrypt, &a.key)?,
        names: flag_name,
    })
}

/// The VeraCrypt flags of `format` as the library takes them: the hidden volume's secret
/// read from its files.
fn veracrypt_options(v: &VeracryptFormatArgs, key: &KeyArgs) -> Result<VeracryptOptions, Failure> {
    let hidden = match (&v.hidden_size, &v.hidden_key_file) {
        (Some(size), Some(file)) => {
            passphrase::check_one_stdin(key.key_file.as_deref(), Some(file))?;
            let keys = KeyArgs {
                keyfile_component: v.hidden_keyfile_component.clone(),
                bitlk_startup_key: None,
                ..key.clone()
            };
            Some(HiddenOptions {
                size: parse_size(size)?,
                passphrase: passphrase::from_file(file)?,
                keyfiles: passphrase::keyfiles(&keys)?
                    .iter()
                    .map(|k| Secret::from_slice(k))
                    .collect(),
                pim: v.hidden_pim,
            })
        }
        _ => None,
    };
    Ok(VeracryptOptions { pim: v.pim, hidden })
}

/// What `format` asks on the terminal: the confirmation, the new passphrase, and the
/// sealing's progress.
struct Terminal<'a> {
    a: &'a FormatArgs,
    sealing: Option<Progress>,
}

impl create::Steps for Terminal<'_> {
    type Error = Failure;

    fn confirm(&mut self, what: &Overwrite) -> Result<(), Failure> {
        // `geli init` over a blank provider goes ahead without asking, as geli does.
        if self.a.ask_only_over_a_volume && what.signatures.is_empty() {
            return Ok(());
        }
        let place = if what.last_sector {
            "the last sector of"
        } else {
            "data on"
        };
        passphrase::confirm(
            &format!(
                "This will overwrite {place} {} irrevocably{}.",
                crate::present::locator::redacted(&what.path),
                holding(&what.signatures)
            ),
            self.a.key.batch,
        )
    }

    fn passphrase(&mut self) -> Result<Secret, Failure> {
        passphrase::new(self.a.key.key_file.as_deref())
    }

    fn sealed(&mut self, done: u64, total: u64) {
        let progress = self
            .sealing
            .get_or_insert_with(|| Progress::bytes("wipe", Some(total)));
        progress.set(done);
        if done == total {
            if let Some(p) = self.sealing.take() {
                p.finish();
            }
        }
    }
}

/// `, and wipe what it holds now: LUKS header at offset 0x0, ...` for a confirmation:
/// what the format about to be written will wipe (nothing when `found` is empty).
fn holding(found: &[formats::Signature]) -> String {
    if found.is_empty() {
        return String::new();
    }
    let all: Vec<String> = found.iter().map(ToString::to_string).collect();
    format!(
        ", and wipe what it holds now: {} (no other format's header stays live)",
        all.join(", ")
    )
}

/// `format` (and `geli init`): the library's creator, its result shown.
pub fn format(a: FormatArgs) -> Result<(), Failure> {
    let opts = create_options(&a)?;
    let mut steps = Terminal {
        a: &a,
        sealing: None,
    };
    let made = create::create(&a.image, &opts, &image::context(), &mut steps)?;
    let u = &made.unlocked;
    let image = crate::present::locator::redacted(&a.image);
    match &made.made {
        Made::Luks(h) => {
            let vnum = if a.luks_type == LuksType::Luks1 { 1 } else { 2 };
            let place = if made.detached {
                format!(
                    " (header in {})",
                    crate::present::locator::redacted(&made.header_path)
                )
            } else {
                String::new()
            };
            println!(
                "{image}: LUKS{vnum} volume {}, {} with a {}-bit key, {}-byte sectors, {} bytes of data at offset {}{place}",
                h.uuid().unwrap_or("-"),
                u.cipher,
                made.key_bits,
                u.sector_size,
                u.data_size,
                u.data_offset
            );
            println!("keyslot {}: {}", u.keyslot, describe_kdf(h, u.keyslot));
        }
        Made::Veracrypt(vc) => {
            println!(
                "{image}: VeraCrypt volume, {}-xts-plain64 with a {}-bit key, PBKDF2-{} with {} \
                 iterations, {}-byte sectors, {} bytes of data at offset {}",
                vc.cipher,
                made.key_bits,
                vc.hash,
                vc.iterations,
                u.sector_size,
                u.data_size,
                u.data_offset
            );
            if let (Some((offset, len)), Some(iterations)) = (vc.hidden, vc.hidden_iterations) {
                println!(
                    "hidden volume: {len} bytes of data at offset {offset}, PBKDF2-{} with \
                     {iterations} iterations (open it with --type veracrypt --tcrypt-hidden)",
                    vc.hash
                );
            }
        }
        Made::Geli(geli) => {
            let md = geli.metadata();
            println!(
                "{image}: GELI provider (metadata version {}), {}{} with a {}-bit key, \
                 {}-byte sectors, {} bytes of data, iterations {}",
                md.version,
                algo::name(md.ealgo),
                match md.aalgo {
                    0 => String::new(),
                    a => format!(" and {}", algo::name(a)),
                },
                md.keylen,
                u.sector_size,
                u.data_size,
                md.iterations
            );
        }
    }
    Ok(())
}

fn print_json(v: &serde_json::Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v).map_err(|e| Failure::runtime(e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// Shows the header, as `cryptsetup luksDump`. A header that fails validation exits 2, as
/// there, after what can still be read of it (with each problem) is printed.
pub fn dump(a: DumpArgs) -> Result<(), Failure> {
    image::request(&a.tcrypt)?;
    let mut img = match image::open(&a.image, &a.header, Access::Inspect) {
        Ok(img) => img,
        Err(f) => {
            if f.exit_code() == 2 {
                print_salvaged(&a)?;
            }
            return Err(f);
        }
    };
    // A VeraCrypt/TrueCrypt header is encrypted whole: it is shown once unlocked.
    if img.header.name() == sectorcrypt_volume::tcrypt::NAME {
        img.unlock(&a.key)?;
    }
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
    let name = crate::present::locator::redacted(&a.image);
    let reencrypting = {
        let store = image::open_store(path, true)?;
        // Never beside another header update.
        let _lock = image::lock_header(&store, path, Mode::Exclusive)?;
        let done = formats::repair_header(&store)?;
        let header = Header::read(&store).ok();
        let luks2 = header.as_ref().and_then(|h| h.downcast_ref::<Luks2>());
        // A requirement this code does not know (online-reencrypt-v999) is refused here
        // too: nothing can be repaired under it.
        let reencrypting = match luks2 {
            Some(l) => reencrypt::requirement_version(l.json())?.is_some(),
            None => false,
        };
        if done.is_empty() && !reencrypting {
            println!("{name}: no known problems in the header");
        }
        for d in done {
            println!("{name}: {d}");
        }
        reencrypting
    };
    if reencrypting {
        // The re-encryption metadata is checked (and a crash recovered) with the key, as
        // cryptsetup's repair does.
        let mut img = sectorcrypt_image::reencrypt::open(
            &a.image,
            a.header.file.as_deref(),
            &image::context(),
        )?;
        if sectorcrypt_image::reencrypt::finish_without_key(&mut img)? {
            println!(
                "{name}: the re-encryption had done all its data and its old keyslots were \
                 gone (an end interrupted): its metadata is ended"
            );
            return Ok(());
        }
        img.use_key_parts(&a.key)?;
        let pass = img.passphrase(&a.key)?;
        let what = match sectorcrypt_image::reencrypt::repair(&mut img, &pass)? {
            None | Some(reencrypt::Repaired::Sound) => {
                "the re-encryption metadata is sound; resume it with `sectorcrypt reencrypt`"
            }
            Some(reencrypt::Repaired::Upgraded) => {
                "the re-encryption metadata of before cryptsetup 2.3.7 got its digest \
                 (online-reencrypt-v2); resume it with `sectorcrypt reencrypt` (or cryptsetup)"
            }
            Some(reencrypt::Repaired::Recovered) => {
                "the re-encryption interrupted inside a hotzone was recovered; resume it \
                 with `sectorcrypt reencrypt` (or cryptsetup reencrypt --resume-only)"
            }
            Some(reencrypt::Repaired::Ended) => {
                "the re-encryption had done all its data and its old keyslot was wiped (an \
                 end interrupted): it is ended under the new key"
            }
        };
        println!("{name}: {what}");
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
                    crate::present::locator::redacted(&a.image)
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
    image::request(&a.tcrypt)?;
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
            crate::present::locator::redacted(&a.image)
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
                crate::present::locator::redacted(&files.header_path),
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
            let target = crate::present::locator::redacted(&files.header_path);
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
            crate::present::locator::redacted(&img.files.header_path)
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
        crate::present::locator::redacted(&img.files.header_path)
    );
    Ok(())
}

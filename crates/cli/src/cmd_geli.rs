//! `format --type geli`: a new GELI provider (geli's `init`), with geli's own names for
//! ciphers and key lengths: `--key-size` is geli's `-l` (the AES key, 128 or 256 bits for
//! AES-XTS, 128, 192 or 256 for AES-CBC), `--keyfile-component` its `-k`, `--key-file`
//! its `-J`, `--no-passphrase` its `-P`, `--geli-version` its `-V`; `--geli-boot`,
//! `--geli-boot-loader`, `--geli-display-pass`, `--geli-no-trim` and
//! `--geli-no-autoresize` its flags `-b -g -d -T -R`, `--integrity` its `-a` (with
//! `--cipher null`, its `-e NULL`). An authenticated provider is written whole (every
//! sector sealed, its progress shown) unless `--no-wipe`: an unwritten sector's
//! tags would fail when read.

use crate::args::{FormatArgs, ResizeArgs};
use crate::failure::Failure;
use crate::image;
use crate::image::ImageStore;
use crate::passphrase;
use crate::progress::Progress;
use sectorcrypt_cli::parse_size;
use sectorcrypt_image::create::Target;
use sectorcrypt_volume::geli::init::{self, InitOptions};
use sectorcrypt_volume::geli::metadata::{self, algo};
use sectorcrypt_volume::geli::resize as geli_resize;
use sectorcrypt_volume::lock::Mode;
use sectorcrypt_volume::{formats, Store as _, Unlocked};
use std::sync::Arc;

/// geli's encryption algorithm names (`g_eli_str2ealgo`, any case), and the cipher
/// strings that mean the same here.
pub(crate) fn ealgo(name: &str) -> Result<u16, Failure> {
    if let Some(a) = algo::encryption_by_name(name) {
        return Ok(a);
    }
    let geli_knows = [
        "camellia",
        "camellia-cbc",
        "blowfish",
        "blowfish-cbc",
        "3des",
        "3des-cbc",
    ];
    let supported = algo::ENCRYPTION_NAMES;
    Err(Failure::usage(
        if geli_knows.contains(&name.to_ascii_lowercase().as_str()) {
            format!("GELI cipher {name:?} is not supported (supported: {supported})")
        } else {
            format!("unknown GELI cipher {name:?} (supported: {supported})")
        },
    ))
}

/// The tag algorithms of `--integrity` (geli's `-a`): `hmac-sha256` or geli's own
/// `HMAC/SHA256` (`g_eli_str2aalgo`), any case.
pub(crate) fn aalgo(name: &str) -> Result<u16, Failure> {
    algo::authentication_by_name(name).ok_or_else(|| {
        Failure::usage(format!(
            "unknown GELI authentication {name:?} (supported: {})",
            algo::AUTHENTICATION_NAMES
        ))
    })
}

/// Seals every sector of a new authenticated provider (encrypted zeros with their tags),
/// its progress shown (`progress.rs`).
fn wipe(store: &Arc<ImageStore>, u: &Unlocked) -> Result<(), Failure> {
    let progress = Progress::bytes("wipe", Some(u.data_size));
    sectorcrypt_image::create::seal(store, u, &|done| progress.set(done))?;
    progress.finish();
    Ok(())
}

/// `format --type geli`.
pub fn format(a: FormatArgs) -> Result<(), Failure> {
    if a.header.file.is_some() {
        return Err(Failure::usage(
            "GELI keeps its metadata in the provider's last sector: --header does not apply",
        ));
    }
    if a.label.is_some() {
        return Err(Failure::usage("GELI providers have no label"));
    }
    if a.pbkdf.pbkdf.as_deref().is_some_and(|k| k != "pbkdf2") {
        return Err(Failure::usage(
            "GELI derives keys with pbkdf2 (sha512) only",
        ));
    }
    let keylen = match a.key_size {
        None => 0,
        Some(bits) => u16::try_from(bits)
            .map_err(|_| Failure::usage(format!("--key-size {bits} is not a GELI key length")))?,
    };
    let sectorsize = match a.sector_size {
        None => 0,
        Some(n) => u32::try_from(n)
            .map_err(|_| Failure::usage(format!("--sector-size {n} is too large")))?,
    };
    let mut flags = InitOptions::default().flags;
    for (set, bit) in [
        (a.geli_boot, metadata::flags::BOOT),
        (a.geli_boot_loader, metadata::flags::GELIBOOT),
        (a.geli_display_pass, metadata::flags::GELIDISPLAYPASS),
        (a.geli_no_trim, metadata::flags::NODELETE),
    ] {
        if set {
            flags |= bit;
        }
    }
    if a.geli_no_autoresize {
        flags &= !metadata::flags::AUTORESIZE;
    }
    let aalgo = a.integrity.as_deref().map(aalgo).transpose()?.unwrap_or(0);
    if a.no_wipe && aalgo == 0 {
        return Err(Failure::usage("--no-wipe applies with --integrity only"));
    }
    let opts = InitOptions {
        flags,
        ealgo: ealgo(&a.cipher)?,
        aalgo,
        keylen,
        sectorsize,
        iterations: a.pbkdf.pbkdf_force_iterations,
        iter_time_ms: a.pbkdf.iter_time,
        use_passphrase: !a.key.no_passphrase,
        version: a.geli_version,
        ..InitOptions::default()
    };
    if a.key.no_passphrase && a.key.keyfile_component.is_empty() {
        return Err(Failure::usage(
            "--no-passphrase needs at least one --keyfile-component",
        ));
    }
    let keyfiles = passphrase::keyfiles(&a.key)?;
    let size = a.size.as_deref().map(parse_size).transpose()?;
    let cx = image::context();
    let target = Target::open(&a.image, None, size, &cx)?;
    let result = (|| {
        let store = &target.store;
        let found = target.signatures()?;
        // `geli init` over a blank provider goes ahead without asking, as geli does.
        let blank = a.ask_only_over_a_volume && found.is_empty();
        if target.existed() && !blank {
            passphrase::confirm(
                &format!(
                    "This will overwrite the last sector of {} irrevocably{}.",
                    crate::locator::redacted(&a.image),
                    holding(&found)
                ),
                a.key.batch,
            )?;
        }
        let _lock = target.lock(&cx)?;
        let pass = if opts.use_passphrase {
            passphrase::new(a.key.key_file.as_deref())?
        } else {
            passphrase::Secret::from_slice(&[])
        };
        let files: Vec<&[u8]> = keyfiles.iter().map(|k| &k[..]).collect();
        let (geli, u) = init::init(store, &opts, &files, &pass)?;
        if aalgo != 0 && !a.no_wipe {
            wipe(store, &u)?;
        }
        let md = geli.metadata();
        println!(
            "{}: GELI provider (metadata version {}), {}{} with a {}-bit key, {}-byte sectors, \
             {} bytes of data, iterations {}",
            crate::locator::redacted(&a.image),
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
        Ok(())
    })();
    if result.is_err() {
        target.discard();
    }
    result
}

/// `, which holds a LUKS header at offset 0x0 and ...` for a confirmation: what the
/// format about to be written will wipe (nothing when `found` is empty).
pub fn holding(found: &[formats::Signature]) -> String {
    if found.is_empty() {
        return String::new();
    }
    let all: Vec<String> = found.iter().map(ToString::to_string).collect();
    format!(
        ", and wipe what it holds now: {} (no other format's header stays live)",
        all.join(", ")
    )
}

/// `resize`: geli's `resize -s oldsize` on an image that already grew.
pub fn resize(a: ResizeArgs) -> Result<(), Failure> {
    let old_size = parse_size(&a.old_size)?;
    let store = image::open_store(&a.image, true)?;
    let _claim = image::claim(&store, &a.image, Mode::Exclusive)?;
    let _lock = image::lock_header(&store, &a.image, Mode::Exclusive)?;
    let mut start = [0u8; 6];
    if store.read_at(&mut start, 0).is_ok() && &start == b"LUKS\xba\xbe" {
        return Err(Failure::usage(format!(
            "{} is a LUKS volume: resize is for GELI providers",
            crate::locator::redacted(&a.image)
        )));
    }
    let geli = geli_resize::resize(&store, old_size)?;
    println!(
        "{}: GELI metadata moved to the last sector of {} bytes ({} bytes of data)",
        crate::locator::redacted(&a.image),
        geli.metadata().provsize,
        geli.data_size()
    );
    Ok(())
}

//! `reencrypt`: re-keys a LUKS2 volume in place through `sectorcrypt_image::reencrypt`;
//! Ctrl-C or SIGTERM stops it cleanly between two hotzones.

use crate::failure::Failure;
use crate::flags::reencrypt::ReencryptArgs;
use crate::present::progress::Progress;
use crate::volumes::image::{self, Keys as _};
use sectorcrypt_cli::parse_size;
use sectorcrypt_image::reencrypt::{self, ReencryptOptions};
use sectorcrypt_volume::luks::luks2::reencrypt::Outcome;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub fn reencrypt(a: ReencryptArgs) -> Result<(), Failure> {
    let name = crate::present::locator::redacted(&a.image);
    if a.encrypt {
        encrypt_init(&a)?;
        if a.init_only {
            match a.header.file.as_deref() {
                Some(h) => println!(
                    "{name}: encryption initialised (header in {}); resume it with \
                     `sectorcrypt reencrypt --header` (or cryptsetup reencrypt --resume-only)",
                    h.display()
                ),
                None => println!(
                    "{name}: encryption initialised (the header is in the image); resume it \
                     with `sectorcrypt reencrypt` (or cryptsetup reencrypt --resume-only)"
                ),
            }
            return Ok(());
        }
    }
    let moving_decrypt = a
        .header
        .file
        .as_deref()
        .filter(|h| a.decrypt && !h.exists());
    if let Some(h) = moving_decrypt {
        decrypt_shift_init(&a, h)?;
        if a.init_only {
            println!(
                "{name}: decryption initialised (the header is now {}); resume it with \
                 `sectorcrypt reencrypt --header` (or cryptsetup reencrypt --resume-only)",
                h.display()
            );
            return Ok(());
        }
    }
    let mut img = reencrypt::open(&a.image, a.header.file.as_deref(), &image::context())?;
    if reencrypt::finish_without_key(&mut img)? {
        println!("{name}: the re-encryption had done all its data; its metadata is ended");
        return Ok(());
    }
    img.use_key_parts(&a.key)?;
    let kdf = super::volume::kdf_options(&a.pbkdf, img.header.name(), img.header.kdf_kinds())?;
    let key_bytes = match a.key_size {
        Some(bits) if bits % 8 != 0 || bits == 0 => {
            return Err(Failure::usage(format!(
                "--key-size {bits}: a whole number of bytes, in bits (256, 512, ...)"
            )))
        }
        Some(bits) => Some(bits / 8),
        None => None,
    };
    let hotzone = match &a.hotzone_size {
        Some(s) => Some(parse_size(s)?),
        None => None,
    };
    // After --encrypt's header, the run resumes what it set up.
    let fresh = !a.encrypt;
    // Without --encrypt, --reduce-device-size moves the data of a re-key.
    let reduce_device_size = match &a.reduce_device_size {
        Some(s) if fresh => Some(parse_size(s)?),
        _ => None,
    };
    let o = ReencryptOptions {
        cipher: a.cipher.clone().filter(|_| fresh),
        key_bytes: key_bytes.filter(|_| fresh),
        sector_size: a.sector_size.filter(|_| fresh),
        // A data-shift encryption's resilience is datashift, in its metadata.
        // So is a data-moving decryption's, once it is initialised.
        resilience: a
            .resilience
            .clone()
            .filter(|_| !a.encrypt && moving_decrypt.is_none()),
        reduce_device_size,
        resilience_hash: a.resilience_hash.clone(),
        hotzone,
        kdf: Some(kdf),
        key_slot: a.key.key_slot,
        init_only: a.init_only,
        resume_only: a.resume_only || a.encrypt,
        decrypt: a.decrypt,
        threads: 0,
    };
    let mode = reencrypt::mode(&img)?;
    let decrypting = a.decrypt || mode.as_deref() == Some("decrypt");
    let encrypting = a.encrypt || mode.as_deref() == Some("encrypt");
    let noun = if decrypting {
        "decryption"
    } else {
        "re-encryption"
    };
    let pass = img.passphrase(&a.key)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Failure::runtime(format!("cannot catch signals: {e}")))?;
    }
    let start = Instant::now();
    let mut shown: Option<Progress> = None;
    let mut progress = |done: u64, total: u64| {
        shown
            .get_or_insert_with(|| Progress::bytes("reencrypt", Some(total)))
            .set(done);
        !stop.load(Ordering::Relaxed)
    };
    let outcome = reencrypt::run(&mut img, &pass, &o, &mut progress)?;
    if let Some(p) = shown {
        p.finish();
    }
    match outcome {
        Outcome::Finished if encrypting => println!(
            "{name}: encrypted ({:.2} s); its header is {}",
            start.elapsed().as_secs_f64(),
            a.header
                .file
                .as_deref()
                .map_or("in the image".into(), |h| h.display().to_string())
        ),
        Outcome::Finished if decrypting => println!(
            "{name}: decrypted ({:.2} s): it holds the plaintext alone; the header {} opens \
             nothing any more",
            start.elapsed().as_secs_f64(),
            a.header
                .file
                .as_deref()
                .map_or("(none)".into(), |h| h.display().to_string())
        ),
        Outcome::Finished => println!(
            "{name}: re-encrypted ({:.2} s); the old keyslots are gone",
            start.elapsed().as_secs_f64()
        ),
        Outcome::Stopped { .. } if a.init_only => println!(
            "{name}: {noun} initialised; resume it with `sectorcrypt reencrypt \
             --resume-only` (or cryptsetup reencrypt --resume-only)"
        ),
        Outcome::Stopped { done, total } => println!(
            "{name}: {noun} stopped at {done} of {total} bytes; resume it with \
             `sectorcrypt reencrypt` (or cryptsetup reencrypt --resume-only)"
        ),
    }
    Ok(())
}

/// `--encrypt`: the new header (detached, or in the image with the data moved) and the
/// metadata of an encryption in place.
fn encrypt_init(a: &ReencryptArgs) -> Result<(), Failure> {
    let reduce = match &a.reduce_device_size {
        Some(s) => Some(parse_size(s)?),
        None => None,
    };
    if a.header.file.is_none() && reduce.is_none() {
        return Err(Failure::usage(
            "--encrypt needs room for the header: --header FILE (a detached header, \
             created) or --reduce-device-size SIZE (the header in the image; its last SIZE \
             bytes must be free)",
        ));
    }
    let kinds = sectorcrypt_volume::luks::Version::Luks2.kdf_kinds();
    let kdf = super::volume::kdf_options(&a.pbkdf, "luks2", kinds)?;
    let bits = a.key_size.unwrap_or(512);
    if !bits.is_multiple_of(8) || bits == 0 {
        return Err(Failure::usage(format!(
            "--key-size {bits}: a whole number of bytes"
        )));
    }
    let o = ReencryptOptions {
        cipher: a.cipher.clone(),
        key_bytes: Some(bits / 8),
        sector_size: a.sector_size,
        resilience: a.resilience.clone(),
        resilience_hash: a.resilience_hash.clone(),
        kdf: Some(kdf),
        ..ReencryptOptions::default()
    };
    let pass = crate::passphrase::new(a.key.key_file.as_deref())?;
    match (a.header.file.as_deref(), reduce) {
        (Some(header), _) => {
            reencrypt::encrypt_init(&a.image, header, &image::context(), &pass, &o)?
        }
        (None, Some(r)) => {
            reencrypt::encrypt_shift_init(&a.image, &image::context(), &pass, &o, r)?
        }
        (None, None) => unreachable!("refused above"),
    }
    Ok(())
}

/// `--decrypt --header NEW` of a volume whose header is in the image: the header goes to
/// NEW and the data will move back over the image's start.
fn decrypt_shift_init(a: &ReencryptArgs, header: &std::path::Path) -> Result<(), Failure> {
    let mut img = reencrypt::open(&a.image, None, &image::context())?;
    img.use_key_parts(&a.key)?;
    let pass = img.passphrase(&a.key)?;
    drop(img);
    let hotzone = match &a.hotzone_size {
        Some(s) => Some(parse_size(s)?),
        None => None,
    };
    let o = ReencryptOptions {
        resilience: a.resilience.clone(),
        resilience_hash: a.resilience_hash.clone(),
        hotzone,
        key_slot: a.key.key_slot,
        ..ReencryptOptions::default()
    };
    reencrypt::decrypt_shift_init(&a.image, header, &image::context(), &pass, &o)?;
    Ok(())
}

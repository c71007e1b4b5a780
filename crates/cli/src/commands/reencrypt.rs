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
    let mut img = reencrypt::open(&a.image, a.header.file.as_deref(), &image::context())?;
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
    let o = ReencryptOptions {
        cipher: a.cipher.clone(),
        key_bytes,
        sector_size: a.sector_size,
        resilience: a.resilience.clone(),
        resilience_hash: a.resilience_hash.clone(),
        hotzone,
        kdf: Some(kdf),
        key_slot: a.key.key_slot,
        init_only: a.init_only,
        resume_only: a.resume_only,
        threads: 0,
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
        Outcome::Finished => println!(
            "{name}: re-encrypted ({:.2} s); the old keyslots are gone",
            start.elapsed().as_secs_f64()
        ),
        Outcome::Stopped { .. } if a.init_only => println!(
            "{name}: re-encryption initialised; resume it with `sectorcrypt reencrypt \
             --resume-only` (or cryptsetup reencrypt --resume-only)"
        ),
        Outcome::Stopped { done, total } => println!(
            "{name}: re-encryption stopped at {done} of {total} bytes; resume it with \
             `sectorcrypt reencrypt` (or cryptsetup reencrypt --resume-only)"
        ),
    }
    Ok(())
}

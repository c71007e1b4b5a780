//! Opening a volume to serve it (`serve`, `mount`, `open`): unlocking (or a one-time key)
//! and the sector engine, as the library's [`VolumeExport`].

use crate::failure::Failure;
use crate::flags::{KeyArgs, OpenArgs};
use crate::volumes::image::{self, Claims};
pub use sectorcrypt_image::export::VolumeExport;
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::geli::{self, onetime::OnetimeOptions};
use sectorcrypt_volume::lock::{self, Mode};
use sectorcrypt_volume::{Store, Unlocked};
use std::io::{self, Write};

fn options(a: &OpenArgs) -> Result<EngineOptions, Failure> {
    if a.threads == Some(0) {
        return Err(Failure::usage("--threads must be at least 1"));
    }
    Ok(EngineOptions {
        threads: a.threads,
        read_only: a.read_only,
        chunk_bytes: None,
    })
}

/// Opens the volume `a` describes.
pub fn open(a: &OpenArgs) -> Result<VolumeExport, Failure> {
    crate::host::memory::hold_keys_for_long();
    let export = open_export(a);
    crate::host::memory::scrub_after_unlock();
    crate::host::memory::warn_if_key_memory_not_locked();
    export
}

/// The key arguments of an open (no confirmation to ask for).
fn key_args(a: &OpenArgs) -> KeyArgs {
    KeyArgs {
        key_file: a.key_file.clone(),
        keyfile_component: a.keyfile_component.clone(),
        no_passphrase: a.no_passphrase,
        bitlk_startup_key: a.bitlk_startup_key.clone(),
        key_slot: a.key_slot,
        batch: false,
    }
}

fn open_export(a: &OpenArgs) -> Result<VolumeExport, Failure> {
    if a.onetime {
        return onetime(a);
    }
    let key = key_args(a);
    let image::Opened {
        volume,
        unlocked,
        format,
        claims,
    } = image::open_volume(&a.image, &a.header, &key, options(a)?, a.shared)?;
    require_integrity(a, &unlocked, format)?;
    let _ = writeln!(
        io::stderr(),
        "sectorcrypt: {} unlocked with keyslot {}: {} bytes of {}, {}-byte sectors",
        crate::present::locator::redacted(&a.image),
        unlocked.keyslot,
        unlocked.data_size,
        unlocked.cipher,
        unlocked.sector_size
    );
    Ok(VolumeExport::new(
        volume,
        format,
        unlocked.cipher.clone(),
        claims,
    ))
}

/// `--integrity`: refuses a volume whose sectors are not authenticated.
fn require_integrity(a: &OpenArgs, unlocked: &Unlocked, format: &str) -> Result<(), Failure> {
    Ok(sectorcrypt_image::image::require_integrity(
        a.integrity,
        &a.image,
        unlocked,
        format,
    )?)
}

/// GELI's one-time mode (`geli onetime`, or `--onetime`: AES-XTS with 256-bit AES keys
/// and 512-byte sectors): the whole file is the data area under a fresh random master
/// key that exists only in memory; no metadata is written, no sector reserved.
fn onetime(a: &OpenArgs) -> Result<VolumeExport, Failure> {
    if a.read_only {
        return Err(Failure::usage(
            "--onetime with --read-only: nothing written under a fresh key could be read",
        ));
    }
    let opts = a.onetime_geli.clone().unwrap_or(OnetimeOptions {
        keylen: 256,
        ..OnetimeOptions::default()
    });
    let store = image::open_store(&a.image, true)?;
    let mut claims = Claims::from(image::claim(&store, &a.image, Mode::Shared)?);
    // It writes: one writer at a time, as for any volume.
    claims.push(image::claim_access(&store, lock::Access::Writer)?);
    let len = store.size().map_err(|e| {
        Failure::runtime(format!(
            "{}: {e}",
            crate::present::locator::redacted(&a.image)
        ))
    })?;
    let (md, unlocked) = geli::onetime::onetime(len, &opts)?;
    require_integrity(a, &unlocked, "geli-onetime")?;
    let volume = unlocked.engine(Box::new(store), options(a)?)?;
    let _ = writeln!(
        io::stderr(),
        "sectorcrypt: one-time GELI provider of {} bytes: {} with a {}-bit key, {}-byte \
         sectors (a random master key held in memory only)",
        unlocked.data_size,
        geli::metadata::algo::name(md.ealgo),
        md.keylen,
        md.sectorsize
    );
    Ok(VolumeExport::new(
        volume,
        "geli-onetime",
        unlocked.cipher.clone(),
        claims,
    ))
}

/// The export of a LUKS2 volume served while it is re-encrypted (`serve --reencrypt`),
/// and the re-encryption to run beside it (see `sectorcrypt_image::reencrypt::online`).
pub fn open_online(
    a: &OpenArgs,
    o: &sectorcrypt_image::reencrypt::ReencryptOptions,
) -> Result<(VolumeExport, sectorcrypt_image::reencrypt::Online), Failure> {
    crate::host::memory::hold_keys_for_long();
    let key = key_args(a);
    let pass = crate::passphrase::existing(&key, &a.image)?;
    let opened = sectorcrypt_image::reencrypt::online(
        &a.image,
        a.header.file.as_deref(),
        &image::context(),
        &pass,
        o,
        options(a)?,
    );
    crate::host::memory::scrub_after_unlock();
    let (volume, online) = opened?;
    let _ = writeln!(
        io::stderr(),
        "sectorcrypt: {} unlocked for re-encryption: {} of {} bytes under the new key",
        crate::present::locator::redacted(&a.image),
        online.done().unwrap_or(volume.size()),
        volume.size()
    );
    let export = VolumeExport::new(volume, "luks2", "reencrypting".into(), Default::default());
    Ok((export, online))
}

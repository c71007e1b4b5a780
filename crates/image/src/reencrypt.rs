//! Re-encryption of a LUKS2 volume in place, for every front end: start, resume, recover
//! (the library side of `sectorcrypt reencrypt` and of `sectorcrypt repair` on a volume
//! whose re-encryption crashed). The volume is opened for [`Access::Rewrite`]: nobody
//! else may use it meanwhile, and the header lock is held for the whole run.
//!
//! The metadata and the order of writes are cryptsetup's
//! ([`sectorcrypt_volume::luks::luks2::reencrypt`]): a run that either tool stopped or
//! that crashed is resumed or recovered by the other.

use crate::error::{Error, Result};
use crate::image::{Access, Context, Image};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::KdfOptions;
use sectorcrypt_volume::luks::luks2::reencrypt::{
    self, InitOptions, Keys, Line, Outcome, Repaired, Resilience, RunOptions, State,
};
use sectorcrypt_volume::luks::luks2::Luks2;
use sectorcrypt_volume::Header;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

/// What a re-encryption is asked to do.
#[derive(Debug, Clone, Default)]
pub struct ReencryptOptions {
    /// The new cipher (the volume's when `None`).
    pub cipher: Option<String>,
    /// The new key size in bytes (the volume's when `None`).
    pub key_bytes: Option<usize>,
    /// The new sector size (the volume's when `None`).
    pub sector_size: Option<usize>,
    /// `none`, `checksum` or `journal` (cryptsetup's default, `checksum`, when `None`
    /// at the start; the metadata's when resuming).
    pub resilience: Option<String>,
    /// The checksum hash (`sha256` when `None`).
    pub resilience_hash: Option<String>,
    /// The largest hotzone in bytes.
    pub hotzone: Option<u64>,
    /// The KDF of the new keyslots; `None`: each at the KDF and cost of the keyslot it
    /// replaces.
    pub kdf: Option<KdfOptions>,
    /// Carry over this keyslot alone.
    pub key_slot: Option<usize>,
    /// Write the metadata and stop (cryptsetup's `--init-only`).
    pub init_only: bool,
    /// Only resume a re-encryption in progress; refuse to start one.
    pub resume_only: bool,
    /// Decrypt the volume for good instead of re-keying it (cryptsetup's `--decrypt`;
    /// a detached header whose data starts at offset 0).
    pub decrypt: bool,
    /// A re-key that moves the data this many bytes toward the end (cryptsetup's
    /// `reencrypt --reduce-device-size`): the data area's last bytes must be free, the
    /// volume holds that many bytes less, the keyslots area grows by as many. Its
    /// resilience is `datashift`: each hotzone's old data stays where it was until the
    /// hotzone is done.
    pub reduce_device_size: Option<u64>,
    /// Threads of the data passes (0: one per core).
    pub threads: usize,
}

/// Where a re-encryption of an image stands, before any key is given.
pub fn state(img: &Image) -> Result<State> {
    let h = luks2(img)?;
    Ok(reencrypt::state(h.json())?)
}

/// The mode of the re-encryption in progress (`reencrypt`, `encrypt` or `decrypt`), if
/// any.
pub fn mode(img: &Image) -> Result<Option<String>> {
    let h = luks2(img)?;
    if reencrypt::state(h.json())? == State::None {
        return Ok(None);
    }
    Ok(Some(mode_of(h)?))
}

/// The mode of the re-encryption in progress in `h`.
fn mode_of(h: &Luks2) -> Result<String> {
    Ok(reencrypt::plan(h.json())?.mode)
}

fn luks2(img: &Image) -> Result<&Luks2> {
    img.header
        .downcast_ref::<Luks2>()
        .ok_or_else(|| refusal(img))
}

fn refusal(img: &Image) -> Error {
    let name = img.header.name();
    if name == "luks1" {
        Error::unsupported(
            "LUKS1 has no re-encryption metadata: convert the volume to LUKS2 first \
             (sectorcrypt convert IMAGE --type luks2), then re-encrypt it",
        )
    } else if name == "geli" {
        Error::unsupported(
            "GELI has no re-encryption metadata: to change the key or the cipher, create a \
             new volume (sectorcrypt format, or geli init) and copy the plaintext into it \
             (sectorcrypt read OLD | sectorcrypt write NEW)",
        )
    } else {
        Error::unsupported(format!(
            "re-encryption needs a LUKS2 volume; this is {name}"
        ))
    }
}

/// Opens the volume at `path` (header in `header`) for a re-encryption.
pub fn open(path: &Path, header: Option<&Path>, cx: &Context) -> Result<Image> {
    let img = Image::open(path, header, Access::Rewrite, cx)?;
    luks2(&img)?;
    Ok(img)
}

/// Starts (unless one is in progress) and runs a re-encryption of `img` with
/// `passphrase`, calling `progress(done, total)` before each hotzone (`false` stops
/// cleanly). A crashed one is refused with the way to recover it.
pub fn run(
    img: &mut Image,
    passphrase: &[u8],
    o: &ReencryptOptions,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<Outcome> {
    let resilience = match &o.resilience {
        Some(name) => Some(Resilience::parse(name, hash(o)?)?),
        None => None,
    };
    if let Some(h) = o.hotzone {
        if h == 0 || h % 4096 != 0 {
            return Err(Error::invalid(format!(
                "the hotzone size {h} is not a multiple of 4096 bytes"
            )));
        }
    }
    let threads = if o.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        o.threads
    };
    let files = &img.files;
    let at = files.placement();
    let _lock = files.lock(sectorcrypt_volume::lock::Mode::Exclusive)?;
    let mut header = Header::read(&files.store)?;
    let h = header.downcast_mut::<Luks2>().ok_or_else(|| refusal(img))?;
    let keys: Keys = match reencrypt::state(h.json())? {
        State::None if o.resume_only => {
            return Err(Error::invalid(
                "no re-encryption is in progress (--resume-only only resumes one)",
            ))
        }
        State::None if o.decrypt => {
            if o.reduce_device_size.is_some() {
                return Err(Error::invalid(
                    "a decryption in place takes no --reduce-device-size (to move the data \
                     over the header, give --header NEW)",
                ));
            }
            if o.cipher.is_some() || o.key_bytes.is_some() || o.sector_size.is_some() {
                return Err(Error::invalid(
                    "a decryption takes no cipher, key size or sector size",
                ));
            }
            let resilience = resilience.unwrap_or(Resilience::Checksum(hash(o)?));
            h.decrypt_init(at, passphrase, resilience, o.key_slot)?
        }
        State::None => {
            let resilience = match (o.reduce_device_size, resilience) {
                (Some(_), Some(_)) => {
                    return Err(Error::invalid(
                        "a re-key with --reduce-device-size protects its hotzones by the data \
                         shift (resilience datashift): give no --resilience",
                    ))
                }
                (Some(shift), None) => Resilience::DataShift(shift),
                (None, r) => r.unwrap_or(Resilience::Checksum(hash(o)?)),
            };
            let init = InitOptions {
                cipher: o.cipher.as_deref(),
                key_bytes: o.key_bytes,
                sector_size: o.sector_size,
                resilience,
                kdf: o.kdf.as_ref(),
                key_slot: o.key_slot,
            };
            h.reencrypt_init(at.header(), at.data(), passphrase, &init)?
        }
        State::Clean | State::Crash if o.decrypt && mode_of(h)? != "decrypt" => {
            return Err(Error::invalid(format!(
                "the volume is in a re-encryption of mode {}, not a decryption: resume it \
                 without --decrypt",
                mode_of(h)?
            )))
        }
        State::Clean if h.reencrypt_finish_done(at)? => return Ok(Outcome::Finished),
        State::Clean if h.reencrypt_finish_without_old_key(at, passphrase)? => {
            return Ok(Outcome::Finished)
        }
        State::Clean => {
            if o.cipher.is_some()
                || o.key_bytes.is_some()
                || o.sector_size.is_some()
                || o.reduce_device_size.is_some()
            {
                return Err(Error::invalid(
                    "a re-encryption is in progress: it is resumed with the cipher, key size, \
                     sector size and data shift it started with (give none of them)",
                ));
            }
            h.reencrypt_keys(at.header(), passphrase)?
        }
        State::Crash => {
            return Err(Error::invalid(
                "the re-encryption was interrupted inside a hotzone: recover it first with \
                 `sectorcrypt repair IMAGE` (or `cryptsetup repair`), then resume",
            ))
        }
    };
    if o.init_only {
        return Ok(Outcome::Stopped { done: 0, total: 0 });
    }
    let mut run = RunOptions {
        hotzone: o.hotzone,
        resilience,
        threads,
        progress,
        line: None,
    };
    Ok(h.reencrypt_run(at, &keys, &mut run)?)
}

/// Repairs the re-encryption metadata of `img` with `passphrase`, as `cryptsetup repair`
/// does: upgrades metadata of before cryptsetup 2.3.7, checks any other against its
/// digest (refusing what someone without the key changed) and recovers a crash inside a
/// hotzone. `None` when no re-encryption is in progress.
pub fn repair(img: &mut Image, passphrase: &[u8]) -> Result<Option<Repaired>> {
    let files = &img.files;
    let at = files.placement();
    let _lock = files.lock(sectorcrypt_volume::lock::Mode::Exclusive)?;
    let mut header = Header::read(&files.store)?;
    let h = header.downcast_mut::<Luks2>().ok_or_else(|| refusal(img))?;
    if reencrypt::requirement_version(h.json())?.is_none() {
        return Ok(None);
    }
    Ok(Some(h.reencrypt_repair(at, passphrase)?))
}

/// Ends a re-encryption whose data is all done and whose old keyslots are gone
/// (cryptsetup's end, interrupted between its writes): no passphrase opens it any more,
/// and none is needed; the data is not touched. `false` (nothing written) in any other
/// state. Front ends call it before asking for a passphrase.
pub fn finish_without_key(img: &mut Image) -> Result<bool> {
    let files = &img.files;
    let at = files.placement();
    let _lock = files.lock(sectorcrypt_volume::lock::Mode::Exclusive)?;
    let mut header = Header::read(&files.store)?;
    let h = header.downcast_mut::<Luks2>().ok_or_else(|| refusal(img))?;
    if reencrypt::state(h.json())? != State::Clean {
        return Ok(false);
    }
    Ok(h.reencrypt_finish_done(at)?)
}

/// The resilience a new run starts with: the one asked for, cryptsetup's `checksum`
/// otherwise.
fn start_resilience(o: &ReencryptOptions) -> Result<Resilience> {
    match &o.resilience {
        Some(name) => Ok(Resilience::parse(name, hash(o)?)?),
        None => Ok(Resilience::Checksum(hash(o)?)),
    }
}

fn hash(o: &ReencryptOptions) -> Result<HashAlg> {
    Ok(HashAlg::parse(
        o.resilience_hash.as_deref().unwrap_or("sha256"),
    )?)
}

/// The hotzone of an online re-encryption when none is asked for: small, since every
/// request waits while one is rewritten.
pub const ONLINE_HOTZONE: u64 = 4 << 20;

/// A re-encryption running beside an engine that serves the volume
/// ([`online`]): [`Online::run`] moves the engine's progress line hotzone by hotzone.
/// It holds the volume's claims: keep it as long as the engine serves.
pub struct Online {
    img: Image,
    keys: Option<Keys>,
    line: Option<Arc<Line>>,
    o: ReencryptOptions,
}

impl std::fmt::Debug for Online {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Online")
            .field("line", &self.line.as_ref().map(|l| l.get()))
            .finish_non_exhaustive()
    }
}

/// Opens the volume at `path` (header in `header`) to serve it while it is re-encrypted:
/// starts the re-encryption (unless one is in progress: it is resumed, after recovering
/// a crash), and returns the engine (the plaintext as it always was) and the run to drive
/// beside it. A volume whose re-encryption a recovery finished is served as it is.
pub fn online(
    path: &Path,
    header: Option<&Path>,
    cx: &Context,
    passphrase: &[u8],
    o: &ReencryptOptions,
    engine: EngineOptions,
) -> Result<(Volume, Online)> {
    if o.reduce_device_size.is_some() {
        return Err(Error::unsupported(
            "serving a volume while its data is moved (--reduce-device-size): run the \
             re-key offline (sectorcrypt reencrypt)",
        ));
    }
    if o.resilience.as_deref() == Some("none") {
        // Refused before anything is opened (the run would refuse it too, once served).
        return Err(Error::unsupported(
            "serving a volume while it is re-encrypted without resilience data: give \
             --resilience checksum or journal",
        ));
    }
    let mut img = open(path, header, cx)?;
    let store = crate::image::open_store(path, true, &cx.remote)?;
    let files = &img.files;
    let at = files.placement();
    let lock = files.lock(sectorcrypt_volume::lock::Mode::Exclusive)?;
    let mut hdr = Header::read(&files.store)?;
    let h = hdr.downcast_mut::<Luks2>().ok_or_else(|| refusal(&img))?;
    let keys = match reencrypt::state(h.json())? {
        State::None => {
            let resilience = start_resilience(o)?;
            let init = InitOptions {
                cipher: o.cipher.as_deref(),
                key_bytes: o.key_bytes,
                sector_size: o.sector_size,
                resilience,
                kdf: o.kdf.as_ref(),
                key_slot: o.key_slot,
            };
            Some(h.reencrypt_init(at.header(), at.data(), passphrase, &init)?)
        }
        State::Clean if h.reencrypt_finish_done(at)? => None,
        State::Clean => Some(h.reencrypt_keys(at.header(), passphrase)?),
        State::Crash => {
            let keys = h.reencrypt_keys(at.header(), passphrase)?;
            h.reencrypt_recover(at, &keys)?;
            (reencrypt::state(h.json())? != State::None).then_some(keys)
        }
    };
    let (volume, line) = match &keys {
        Some(k) => {
            let (v, l) = h.reencrypt_engine(at.data(), k, Box::new(store), engine)?;
            (v, Some(l))
        }
        None => {
            let unlocked = hdr.unlock_at(at, passphrase, None)?;
            (unlocked.engine(Box::new(store), engine)?, None)
        }
    };
    drop(lock);
    img.header = hdr;
    Ok((
        volume,
        Online {
            img,
            keys,
            line,
            o: o.clone(),
        },
    ))
}

impl Online {
    /// Runs the re-encryption to its end, or until `progress(done, total)` (called
    /// before each hotzone, with no request held up) says stop. The header lock is taken
    /// for the run.
    pub fn run(&mut self, progress: &mut dyn FnMut(u64, u64) -> bool) -> Result<Outcome> {
        let (Some(keys), Some(line)) = (&self.keys, &self.line) else {
            return Ok(Outcome::Finished);
        };
        let files = &self.img.files;
        let at = files.placement();
        let _lock = files.lock(sectorcrypt_volume::lock::Mode::Exclusive)?;
        let mut hdr = Header::read(&files.store)?;
        let h = hdr
            .downcast_mut::<Luks2>()
            .ok_or_else(|| Error::invalid("the header is no longer LUKS2"))?;
        let resilience = match &self.o.resilience {
            Some(name) => Some(Resilience::parse(name, hash(&self.o)?)?),
            None => None,
        };
        let mut run = RunOptions {
            hotzone: Some(self.o.hotzone.unwrap_or(ONLINE_HOTZONE)),
            resilience,
            threads: 1,
            progress,
            line: Some(line.clone()),
        };
        Ok(h.reencrypt_run(at, keys, &mut run)?)
    }

    /// Bytes of the data area under the new key.
    pub fn done(&self) -> Option<u64> {
        self.line.as_ref().map(|l| l.get())
    }
}

/// Starts the encryption in place of the plain data at `path` with a new detached LUKS2
/// header created at `header` (cryptsetup's `reencrypt --encrypt --header`): the header
/// and its keyslot for `passphrase` are written, the data is not touched yet. Resume it
/// with [`run`] on the volume ([`open`] with the header). Refuses data that already holds
/// a volume, and a header file that exists.
pub fn encrypt_init(
    path: &Path,
    header: &Path,
    cx: &Context,
    passphrase: &[u8],
    o: &ReencryptOptions,
) -> Result<()> {
    use sectorcrypt_volume::luks::{self, FormatOptions, Version};
    let (data, _claim) = claimed_plain(path, cx)?;
    // The header is made whole in a new file beside it, then linked to its name (which
    // fails if the name exists): a crash never leaves at `header` a header whose data
    // is still plain, which would read as garbage.
    let (tmp, file) = new_header_file(header)?;
    let hdr_store = sectorcrypt_volume::FileStore::new(file, header.display().to_string());
    let resilience = start_resilience(o)?;
    let opts = FormatOptions {
        version: Version::Luks2,
        cipher: o.cipher.clone().unwrap_or_else(|| "aes-xts-plain64".into()),
        key_bytes: o.key_bytes.unwrap_or(64),
        sector_size: o.sector_size.unwrap_or(512),
        kdf: o.kdf.unwrap_or_default(),
        data_offset: Some(0),
        ..FormatOptions::default()
    };
    let made = (|| -> Result<()> {
        let at = sectorcrypt_volume::Placement::Detached {
            header: &hdr_store,
            data: &data,
        };
        let (mut hdr, unlocked) = luks::format_at(at, &opts, passphrase, None)?;
        let h = hdr
            .downcast_mut::<Luks2>()
            .ok_or_else(|| Error::invalid("the new header is not LUKS2"))?;
        h.encrypt_init(&hdr_store, unlocked.volume_key(), resilience)?;
        Ok(())
    })();
    let linked = made.and_then(|_| link_header_file(&tmp, header));
    let _ = std::fs::remove_file(&tmp);
    linked
}

/// Starts the encryption in place of the plain data at `path` that moves the data to
/// make room for a LUKS2 header in the image itself (cryptsetup's `reencrypt --encrypt
/// --reduce-device-size`): the image's last `reduce` bytes must be free (the file system
/// on it shrunk by that much first). The header takes the first `reduce / 2` bytes; the
/// data's start is copied to the image's end first, so no byte of plaintext is ever
/// only in memory. The data is not encrypted yet: resume it with [`run`] on the volume.
/// Refuses data that already holds a volume.
pub fn encrypt_shift_init(
    path: &Path,
    cx: &Context,
    passphrase: &[u8],
    o: &ReencryptOptions,
    reduce: u64,
) -> Result<()> {
    use sectorcrypt_volume::luks::{self, FormatOptions, Version};
    use sectorcrypt_volume::store::MemStore;
    if reduce == 0 || !reduce.is_multiple_of(1024) || reduce > 1 << 30 {
        return Err(Error::invalid(format!(
            "--reduce-device-size {reduce}: a multiple of 1024 bytes (half of it is the \
             header, in whole 512-byte sectors), at most 1 GiB"
        )));
    }
    if let Some(r) = o.resilience.as_deref().filter(|r| *r != "datashift") {
        return Err(Error::invalid(format!(
            "--resilience {r}: an encryption that moves the data is protected by the move \
             itself (datashift: every hotzone's source stays until it is written)"
        )));
    }
    let shift = reduce / 2;
    let (data, _claim) = claimed_plain(path, cx)?;
    let size = sectorcrypt_volume::Store::size(&data)
        .map_err(|e| Error::io(format!("the size of {}", crate::redacted(path)), e))?;
    let sector = o.sector_size.unwrap_or(512) as u64;
    if size < 3 * shift || !(size - 2 * shift).is_multiple_of(sector) {
        return Err(Error::invalid(format!(
            "{} has {size} bytes: reduced by {reduce} it must keep at least {shift} bytes of \
             data, in whole {sector}-byte sectors",
            crate::redacted(path)
        )));
    }
    let opts = FormatOptions {
        version: Version::Luks2,
        cipher: o.cipher.clone().unwrap_or_else(|| "aes-xts-plain64".into()),
        key_bytes: o.key_bytes.unwrap_or(64),
        sector_size: sector as usize,
        kdf: o.kdf.unwrap_or_default(),
        data_offset: Some(shift),
        metadata_size: Some(shift),
        ..FormatOptions::default()
    };
    // The header is made in memory: its place still holds the data's start.
    let mem = MemStore::new(shift as usize);
    let at = sectorcrypt_volume::Placement::Detached {
        header: &mem,
        data: &data,
    };
    let (mut hdr, unlocked) =
        luks::format_at(at, &opts, passphrase, None).map_err(|e| match e {
            sectorcrypt_volume::Error::Header(_) | sectorcrypt_volume::Error::Io { .. } => e.into(),
            other => Error::invalid(format!(
                "a LUKS2 header in the {shift} bytes --reduce-device-size {reduce} makes room \
                 for: {other}"
            )),
        })?;
    let h = hdr
        .downcast_mut::<Luks2>()
        .ok_or_else(|| Error::invalid("the new header is not LUKS2"))?;
    h.encrypt_shift_build(unlocked.volume_key(), size, shift)?;
    drop(unlocked);
    h.encrypt_shift_place(&mem, &data)?;
    Ok(())
}

/// A new file beside `header` (hidden, named after it) to make a header in; refuses a
/// `header` that exists.
fn new_header_file(header: &Path) -> Result<(std::path::PathBuf, std::fs::File)> {
    if header.symlink_metadata().is_ok() {
        return Err(header_exists(
            header,
            std::io::ErrorKind::AlreadyExists.into(),
        ));
    }
    let name = header
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a file name", header.display())))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".sectorcrypt-new");
    let tmp = header.with_file_name(tmp_name);
    // Only its owner reads it, as cryptsetup's: the keyslots are in it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| header_exists(header, e))?;
    Ok((tmp, file))
}

/// Gives the whole header made in `tmp` its name `header` (failing if that exists) and
/// makes the name durable.
fn link_header_file(tmp: &Path, header: &Path) -> Result<()> {
    std::fs::hard_link(tmp, header).map_err(|e| header_exists(header, e))?;
    if let Some(dir) = header.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

fn header_exists(header: &Path, e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::AlreadyExists => Error::invalid(format!(
            "{} exists: the header file is created here (give a new path)",
            header.display()
        )),
        _ => Error::io(format!("creating the header file {}", header.display()), e),
    }
}

/// Starts the decryption in place of the LUKS2 volume at `path` whose header is inside
/// the image (cryptsetup's `reencrypt --decrypt --header NEW`): the header goes to the
/// new file `header` (whose data is `path`), the data's start is copied over the image's
/// header, and the data moves back over it as it is decrypted, hotzone by hotzone
/// (`online-reencrypt-v3`, resilience `datashift-checksum` or `datashift-journal`). At
/// the end the image holds the plaintext from its first byte; resume with [`run`] on the
/// image with the header.
pub fn decrypt_shift_init(
    path: &Path,
    header: &Path,
    cx: &Context,
    passphrase: &[u8],
    o: &ReencryptOptions,
) -> Result<()> {
    let (data, _claim) = claimed(path, cx)?;
    let old = Header::read(&data)?;
    let h = old.downcast_ref::<Luks2>().ok_or_else(|| {
        Error::unsupported(format!(
            "a decryption in place takes a LUKS2 volume; {} is {}",
            crate::redacted(path),
            old.name()
        ))
    })?;
    let resilience = start_resilience(o)?;
    // The passphrase first: nothing is written for a wrong one.
    drop(old.unlock_slot(&data, passphrase, o.key_slot)?);
    let size = h.metadata_size();
    let (tmp, file) = new_header_file(header)?;
    let hdr_store = sectorcrypt_volume::FileStore::new(file, header.display().to_string());
    let image = sectorcrypt_volume::Store::size(&data)
        .map_err(|e| Error::io(format!("the size of {}", crate::redacted(path)), e))?;
    let made = (|| -> Result<()> {
        copy_header(&data, &hdr_store, size, header)?;
        sectorcrypt_volume::Store::sync(&hdr_store)
            .map_err(|e| Error::io(format!("syncing {}", header.display()), e))?;
        let mut copy = Header::read(&hdr_store)?;
        let h = copy
            .downcast_mut::<Luks2>()
            .ok_or_else(|| Error::invalid("the header copy is not LUKS2"))?;
        h.decrypt_shift_build(
            &hdr_store, passphrase, o.key_slot, image, resilience, o.hotzone,
        )?;
        link_header_file(&tmp, header)?;
        h.decrypt_shift_place(&hdr_store, &data)?;
        Ok(())
    })();
    let _ = std::fs::remove_file(&tmp);
    made
}

/// Copies the first `len` bytes of `from` (a header and its keyslots) to `to`.
fn copy_header(
    from: &dyn sectorcrypt_volume::Store,
    to: &dyn sectorcrypt_volume::Store,
    len: u64,
    name: &Path,
) -> Result<()> {
    let mut buf = zeroize::Zeroizing::new(vec![0u8; 1 << 20]);
    let mut at = 0;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        from.read_at(&mut buf[..n], at)
            .map_err(|e| Error::io("reading the volume's header", e))?;
        to.write_at(&buf[..n], at)
            .map_err(|e| Error::io(format!("writing {}", name.display()), e))?;
        at += n as u64;
    }
    Ok(())
}

/// The store at `path` opened for writing, claimed for this process alone.
fn claimed(path: &Path, cx: &Context) -> Result<(crate::store::ImageStore, crate::store::Guard)> {
    let data = crate::image::open_store(path, true, &cx.remote)?;
    let claim = crate::image::claim(
        &data,
        path,
        sectorcrypt_volume::lock::Mode::Exclusive,
        cx.on_wait,
    )?;
    Ok((data, claim))
}

/// [`claimed`] for an encryption: refuses data that already holds a volume.
fn claimed_plain(
    path: &Path,
    cx: &Context,
) -> Result<(crate::store::ImageStore, crate::store::Guard)> {
    let (data, claim) = claimed(path, cx)?;
    if let Ok(h) = Header::read(&data) {
        return Err(Error::invalid(format!(
            "{} already holds a {} volume: --encrypt takes plain data",
            crate::redacted(path),
            h.name()
        )));
    }
    Ok((data, claim))
}

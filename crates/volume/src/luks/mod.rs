//! LUKS2 and LUKS1, compatible with cryptsetup (and, for LUKS1, qemu and nbdkit).
//!
//! - [`Header::read`] finds the format and parses it (LUKS2: both header copies, the newer
//!   valid one wins; a damaged or stale copy is repaired by the next metadata write);
//! - [`Header::unlock`] tries the keyslots with a passphrase and returns an [`Unlocked`]
//!   volume (key, cipher, sector layout, data offset and size, first IV) for the sector
//!   engine; a wrong passphrase is [`Error::WrongPassphrase`];
//! - [`format`], [`Header::add_key`], [`Header::remove_key`], [`Header::change_key`],
//!   [`Header::erase`], [`backup_header`], [`restore_header`] change volumes.
//!
//! Every change writes keyslot material before the metadata that points at it and syncs
//! after each step, so a crash leaves a volume that opens with the old passphrases (and
//! the new one once its metadata write completed).
//!
//! The IV rule: data sector `n` (of `sector_size` bytes) is encrypted with IV number
//! `iv_offset + n * sector_size / 512`. LUKS2 metadata has no large-IV flag and cryptsetup
//! never sets dm-crypt's `iv_large_sectors` for LUKS2, so IVs count 512-byte units for
//! 4096-byte sectors too (checked against volumes cryptsetup encrypted, in the tests).

mod af;
mod error;
mod hash;
mod io;
mod kdf;
pub mod luks1;
pub mod luks2;

pub use error::{Error, Result};
pub use hash::HashAlg;
pub use kdf::{Kdf, KdfKind, KdfOptions};
pub use luks1::Luks1;
pub use luks2::Luks2;

use sectorcrypt_crypto::dmcrypt::{CipherSpec, SectorCipher, SectorLayout};
use std::fs::File;
use zeroize::Zeroizing;

/// Fills `buf` from the operating system's random source.
pub(crate) fn random(buf: &mut [u8]) -> Result<()> {
    getrandom::getrandom(buf)
        .map_err(|e| Error::Io(std::io::Error::other(format!("random source: {e}"))))
}

/// Constant-time equality (`subtle`); slices of different lengths are unequal.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// A random (version 4) UUID in the lowercase text form cryptsetup writes.
pub fn new_uuid() -> Result<String> {
    let mut b = [0u8; 16];
    random(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// An unlocked volume: what the sector engine needs. The key is zeroized on drop and never
/// printed.
pub struct Unlocked {
    pub(crate) volume_key: Zeroizing<Vec<u8>>,
    /// The cipher string, e.g. `aes-xts-plain64`.
    pub cipher: String,
    /// The cipher, parsed.
    pub spec: CipherSpec,
    /// Sector size and IV rule.
    pub layout: SectorLayout,
    /// Byte offset of the data in the image.
    pub data_offset: u64,
    /// Bytes of data (whole sectors).
    pub data_size: u64,
    /// IV number of the first data sector, in 512-byte units (LUKS2 `iv_tweak`).
    pub iv_offset: u64,
    /// The keyslot that opened.
    pub keyslot: usize,
}

impl std::fmt::Debug for Unlocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unlocked")
            .field("cipher", &self.cipher)
            .field("key_bits", &(self.volume_key.len() * 8))
            .field("layout", &self.layout)
            .field("data_offset", &self.data_offset)
            .field("data_size", &self.data_size)
            .field("iv_offset", &self.iv_offset)
            .field("keyslot", &self.keyslot)
            .finish_non_exhaustive()
    }
}

impl Unlocked {
    /// The volume key.
    pub fn volume_key(&self) -> &[u8] {
        &self.volume_key
    }

    /// A sector cipher for the data area (IV numbers are absolute: add `iv_offset`).
    pub fn sector_cipher(&self) -> Result<SectorCipher> {
        Ok(SectorCipher::new(self.spec, &self.volume_key, self.layout)?)
    }

    /// The sector engine over this volume's data area of `file` (the image it was unlocked
    /// from, opened read-write unless `opts.read_only`).
    pub fn engine(
        &self,
        file: File,
        opts: crate::engine::EngineOptions,
    ) -> Result<crate::engine::Volume> {
        Ok(crate::engine::Volume::new(
            file,
            self.sector_cipher()?,
            self.data_offset,
            self.data_size,
            self.iv_offset,
            opts,
        )?)
    }
}

/// The LUKS version to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// LUKS1.
    Luks1,
    /// LUKS2.
    Luks2,
}

/// What [`format`] creates. Defaults are cryptsetup 2.6's: LUKS2, aes-xts-plain64, a
/// 512-bit key, Argon2id calibrated to 2 s, 16 MiB of metadata and keyslots.
#[derive(Debug, Clone)]
pub struct FormatOptions {
    /// LUKS1 or LUKS2.
    pub version: Version,
    /// Segment cipher.
    pub cipher: String,
    /// Volume key length in bytes.
    pub key_bytes: usize,
    /// Encryption sector size (LUKS2; LUKS1 is always 512).
    pub sector_size: usize,
    /// KDF of the first keyslot.
    pub kdf: KdfOptions,
    /// LUKS2 label.
    pub label: String,
    /// LUKS2 data offset in bytes (default 16 MiB).
    pub data_offset: Option<u64>,
    /// A UUID to use instead of a random one.
    pub uuid: Option<String>,
}

impl Default for FormatOptions {
    fn default() -> FormatOptions {
        FormatOptions {
            version: Version::Luks2,
            cipher: "aes-xts-plain64".into(),
            key_bytes: 64,
            sector_size: 512,
            kdf: KdfOptions::default(),
            label: String::new(),
            data_offset: None,
            uuid: None,
        }
    }
}

/// The default LUKS2 data offset (metadata + keyslots), as cryptsetup.
pub const LUKS2_DEFAULT_DATA_OFFSET: u64 = 16 << 20;

/// Iterations for the volume key digest: PBKDF2 calibrated to 125 ms (cryptsetup's
/// LUKS_MKD_ITERATIONS_MS), at least 1000; 1000 when the keyslot cost is forced (tests).
fn digest_iterations(hash: HashAlg, key_len: usize, forced: bool) -> Result<u32> {
    if forced {
        return Ok(kdf::PBKDF2_MIN_ITERATIONS);
    }
    let mut o = KdfOptions::pbkdf2(hash);
    o.iter_time_ms = 125;
    match o.resolve(key_len)? {
        Kdf::Pbkdf2 { iterations, .. } => Ok(iterations),
        Kdf::Argon2 { .. } => unreachable!("pbkdf2 asked for"),
    }
}

/// A parsed header of either version.
// A volume has one header, copied rarely: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Header {
    /// LUKS1.
    Luks1(Luks1),
    /// LUKS2.
    Luks2(Luks2),
}

impl Header {
    /// Reads and checks the header of an image. Never writes.
    pub fn read(file: &File) -> Result<Header> {
        let mut first = vec![0u8; luks2::BIN_SIZE];
        let n = read_prefix(file, &mut first)?;
        if n >= 8 && &first[..6] == b"LUKS\xba\xbe" && first[6..8] == [0, 1] {
            if n < luks1::HEADER_LEN {
                return Err(Error::Truncated(
                    "the image is shorter than a luks1 header".into(),
                ));
            }
            return Ok(Header::Luks1(Luks1::parse(&first[..n])?));
        }
        if n < 6 && n != 0 && first[..n] == b"LUKS\xba\xbe"[..n] {
            return Err(Error::Truncated(
                "the image ends inside the luks header".into(),
            ));
        }
        match Luks2::read(file, &first) {
            Ok(h) => Ok(Header::Luks2(h)),
            Err(Error::Corrupt(m)) => {
                let size = io::image_size(file)?;
                if size < 2 * luks2::HDR_SIZES[0] {
                    Err(Error::Truncated(format!(
                        "the image has {size} bytes, less than the two luks2 header copies ({m})"
                    )))
                } else {
                    Err(Error::Corrupt(m))
                }
            }
            Err(e) => Err(e),
        }
    }

    /// 1 or 2.
    pub fn version(&self) -> u8 {
        match self {
            Header::Luks1(_) => 1,
            Header::Luks2(_) => 2,
        }
    }

    /// The volume UUID.
    pub fn uuid(&self) -> &str {
        match self {
            Header::Luks1(h) => &h.uuid,
            Header::Luks2(h) => h.uuid(),
        }
    }

    /// Bytes at the start of the image holding headers and keyslots.
    pub fn metadata_size(&self) -> u64 {
        match self {
            Header::Luks1(h) => h.metadata_size(),
            Header::Luks2(h) => h.metadata_size(),
        }
    }

    /// Numbers of the active keyslots.
    pub fn active_keyslots(&self) -> Result<Vec<usize>> {
        Ok(match self {
            Header::Luks1(h) => (0..luks1::KEYSLOTS)
                .filter(|&i| h.slots[i].active)
                .collect(),
            Header::Luks2(h) => h.keyslots()?.iter().map(|k| k.id).collect(),
        })
    }

    /// Opens the volume with `passphrase`, trying every keyslot.
    pub fn unlock(&self, file: &File, passphrase: &[u8]) -> Result<Unlocked> {
        self.unlock_slot(file, passphrase, None)
    }

    /// Opens the volume with `passphrase`, trying only keyslot `slot` when given.
    pub fn unlock_slot(
        &self,
        file: &File,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<Unlocked> {
        match self {
            Header::Luks1(h) => {
                let (key, n) = h.unlock(file, passphrase, slot)?;
                h.unlocked(file, key, n)
            }
            Header::Luks2(h) => {
                let (key, n) = h.unlock(file, passphrase, slot)?;
                h.unlocked(file, key, n)
            }
        }
    }

    /// Adds a keyslot for `new_passphrase` holding the volume key of `unlocked`. Returns
    /// its number.
    pub fn add_key(
        &mut self,
        file: &File,
        unlocked: &Unlocked,
        new_passphrase: &[u8],
        kdf: &KdfOptions,
        slot: Option<usize>,
    ) -> Result<usize> {
        self.check_key(unlocked.volume_key())?;
        match self {
            Header::Luks1(h) => {
                h.add_keyslot(file, unlocked.volume_key(), new_passphrase, kdf, slot)
            }
            Header::Luks2(h) => {
                h.add_keyslot(file, unlocked.volume_key(), new_passphrase, kdf, slot, None)
            }
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        let ok = match self {
            Header::Luks1(h) => h.verify_key(key)?,
            Header::Luks2(h) => h.verify_key(key)?,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::Invalid("the key does not match this volume".into()))
        }
    }

    /// Destroys keyslot `slot` (metadata first, then its material).
    pub fn remove_key(&mut self, file: &File, slot: usize) -> Result<()> {
        match self {
            Header::Luks1(h) => h.remove_keyslots(file, Some(slot)),
            Header::Luks2(h) => h.remove_keyslots(file, Some(slot)),
        }
    }

    /// Replaces the passphrase of the keyslot `old_passphrase` opens. LUKS2 keeps the
    /// keyslot number (new material in a free area, then the metadata, then the old area
    /// is wiped); LUKS1 moves to a free slot when there is one, like cryptsetup. Returns
    /// the keyslot now holding the new passphrase.
    pub fn change_key(
        &mut self,
        file: &File,
        old_passphrase: &[u8],
        new_passphrase: &[u8],
        kdf: &KdfOptions,
        slot: Option<usize>,
    ) -> Result<usize> {
        let unlocked = self.unlock_slot(file, old_passphrase, slot)?;
        let old = unlocked.keyslot;
        match self {
            Header::Luks2(h) => h.add_keyslot(
                file,
                unlocked.volume_key(),
                new_passphrase,
                kdf,
                None,
                Some(old),
            ),
            Header::Luks1(h) => {
                if (0..luks1::KEYSLOTS).any(|i| !h.slots[i].active) {
                    let n =
                        h.add_keyslot(file, unlocked.volume_key(), new_passphrase, kdf, None)?;
                    h.remove_keyslots(file, Some(old))?;
                    Ok(n)
                } else {
                    h.remove_keyslots(file, Some(old))?;
                    h.add_keyslot(file, unlocked.volume_key(), new_passphrase, kdf, Some(old))
                }
            }
        }
    }

    /// Destroys every keyslot: the data cannot be opened again without a header backup.
    pub fn erase(&mut self, file: &File) -> Result<()> {
        match self {
            Header::Luks1(h) => h.remove_keyslots(file, None),
            Header::Luks2(h) => h.remove_keyslots(file, None),
        }
    }

    /// LUKS2: whether one header copy is damaged or stale.
    pub fn needs_repair(&self) -> bool {
        matches!(self, Header::Luks2(h) if h.needs_repair())
    }

    /// LUKS2: rewrites both header copies from the good one (a no-op for LUKS1).
    pub fn repair(&mut self, file: &File) -> Result<()> {
        match self {
            Header::Luks1(_) => Ok(()),
            Header::Luks2(h) => {
                h.check_supported()?;
                h.write(file)
            }
        }
    }

    /// The metadata as JSON: LUKS2's own document, or a description of a LUKS1 header.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Header::Luks2(h) => h.json().clone(),
            Header::Luks1(h) => {
                let slots: Vec<serde_json::Value> = h
                    .slots
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        serde_json::json!({
                            "slot": i, "active": s.active, "iterations": s.iterations,
                            "key_material_offset": s.key_offset, "stripes": s.stripes,
                        })
                    })
                    .collect();
                serde_json::json!({
                    "version": 1, "cipher_name": h.cipher_name, "cipher_mode": h.cipher_mode,
                    "hash_spec": h.hash_spec, "payload_offset": h.payload_offset,
                    "key_bytes": h.key_bytes, "mk_digest_iterations": h.mk_iterations,
                    "uuid": h.uuid, "keyslots": slots,
                })
            }
        }
    }

    /// A human-readable description, in the spirit of `cryptsetup luksDump`.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        use std::fmt::Write as _;
        match self {
            Header::Luks1(h) => {
                let _ = writeln!(s, "LUKS header information\n\nVersion:        1");
                let _ = writeln!(s, "Cipher name:    {}", h.cipher_name);
                let _ = writeln!(s, "Cipher mode:    {}", h.cipher_mode);
                let _ = writeln!(s, "Hash spec:      {}", h.hash_spec);
                let _ = writeln!(s, "Payload offset: {}", h.payload_offset);
                let _ = writeln!(s, "MK bits:        {}", h.key_bytes * 8);
                let _ = writeln!(s, "MK iterations:  {}", h.mk_iterations);
                let _ = writeln!(s, "UUID:           {}\n", h.uuid);
                for (i, k) in h.slots.iter().enumerate() {
                    if k.active {
                        let _ = writeln!(
                            s,
                            "Key Slot {i}: ENABLED\n\tIterations:          {}\n\tKey material offset: {}\n\tAF stripes:          {}",
                            k.iterations, k.key_offset, k.stripes
                        );
                    } else {
                        let _ = writeln!(s, "Key Slot {i}: DISABLED");
                    }
                }
            }
            Header::Luks2(h) => {
                let _ = writeln!(s, "LUKS header information\nVersion:        2");
                let _ = writeln!(s, "Epoch:          {}", h.seqid());
                let _ = writeln!(s, "Metadata area:  {} [bytes]", h.hdr_size());
                let _ = writeln!(s, "Keyslots area:  {} [bytes]", h.keyslots_size());
                let _ = writeln!(s, "UUID:           {}", h.uuid());
                let label = if h.label().is_empty() {
                    "(no label)"
                } else {
                    h.label()
                };
                let _ = writeln!(s, "Label:          {label}");
                let config = &h.json()["config"];
                let flags: Vec<&str> = config["flags"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "Flags:          {}",
                    if flags.is_empty() {
                        "(no flags)".to_string()
                    } else {
                        flags.join(" ")
                    }
                );
                if let Some(req) = config["requirements"]["mandatory"].as_array() {
                    let r: Vec<&str> = req.iter().filter_map(|v| v.as_str()).collect();
                    let _ = writeln!(s, "Requirements:   {}", r.join(" "));
                }
                for d in h.damage() {
                    let _ = writeln!(s, "Warning:        {d} (repaired on the next write)");
                }
                if let Err(e) = h.check_supported() {
                    let _ = writeln!(s, "Warning:        {e}");
                }
                let _ = writeln!(s, "\nData segments:");
                if let Some(segs) = h.json()["segments"].as_object() {
                    for (id, seg) in segs {
                        let _ = writeln!(
                            s,
                            "  {id}: {}\n\toffset: {} [bytes]\n\tlength: {}\n\tcipher: {}\n\tsector: {} [bytes]",
                            seg["type"].as_str().unwrap_or("?"),
                            seg["offset"].as_str().unwrap_or("?"),
                            match seg["size"].as_str() {
                                Some("dynamic") => "(whole device)".to_string(),
                                Some(x) => format!("{x} [bytes]"),
                                None => "?".into(),
                            },
                            seg["encryption"].as_str().unwrap_or("?"),
                            seg["sector_size"],
                        );
                    }
                }
                let _ = writeln!(s, "\nKeyslots:");
                if let Some(kss) = h.json()["keyslots"].as_object() {
                    for (id, ks) in kss {
                        let kdf = &ks["kdf"];
                        let priority = match ks["priority"].as_i64() {
                            Some(0) => "ignore",
                            Some(2) => "high",
                            _ => "normal",
                        };
                        let _ = writeln!(
                            s,
                            "  {id}: {}\n\tKey:        {} bits\n\tPriority:   {priority}\n\tCipher:     {}\n\tPBKDF:      {}",
                            ks["type"].as_str().unwrap_or("?"),
                            ks["key_size"].as_u64().unwrap_or(0) * 8,
                            ks["area"]["encryption"].as_str().unwrap_or("?"),
                            kdf["type"].as_str().unwrap_or("?"),
                        );
                        match kdf["type"].as_str() {
                            Some("pbkdf2") => {
                                let _ = writeln!(
                                    s,
                                    "\tHash:       {}\n\tIterations: {}",
                                    kdf["hash"].as_str().unwrap_or("?"),
                                    kdf["iterations"]
                                );
                            }
                            _ => {
                                let _ = writeln!(
                                    s,
                                    "\tTime cost:  {}\n\tMemory:     {}\n\tThreads:    {}",
                                    kdf["time"], kdf["memory"], kdf["cpus"]
                                );
                            }
                        }
                        let _ = writeln!(
                            s,
                            "\tAF stripes: {}\n\tAF hash:    {}\n\tArea offset:{} [bytes]\n\tArea length:{} [bytes]",
                            ks["af"]["stripes"],
                            ks["af"]["hash"].as_str().unwrap_or("?"),
                            ks["area"]["offset"].as_str().unwrap_or("?"),
                            ks["area"]["size"].as_str().unwrap_or("?"),
                        );
                    }
                }
                let _ = writeln!(s, "Tokens:");
                if let Some(tokens) = h.json()["tokens"].as_object() {
                    for (id, t) in tokens {
                        let _ = writeln!(
                            s,
                            "  {id}: {}\n\tKeyslots:   {}",
                            t["type"].as_str().unwrap_or("?"),
                            id_list_text(&t["keyslots"])
                        );
                    }
                }
                if let Some(ds) = h.json()["digests"].as_object() {
                    let _ = writeln!(s, "Digests:");
                    for (id, d) in ds {
                        let _ = writeln!(
                            s,
                            "  {id}: {}\n\tHash:       {}\n\tIterations: {}\n\tKeyslots:   {}\n\tSegments:   {}",
                            d["type"].as_str().unwrap_or("?"),
                            d["hash"].as_str().unwrap_or("?"),
                            d["iterations"],
                            id_list_text(&d["keyslots"]),
                            id_list_text(&d["segments"])
                        );
                    }
                }
            }
        }
        s
    }
}

/// `["0", "1"]` as `0 1`.
fn id_list_text(v: &serde_json::Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

fn read_prefix(file: &File, buf: &mut [u8]) -> Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Io(e)),
        }
    }
    Ok(n)
}

/// Formats `file` (which must already be large enough: metadata plus at least one sector
/// of data) and adds keyslot 0 for `passphrase`. `volume_key`: a key to use instead of a
/// random one. Everything up to the data offset is zeroed first; the data area is left
/// as it is.
pub fn format(
    file: &File,
    opts: &FormatOptions,
    passphrase: &[u8],
    volume_key: Option<&[u8]>,
) -> Result<(Header, Unlocked)> {
    let spec = luks2::cipher_spec(&opts.cipher, opts.key_bytes)?;
    let _ = spec;
    let mut key = Zeroizing::new(vec![0u8; opts.key_bytes]);
    match volume_key {
        Some(k) if k.len() != opts.key_bytes => {
            return Err(Error::Invalid(format!(
                "the volume key has {} bytes, the key size asks for {}",
                k.len(),
                opts.key_bytes
            )))
        }
        Some(k) => key.copy_from_slice(k),
        None => random(&mut key)?,
    }
    if opts.kdf.kind != KdfKind::Pbkdf2 && opts.version == Version::Luks1 {
        return Err(Error::Invalid(
            "luks1 keyslots use pbkdf2 only (--pbkdf pbkdf2)".into(),
        ));
    }
    // Reject a bad XTS key (equal halves) now rather than at the first write.
    SectorCipher::new(spec, &key, SectorLayout::new(512, false)?)?;
    let uuid = match &opts.uuid {
        Some(u) => u.clone(),
        None => new_uuid()?,
    };
    let forced = opts.kdf.force_iterations.is_some();
    let image = io::image_size(file)?;
    let mut header = match opts.version {
        Version::Luks2 => {
            if !(512..=4096).contains(&opts.sector_size) || !opts.sector_size.is_power_of_two() {
                return Err(Error::Invalid(format!(
                    "sector size {} (must be 512, 1024, 2048 or 4096)",
                    opts.sector_size
                )));
            }
            let data_offset = opts.data_offset.unwrap_or(LUKS2_DEFAULT_DATA_OFFSET);
            if !data_offset.is_multiple_of(4096) {
                return Err(Error::Invalid(
                    "the data offset must be a multiple of 4096".into(),
                ));
            }
            Header::Luks2(Luks2::format(&luks2::FormatParams {
                cipher: &opts.cipher,
                volume_key: &key,
                sector_size: opts.sector_size,
                label: &opts.label,
                uuid: &uuid,
                data_offset,
                digest_iterations: digest_iterations(HashAlg::Sha256, key.len(), forced)?,
                hash: HashAlg::Sha256,
            })?)
        }
        Version::Luks1 => {
            if opts.sector_size != 512 {
                return Err(Error::Invalid("luks1 has 512-byte sectors only".into()));
            }
            if !opts.label.is_empty() {
                return Err(Error::Invalid("luks1 has no label".into()));
            }
            if opts.data_offset.is_some() {
                return Err(Error::Invalid("luks1 data offset is fixed here".into()));
            }
            let hash = opts.kdf.hash;
            Header::Luks1(Luks1::format(
                &opts.cipher,
                &key,
                hash,
                &uuid,
                digest_iterations(hash, key.len(), forced)?,
            )?)
        }
    };
    let meta = match &header {
        Header::Luks1(h) => h.payload_offset as u64 * 512,
        Header::Luks2(h) => h.metadata_size(),
    };
    let sector = if opts.version == Version::Luks2 {
        opts.sector_size as u64
    } else {
        512
    };
    if image < meta + sector {
        return Err(Error::Invalid(format!(
            "the image has {image} bytes; a luks{} volume needs at least {} ({meta} of \
             metadata and one sector of data)",
            header.version(),
            meta + sector
        )));
    }
    if (image - meta) % sector != 0 {
        return Err(Error::Invalid(format!(
            "the data area ({} bytes) is not a multiple of the {sector}-byte sector size",
            image - meta
        )));
    }
    io::wipe(file, 0, meta, false)?;
    io::sync(file)?;
    let slot = match &mut header {
        Header::Luks1(h) => h.add_keyslot(file, &key, passphrase, &opts.kdf, Some(0))?,
        Header::Luks2(h) => h.add_keyslot(file, &key, passphrase, &opts.kdf, Some(0), None)?,
    };
    let unlocked = match &header {
        Header::Luks1(h) => h.unlocked(file, key, slot)?,
        Header::Luks2(h) => h.unlocked(file, key, slot)?,
    };
    Ok((header, unlocked))
}

/// Copies bytes `from..from + len` of `src` to the same offsets of `dst`, 1 MiB at a time
/// (a header's sizes never decide how much is allocated).
fn copy_range(src: &File, dst: &File, from: u64, len: u64, what: &str) -> Result<()> {
    let mut buf = Zeroizing::new(vec![0u8; (1usize << 20).min(len as usize)]);
    let mut done = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(buf.len());
        io::read_exact_at(src, &mut buf[..n], from + done, what)?;
        io::write_all_at(dst, &buf[..n], from + done)?;
        done += n as u64;
    }
    Ok(())
}

/// Copies the headers and keyslot areas of `image` to `out` (created; must not exist).
pub fn backup_header(image: &File, out: &std::path::Path) -> Result<()> {
    let header = Header::read(image)?;
    let len = header.metadata_size();
    if out.symlink_metadata().is_ok() {
        return Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} already exists", out.display()),
        )));
    }
    // Written beside the backup and renamed over it once complete and synced: a failure
    // leaves no partial backup. Only the owner may read it (it holds keyslot material).
    let f = crate::atomic::AtomicFile::create(out)?;
    copy_range(image, f.file(), 0, len, "keyslot areas")?;
    f.commit()?;
    Ok(())
}

/// Writes the headers and keyslot areas of the backup `backup` onto `image`, after
/// checking the backup is a LUKS header and the image is large enough for its data
/// offset. Returns the restored header.
pub fn restore_header(image: &File, backup: &File) -> Result<Header> {
    let header = Header::read(backup).map_err(|e| match e {
        Error::NotLuks(m) => Error::NotLuks(format!("the backup file: {m}")),
        e => e,
    })?;
    let len = header.metadata_size();
    let have = io::image_size(backup)?;
    if have < len {
        return Err(Error::Truncated(format!(
            "the backup file has {have} bytes, its header describes {len} bytes of metadata \
             and keyslot areas"
        )));
    }
    let size = io::image_size(image)?;
    if size <= len {
        return Err(Error::Invalid(format!(
            "the image has {size} bytes, too small for a header whose data starts at {len}"
        )));
    }
    for (off, n) in restore_order(&header, len) {
        copy_range(backup, image, off, n, "backup's metadata")?;
        io::sync(image)?;
    }
    Header::read(image)
}

/// The pieces of `0..len` a header restore writes, in order, each synced before the next:
/// keyslot areas first (no header yet points at them), then LUKS2's secondary copy, then
/// the primary (a crash leaves the old header, or a new copy with its keyslots in place);
/// LUKS1: keyslot areas, then the one header.
fn restore_order(header: &Header, len: u64) -> Vec<(u64, u64)> {
    match header {
        Header::Luks2(h) => {
            let hs = h.hdr_size();
            vec![(2 * hs, len - 2 * hs), (hs, hs), (0, hs)]
        }
        Header::Luks1(_) => {
            let hl = luks1::HEADER_LEN as u64;
            vec![(hl, len - hl), (0, hl)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(version: Version) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("v.img"))
            .unwrap();
        f.set_len(20 << 20).unwrap();
        let opts = FormatOptions {
            version,
            kdf: KdfOptions {
                force_iterations: Some(1000),
                ..KdfOptions::pbkdf2(HashAlg::Sha256)
            },
            ..FormatOptions::default()
        };
        format(&f, &opts, b"pass", None).unwrap();
        (dir, f)
    }

    /// Restore writes keyslot areas, then (LUKS2) the secondary copy, then the primary,
    /// covering the metadata exactly once.
    #[test]
    fn restore_writes_keyslots_then_secondary_then_primary() {
        let (_d, f) = image(Version::Luks2);
        let h = Header::read(&f).unwrap();
        let len = h.metadata_size();
        assert_eq!(
            restore_order(&h, len),
            vec![(32768, len - 32768), (16384, 16384), (0, 16384)]
        );
        let (_d, f) = image(Version::Luks1);
        let h = Header::read(&f).unwrap();
        let len = h.metadata_size();
        assert_eq!(restore_order(&h, len), vec![(592, len - 592), (0, 592)]);
    }
}

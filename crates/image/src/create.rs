//! Creating a volume, written once for every front end (the command line's `format` and
//! `geli init`, Python's `format`, C's `sectorcrypt_format`): [`create()`] takes a
//! locator and [`CreateOptions`] and holds every default and refusal (the key size, the
//! sector size, the KDF, the RBD object alignment, GELI's algorithms, flags and `-a`
//! sealing, VeraCrypt's chains, hashes, PIM and hidden volume); what only a front end does (asking before an existing file is overwritten,
//! asking for the passphrase, showing the sealing's progress) it asks of a [`Steps`].
//!
//! Beneath it, [`Target`] opens the image (creating a file when missing, with a size) and
//! a detached header's file (created empty when missing), claims both exclusively (a
//! volume in use is refused: its server would go on under the old key), finds the
//! signatures the new header will wipe, takes the exclusive header lock, and removes the
//! files it made when the format fails ([`Target::discard`]). [`luks_key_bits`] is the
//! default and the refusal of a LUKS key size; [`seal`] writes every sector of a new
//! authenticated GELI provider, with a progress callback.

use crate::error::{Error, Result};
use crate::image::{claim, lock_header, open_or_create, Claims, Context};
use crate::store::{Guard, ImageStore};
use sectorcrypt_crypto::dmcrypt::{CipherMode, CipherSpec};
use sectorcrypt_crypto::pbkdf::Prf;
use sectorcrypt_crypto::secret::SecretBytes;
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::format::Format as _;
use sectorcrypt_volume::geli::init::{self as geli_init, InitOptions};
use sectorcrypt_volume::geli::metadata::{algo, flags as geli_flags};
use sectorcrypt_volume::geli::Geli;
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::lock::Mode;
use sectorcrypt_volume::luks::{self, FormatOptions, Version};
use sectorcrypt_volume::tcrypt::{self, create as tcrypt_create, header as tcrypt_header};
use sectorcrypt_volume::{formats, Header, Placement, Store, Unlocked};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The format of a new volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// LUKS2 (the default).
    #[default]
    Luks2,
    /// LUKS1.
    Luks1,
    /// A GELI provider (FreeBSD's `geli init`).
    Geli,
    /// A VeraCrypt volume, with a hidden volume inside it on request.
    Veracrypt,
}

impl Kind {
    /// `luks2`, `luks1`, `geli` or `veracrypt` (any case).
    pub fn parse(name: &str) -> Option<Kind> {
        match name.to_ascii_lowercase().as_str() {
            "luks2" => Some(Kind::Luks2),
            "luks1" => Some(Kind::Luks1),
            "geli" => Some(Kind::Geli),
            "veracrypt" => Some(Kind::Veracrypt),
            _ => None,
        }
    }

    /// `luks2`, `luks1`, `geli` or `veracrypt`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Luks2 => "luks2",
            Kind::Luks1 => "luks1",
            Kind::Geli => "geli",
            Kind::Veracrypt => "veracrypt",
        }
    }
}

/// An option of [`CreateOptions`], as a refusal names it: each front end spells it its
/// own way ([`CreateOptions::names`]), the command line as a flag, Python as a keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// [`CreateOptions::header`].
    Header,
    /// [`CreateOptions::key_bits`].
    KeySize,
    /// [`CreateOptions::sector_size`].
    SectorSize,
    /// [`Pbkdf::iter_time_ms`].
    IterTime,
    /// [`CreateOptions::rbd_object_size`].
    RbdObjectSize,
    /// [`CreateOptions::integrity`].
    Integrity,
    /// [`GeliOptions::no_wipe`].
    NoWipe,
    /// [`CreateOptions::keyfiles`].
    Keyfiles,
    /// [`GeliOptions::no_passphrase`].
    NoPassphrase,
    /// [`CreateOptions::volume_key`].
    VolumeKey,
    /// [`CreateOptions::kind`] set to [`Kind::Geli`].
    GeliKind,
    /// [`VeracryptOptions::pim`].
    Pim,
    /// [`HiddenOptions::size`].
    HiddenSize,
    /// [`CreateOptions::kind`] set to [`Kind::Veracrypt`].
    VeracryptKind,
}

impl Opt {
    /// The spelling of a keyword front end: `header=`, `key_size=`, ...
    pub fn keyword(self) -> &'static str {
        match self {
            Opt::Header => "header=",
            Opt::KeySize => "key_size=",
            Opt::SectorSize => "sector_size=",
            Opt::IterTime => "iter_time=",
            Opt::RbdObjectSize => "rbd_object_size=",
            Opt::Integrity => "integrity=",
            Opt::NoWipe => "no_wipe=",
            Opt::Keyfiles => "keyfiles=",
            Opt::NoPassphrase => "no passphrase",
            Opt::VolumeKey => "volume_key=",
            Opt::GeliKind => "type=\"geli\"",
            Opt::Pim => "pim=",
            Opt::HiddenSize => "hidden_size=",
            Opt::VeracryptKind => "type=\"veracrypt\"",
        }
    }
}

/// How keyslots derive their key from the passphrase. LUKS takes all of it; GELI takes
/// PBKDF2 (with SHA-512) only, its iterations and its time.
#[derive(Debug, Clone, Default)]
pub struct Pbkdf {
    /// `pbkdf2`, `argon2i` or `argon2id` (default: argon2id for LUKS2, pbkdf2 for LUKS1
    /// and GELI).
    pub kind: Option<String>,
    /// The hash of PBKDF2 and the AF splitter (LUKS; default sha256).
    pub hash: Option<String>,
    /// The time the KDF is calibrated to, in milliseconds (default 2000).
    pub iter_time_ms: Option<u32>,
    /// Argon2's memory in KiB (LUKS2).
    pub memory_kib: Option<u32>,
    /// Argon2's lanes (LUKS2).
    pub parallel: Option<u32>,
    /// A fixed cost instead of calibration (PBKDF2's iterations, Argon2's time cost).
    pub iterations: Option<u32>,
}

/// What only GELI providers have (geli init's flags).
#[derive(Debug, Clone)]
pub struct GeliOptions {
    /// Metadata version (`-V`, 1 to 7; default 7).
    pub version: u32,
    /// Ask for the passphrase while booting (`-b`, BOOT).
    pub boot: bool,
    /// The loader may attach it (`-g`, GELIBOOT).
    pub boot_loader: bool,
    /// Show the passphrase length while booting (`-d`, GELIDISPLAYPASS).
    pub display_pass: bool,
    /// Do not pass TRIM through (`-T`, NODELETE).
    pub no_trim: bool,
    /// Without AUTORESIZE (`-R`).
    pub no_autoresize: bool,
    /// The key is the keyfiles alone (`-P`): no passphrase is asked (VeraCrypt too: a volume
    /// of keyfiles without a passphrase).
    pub no_passphrase: bool,
    /// An authenticated provider is not sealed (its unwritten sectors fail to read until
    /// written).
    pub no_wipe: bool,
}

impl Default for GeliOptions {
    fn default() -> GeliOptions {
        GeliOptions {
            version: InitOptions::default().version,
            boot: false,
            boot_loader: false,
            display_pass: false,
            no_trim: false,
            no_autoresize: false,
            no_passphrase: false,
            no_wipe: false,
        }
    }
}

/// What only VeraCrypt volumes have.
#[derive(Debug, Clone, Default)]
pub struct VeracryptOptions {
    /// VeraCrypt's PIM: PBKDF2 runs 15000 + 1000 x PIM iterations (default: none, 500000
    /// iterations for SHA-512, Whirlpool, SHA-256, BLAKE2s and Streebog, 655331 for
    /// RIPEMD-160).
    pub pim: Option<u32>,
    /// A hidden volume at the end of the outer volume's data.
    pub hidden: Option<HiddenOptions>,
}

/// A hidden VeraCrypt volume inside the new one: the same cipher and hash, its own
/// passphrase, keyfiles and PIM.
#[derive(Debug, Clone)]
pub struct HiddenOptions {
    /// Its size in bytes (a multiple of 512; VeraCrypt's limits apply).
    pub size: u64,
    /// Its passphrase (it must differ from the outer volume's).
    pub passphrase: SecretBytes,
    /// Its keyfiles, in order.
    pub keyfiles: Vec<SecretBytes>,
    /// Its PIM.
    pub pim: Option<u32>,
}

/// Everything a new volume is made with; the defaults are those of `sectorcrypt format`.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// LUKS2, LUKS1 or GELI.
    pub kind: Kind,
    /// The cipher: a dm-crypt spec for LUKS (default `aes-xts-plain64`), a geli name or
    /// such a spec for GELI (default AES-XTS).
    pub cipher: Option<String>,
    /// The key size in bits: LUKS's whole key (default 512 for XTS, 256 otherwise),
    /// GELI's `-l` (default 128 for AES-XTS).
    pub key_bits: Option<usize>,
    /// The sector size (default: LUKS2 4096 where the data area allows, else 512).
    pub sector_size: Option<usize>,
    /// The keyslot's KDF.
    pub pbkdf: Pbkdf,
    /// A LUKS2 label.
    pub label: Option<String>,
    /// A detached LUKS header's file (created empty when missing).
    pub header: Option<PathBuf>,
    /// The size of the image's file when it is created here.
    pub size: Option<u64>,
    /// The object size of the RBD image the volume lies on (LUKS): its data is aligned
    /// to it. A power of two from 4 KiB to 32 MiB.
    pub rbd_object_size: Option<u64>,
    /// GELI's tag algorithm (`-a`: `hmac-sha256`, ...); the provider is sealed unless
    /// [`GeliOptions::no_wipe`].
    pub integrity: Option<String>,
    /// GELI's keyfile components (`-k`), in order.
    pub keyfiles: Vec<SecretBytes>,
    /// The volume key (LUKS; default random).
    pub volume_key: Option<SecretBytes>,
    /// What only GELI providers have.
    pub geli: GeliOptions,
    /// What only VeraCrypt volumes have.
    pub veracrypt: VeracryptOptions,
    /// How refusals spell an option (default [`Opt::keyword`]).
    pub names: fn(Opt) -> &'static str,
}

impl Default for CreateOptions {
    fn default() -> CreateOptions {
        CreateOptions {
            kind: Kind::default(),
            cipher: None,
            key_bits: None,
            sector_size: None,
            pbkdf: Pbkdf::default(),
            label: None,
            header: None,
            size: None,
            rbd_object_size: None,
            integrity: None,
            keyfiles: Vec::new(),
            volume_key: None,
            geli: GeliOptions::default(),
            veracrypt: VeracryptOptions::default(),
            names: Opt::keyword,
        }
    }
}

/// What formatting is about to overwrite, for a front end that asks first: only an
/// existing file is asked about.
#[derive(Debug, Clone)]
pub struct Overwrite {
    /// The file the header goes to.
    pub path: PathBuf,
    /// GELI: only the provider's last sector is written (else the header area).
    pub last_sector: bool,
    /// The signatures of every format found there now: formatting wipes them all.
    pub signatures: Vec<formats::Signature>,
}

/// What a front end does while [`create()`] runs.
pub trait Steps {
    /// The front end's error, which every library error converts to.
    type Error: From<Error>;

    /// Whether to overwrite what `what` describes (an existing file); an error stops
    /// before anything is written. Called before the header lock is taken.
    fn confirm(&mut self, what: &Overwrite) -> Result<(), Self::Error>;

    /// The new passphrase, asked under the header lock (not asked for a GELI provider
    /// keyed by keyfiles alone).
    fn passphrase(&mut self) -> Result<SecretBytes, Self::Error>;

    /// Sealing a new authenticated GELI provider: `done` of `total` bytes, told first with
    /// 0 and last with `total`.
    fn sealed(&mut self, done: u64, total: u64) {
        let _ = (done, total);
    }
}

/// What [`create()`] made.
#[derive(Debug)]
pub struct Created {
    /// The new volume, opened with its key.
    pub unlocked: Unlocked,
    /// The new header.
    pub made: Made,
    /// The key size in bits (LUKS: the whole key; GELI: `-l`).
    pub key_bits: usize,
    /// Where the header went: the image, or the detached header's file.
    pub header_path: PathBuf,
    /// Whether the header is detached.
    pub detached: bool,
}

/// The header [`create()`] wrote.
#[derive(Debug)]
pub enum Made {
    /// A LUKS header.
    Luks(Box<Header>),
    /// GELI metadata.
    Geli(Box<Geli>),
    /// A VeraCrypt volume's headers.
    Veracrypt(Box<VeracryptMade>),
}

/// What a new VeraCrypt volume is: its cipher chain, hash, iterations, and where its
/// hidden volume went.
#[derive(Debug, Clone)]
pub struct VeracryptMade {
    /// The chain, by cryptsetup's name (`aes`, `serpent-twofish-aes`, ...).
    pub cipher: &'static str,
    /// The PBKDF2 hash, by cryptsetup's name.
    pub hash: &'static str,
    /// The outer header's PBKDF2 iterations.
    pub iterations: u32,
    /// The hidden volume's data: (offset in the image, bytes).
    pub hidden: Option<(u64, u64)>,
    /// The hidden header's PBKDF2 iterations.
    pub hidden_iterations: Option<u32>,
}

/// A refusal of `opts`: bad input ([`crate::Class::InvalidArgument`]).
fn refused(message: String) -> Error {
    Error::invalid(message)
}

/// The checked LUKS request.
struct LuksPlan {
    version: Version,
    cipher: String,
    key_bits: usize,
    kdf: KdfOptions,
}

/// The checked VeraCrypt request.
struct VeracryptPlan {
    create: tcrypt_create::Create,
    /// The hidden volume's size, when one is made.
    hidden: Option<u64>,
}

/// The checked request of any format.
enum Plan {
    Luks(LuksPlan),
    Geli(InitOptions),
    Veracrypt(VeracryptPlan),
}

/// The KDF of a new keyslot of `format` (`luks1`, `luks2`), whose keyslots take `kinds`
/// (the default first), from `p`; refusals spell options with `names`.
pub fn kdf_options(
    p: &Pbkdf,
    format: &str,
    kinds: &[KdfKind],
    names: fn(Opt) -> &'static str,
) -> Result<KdfOptions> {
    let kind = match &p.kind {
        Some(k) => KdfKind::parse(k)?,
        None => kinds[0],
    };
    if let Some(why) = kind.refusal(format, kinds) {
        return Err(refused(why));
    }
    let hash = match &p.hash {
        Some(h) => HashAlg::parse(h)?,
        None => HashAlg::Sha256,
    };
    let iter_time_ms = p.iter_time_ms.unwrap_or(KdfOptions::default().iter_time_ms);
    if iter_time_ms == 0 {
        return Err(refused(format!(
            "{} must be at least 1",
            names(Opt::IterTime)
        )));
    }
    Ok(KdfOptions {
        kind,
        hash,
        iter_time_ms,
        memory_kib: p.memory_kib,
        parallel: p.parallel,
        force_iterations: p.iterations,
    })
}

/// Checks `opts` for a LUKS volume, before anything is opened.
fn plan_luks(opts: &CreateOptions, version: Version) -> Result<LuksPlan> {
    let n = opts.names;
    if opts.integrity.is_some() || opts.geli.no_wipe {
        return Err(refused(format!(
            "{} and {} are for GELI ({}) only",
            n(Opt::Integrity),
            n(Opt::NoWipe),
            n(Opt::GeliKind)
        )));
    }
    if !opts.keyfiles.is_empty() {
        return Err(refused(format!(
            "{} are for GELI ({}) and VeraCrypt ({}) only",
            n(Opt::Keyfiles),
            n(Opt::GeliKind),
            n(Opt::VeracryptKind)
        )));
    }
    refuse_veracrypt_options(opts)?;
    let kdf = kdf_options(&opts.pbkdf, version.name(), version.kdf_kinds(), opts.names)?;
    let cipher = opts.cipher.as_deref().unwrap_or("aes-xts-plain64");
    if cipher.parse::<CipherSpec>().is_err() {
        return Err(Error::unsupported(format!(
            "unsupported cipher {cipher:?} ({})",
            luks::ciphers().collect::<Vec<_>>().join(", ")
        )));
    }
    let key_bits = luks_key_bits(cipher, opts.key_bits)?;
    if let Some(obj) = opts.rbd_object_size {
        if !obj.is_power_of_two() || !(4096..=32 << 20).contains(&obj) {
            return Err(refused(format!(
                "{} {obj}: an rbd object size is a power of two from 4K to 32M",
                n(Opt::RbdObjectSize)
            )));
        }
    }
    Ok(LuksPlan {
        version,
        cipher: cipher.to_owned(),
        key_bits,
        kdf,
    })
}

/// geli's encryption algorithm names (`g_eli_str2ealgo`, any case), and the cipher
/// strings that mean the same here; a cipher geli knows but this does not is
/// [`crate::Class::Unsupported`].
pub fn geli_ealgo(name: &str) -> Result<u16> {
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
    Err(
        if geli_knows.contains(&name.to_ascii_lowercase().as_str()) {
            Error::unsupported(format!(
                "GELI cipher {name:?} is not supported (supported: {supported})"
            ))
        } else {
            refused(format!(
                "unknown GELI cipher {name:?} (supported: {supported})"
            ))
        },
    )
}

/// The tag algorithms of GELI's `-a`: `hmac-sha256` or geli's own `HMAC/SHA256`
/// (`g_eli_str2aalgo`), any case.
pub fn geli_aalgo(name: &str) -> Result<u16> {
    algo::authentication_by_name(name).ok_or_else(|| {
        refused(format!(
            "unknown GELI authentication {name:?} (supported: {})",
            algo::AUTHENTICATION_NAMES
        ))
    })
}

/// Refuses VeraCrypt's own options for another format.
fn refuse_veracrypt_options(opts: &CreateOptions) -> Result<()> {
    let n = opts.names;
    let v = &opts.veracrypt;
    if v.pim.is_some() || v.hidden.is_some() {
        return Err(refused(format!(
            "{} and {} are for VeraCrypt ({}) only",
            n(Opt::Pim),
            n(Opt::HiddenSize),
            n(Opt::VeracryptKind)
        )));
    }
    Ok(())
}

/// The PBKDF2 hash of a VeraCrypt volume called `name` (cryptsetup's names, and
/// `streebog512`, `blake2s`).
pub fn veracrypt_prf(name: &str) -> Result<Prf> {
    let all = [
        Prf::Sha512,
        Prf::Sha256,
        Prf::Whirlpool,
        Prf::Ripemd160,
        Prf::Streebog512,
        Prf::Blake2s256,
    ];
    let lower = name.to_ascii_lowercase();
    let alias = match lower.as_str() {
        "streebog512" | "streebog-512" | "stribog-512" => "stribog512",
        "blake2s" | "blake2s256" => "blake2s-256",
        "ripemd-160" | "rmd160" => "ripemd160",
        "sha-512" => "sha512",
        "sha-256" => "sha256",
        other => other,
    };
    if alias.starts_with("argon2") {
        return Err(refused(format!(
            "VeraCrypt volumes are made with PBKDF2 here: {name:?} (VeraCrypt's Argon2id) \
             volumes open but are not made; --hash takes sha512 (default), sha256, \
             whirlpool, ripemd160, stribog512 or blake2s-256"
        )));
    }
    all.into_iter().find(|p| p.name() == alias).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|p| p.name()).collect();
        refused(format!(
            "unknown VeraCrypt hash {name:?} (supported: {})",
            names.join(", ")
        ))
    })
}

/// Checks `opts` for a VeraCrypt volume, before anything is opened.
fn plan_veracrypt(opts: &CreateOptions) -> Result<VeracryptPlan> {
    let n = opts.names;
    let why = |what: String| Err(refused(what));
    if opts.header.is_some() {
        return why(format!(
            "a VeraCrypt volume keeps its headers in the image: {} does not apply",
            n(Opt::Header)
        ));
    }
    if opts.label.is_some() {
        return why("VeraCrypt volumes have no label".into());
    }
    if opts.volume_key.is_some() {
        return why(format!(
            "a VeraCrypt volume's master keys are random: {} does not apply",
            n(Opt::VolumeKey)
        ));
    }
    if opts.rbd_object_size.is_some() {
        return why(format!(
            "{} lays out luks1 and luks2 volumes only",
            n(Opt::RbdObjectSize)
        ));
    }
    if opts.integrity.is_some() || opts.geli.no_wipe {
        return why(format!(
            "{} and {} are for GELI ({}) only",
            n(Opt::Integrity),
            n(Opt::NoWipe),
            n(Opt::GeliKind)
        ));
    }
    if opts.sector_size.is_some_and(|s| s != 512) {
        return why(format!(
            "VeraCrypt volumes made here have 512-byte sectors: {} does not apply",
            n(Opt::SectorSize)
        ));
    }
    let p = &opts.pbkdf;
    if p.kind.as_deref().is_some_and(|k| k != "pbkdf2") {
        return why(
            "VeraCrypt volumes are made with pbkdf2 (Argon2id volumes open but are not made)"
                .into(),
        );
    }
    if p.iterations.is_some() || p.memory_kib.is_some() || p.parallel.is_some() {
        return why(format!(
            "VeraCrypt's iterations follow its PIM ({}): 15000 + 1000 x PIM; no other cost \
             applies",
            n(Opt::Pim)
        ));
    }
    let v = &opts.veracrypt;
    if v.pim == Some(0) || v.hidden.as_ref().is_some_and(|h| h.pim == Some(0)) {
        return why(format!("{} is a positive number", n(Opt::Pim)));
    }
    if opts.geli.no_passphrase && opts.keyfiles.is_empty() {
        return why(format!(
            "{} needs at least one {}",
            n(Opt::NoPassphrase),
            n(Opt::Keyfiles)
        ));
    }
    let chain = opts.cipher.as_deref().unwrap_or("aes").to_ascii_lowercase();
    let Some(known) = tcrypt_header::CHAINS.iter().find(|c| c.name == chain) else {
        let names: Vec<&str> = tcrypt_header::CHAINS.iter().map(|c| c.name).collect();
        return why(format!(
            "unknown VeraCrypt cipher {chain:?} (supported, in XTS mode: {})",
            names.join(", ")
        ));
    };
    if let Some(bits) = opts.key_bits {
        if bits != known.key_len() * 8 {
            return why(format!(
                "{} {bits}: the {chain} chain of a VeraCrypt volume has {} bits of key",
                n(Opt::KeySize),
                known.key_len() * 8
            ));
        }
    }
    let prf = veracrypt_prf(p.hash.as_deref().unwrap_or("sha512"))?;
    Ok(VeracryptPlan {
        create: tcrypt_create::Create {
            chain: chain.clone(),
            prf,
            pim: v.pim,
            hidden: None,
        },
        hidden: v.hidden.as_ref().map(|h| h.size),
    })
}

/// The VeraCrypt password of `passphrase` with `keyfiles` (the keyfile pool).
fn veracrypt_password(
    passphrase: &[u8],
    keyfiles: &[SecretBytes],
) -> Result<zeroize::Zeroizing<Vec<u8>>> {
    let files: Vec<zeroize::Zeroizing<Vec<u8>>> = keyfiles
        .iter()
        .map(|k| zeroize::Zeroizing::new(k.to_vec()))
        .collect();
    Ok(tcrypt_header::password(passphrase, &files, true)?)
}

/// Checks `opts` for a GELI provider, before anything is opened.
fn plan_geli(opts: &CreateOptions) -> Result<InitOptions> {
    let n = opts.names;
    let g = &opts.geli;
    refuse_veracrypt_options(opts)?;
    if opts.header.is_some() {
        return Err(refused(format!(
            "GELI keeps its metadata in the provider's last sector: {} does not apply",
            n(Opt::Header)
        )));
    }
    if opts.label.is_some() {
        return Err(refused("GELI providers have no label".into()));
    }
    if opts.volume_key.is_some() {
        return Err(refused(format!(
            "a GELI provider's master key is random: {} does not apply",
            n(Opt::VolumeKey)
        )));
    }
    if opts.rbd_object_size.is_some() {
        return Err(refused(format!(
            "{} lays out luks1 and luks2 volumes only",
            n(Opt::RbdObjectSize)
        )));
    }
    if opts.pbkdf.kind.as_deref().is_some_and(|k| k != "pbkdf2") {
        return Err(refused(
            "GELI derives keys with pbkdf2 (sha512) only".into(),
        ));
    }
    let keylen = match opts.key_bits {
        None => 0,
        Some(bits) => u16::try_from(bits).map_err(|_| {
            refused(format!(
                "{} {bits} is not a GELI key length",
                n(Opt::KeySize)
            ))
        })?,
    };
    let sectorsize = match opts.sector_size {
        None => 0,
        Some(s) => u32::try_from(s)
            .map_err(|_| refused(format!("{} {s} is too large", n(Opt::SectorSize))))?,
    };
    let mut flags = InitOptions::default().flags;
    for (set, bit) in [
        (g.boot, geli_flags::BOOT),
        (g.boot_loader, geli_flags::GELIBOOT),
        (g.display_pass, geli_flags::GELIDISPLAYPASS),
        (g.no_trim, geli_flags::NODELETE),
    ] {
        if set {
            flags |= bit;
        }
    }
    if g.no_autoresize {
        flags &= !geli_flags::AUTORESIZE;
    }
    let aalgo = opts.integrity.as_deref().map(geli_aalgo).transpose()?;
    if g.no_wipe && aalgo.is_none() {
        return Err(refused(format!(
            "{} applies with {} only",
            n(Opt::NoWipe),
            n(Opt::Integrity)
        )));
    }
    let ealgo = match &opts.cipher {
        Some(c) => geli_ealgo(c)?,
        None => InitOptions::default().ealgo,
    };
    if g.no_passphrase && opts.keyfiles.is_empty() {
        return Err(refused(format!(
            "{} needs at least one {}",
            n(Opt::NoPassphrase),
            n(Opt::Keyfiles)
        )));
    }
    let defaults = InitOptions::default();
    Ok(InitOptions {
        flags,
        ealgo,
        aalgo: aalgo.unwrap_or(0),
        keylen,
        sectorsize,
        iterations: opts.pbkdf.iterations,
        iter_time_ms: opts.pbkdf.iter_time_ms.unwrap_or(defaults.iter_time_ms),
        use_passphrase: !g.no_passphrase,
        version: g.version,
        ..defaults
    })
}

/// Checks `opts` (every refusal, before anything is opened).
fn plan(opts: &CreateOptions) -> Result<Plan> {
    Ok(match opts.kind {
        Kind::Luks2 => Plan::Luks(plan_luks(opts, Version::Luks2)?),
        Kind::Luks1 => Plan::Luks(plan_luks(opts, Version::Luks1)?),
        Kind::Geli => Plan::Geli(plan_geli(opts)?),
        Kind::Veracrypt => Plan::Veracrypt(plan_veracrypt(opts)?),
    })
}

/// Makes a new volume at `image` (a path, an NBD URI, an `rbd:` spec; a file is created
/// with [`CreateOptions::size`] when missing) as `opts` says. Every refusal comes before
/// anything is opened; a volume in use is refused ([`crate::Class::InUse`]); an existing file is
/// overwritten only when `steps` confirms; files made here are removed again when this
/// fails.
pub fn create<S: Steps>(
    image: &Path,
    opts: &CreateOptions,
    cx: &Context,
    steps: &mut S,
) -> Result<Created, S::Error> {
    let plan = plan(opts)?;
    let target = Target::open(image, opts.header.as_deref(), opts.size, cx)?;
    let result = write(&target, opts, &plan, cx, steps);
    if result.is_err() {
        target.discard();
    }
    result
}

/// Writes the new volume of `plan` to `target`.
fn write<S: Steps>(
    target: &Target,
    opts: &CreateOptions,
    plan: &Plan,
    cx: &Context,
    steps: &mut S,
) -> Result<Created, S::Error> {
    let geli = matches!(plan, Plan::Geli(_));
    if target.existed() {
        steps.confirm(&Overwrite {
            path: target.header_path().to_path_buf(),
            last_sector: geli,
            signatures: target.signatures()?,
        })?;
    }
    let _lock = target.lock(cx)?;
    let (made, unlocked, key_bits) = match plan {
        Plan::Luks(p) => {
            let at = target.placement();
            let sector_size = match opts.sector_size {
                Some(n) => n,
                None => luks::default_sector_size(p.version, at).map_err(Error::from)?,
            };
            let fo = FormatOptions {
                version: p.version,
                cipher: p.cipher.clone(),
                key_bytes: p.key_bits / 8,
                sector_size,
                kdf: p.kdf,
                label: opts.label.clone().unwrap_or_default(),
                data_offset: None,
                data_alignment: opts.rbd_object_size,
                uuid: None,
                metadata_size: None,
            };
            let pass = steps.passphrase()?;
            let (h, u) =
                luks::format_at(at, &fo, &pass, opts.volume_key.as_deref()).map_err(Error::from)?;
            (Made::Luks(Box::new(h)), u, p.key_bits)
        }
        Plan::Geli(init) => {
            let pass = if init.use_passphrase {
                steps.passphrase()?
            } else {
                SecretBytes::from_slice(&[])
            };
            let files: Vec<&[u8]> = opts.keyfiles.iter().map(|k| &k[..]).collect();
            let (g, u) =
                geli_init::init(&*target.store, init, &files, &pass).map_err(Error::from)?;
            if init.aalgo != 0 && !opts.geli.no_wipe {
                let total = u.data_size;
                steps.sealed(0, total);
                seal(&target.store, &u, &mut |done| steps.sealed(done, total))?;
            }
            let bits = usize::from(g.metadata().keylen);
            (Made::Geli(Box::new(g)), u, bits)
        }
        Plan::Veracrypt(p) => {
            let pass = if opts.geli.no_passphrase {
                SecretBytes::from_slice(&[])
            } else {
                steps.passphrase()?
            };
            let (made, u, bits) = write_veracrypt(target, opts, p, &pass)?;
            (Made::Veracrypt(Box::new(made)), u, bits)
        }
    };
    Ok(Created {
        unlocked,
        made,
        key_bits,
        header_path: target.header_path().to_path_buf(),
        detached: target.detached(),
    })
}

/// Writes the VeraCrypt volume of `plan` (with the hidden volume of `opts`) to `target`,
/// opened by `pass` with the keyfiles of `opts`.
fn write_veracrypt(
    target: &Target,
    opts: &CreateOptions,
    plan: &VeracryptPlan,
    pass: &[u8],
) -> Result<(VeracryptMade, Unlocked, usize)> {
    let password = veracrypt_password(pass, &opts.keyfiles)?;
    let mut create = plan.create.clone();
    if let (Some(h), Some(size)) = (&opts.veracrypt.hidden, plan.hidden) {
        let hidden_password = veracrypt_password(&h.passphrase, &h.keyfiles)?;
        let same_pim = h.pim.filter(|&p| p != 0) == create.pim.filter(|&p| p != 0);
        if hidden_password == password && same_pim {
            return Err(refused(
                "the hidden volume's passphrase (with its keyfiles and PIM) must differ from \
                 the outer volume's: each would open the other's data"
                    .into(),
            ));
        }
        create.hidden = Some(tcrypt_create::Hidden {
            size,
            password: hidden_password,
            chain: create.chain.clone(),
            prf: create.prf,
            pim: h.pim,
        });
    }
    let store: &dyn Store = &*target.store;
    let made = tcrypt_create::create(store, &password, &create)?;
    let tc = tcrypt::open(
        store,
        tcrypt::Options {
            truecrypt: false,
            pim: create.pim,
            ..tcrypt::Options::default()
        },
    )?;
    let unlocked = tc.unlocked(store, made.key, 0)?;
    let kdf = tcrypt_header::KDFS
        .iter()
        .find(|k| {
            k.function == tcrypt_header::Function::Pbkdf2(create.prf)
                && k.made == tcrypt_header::Made::VeraCrypt
        })
        .ok_or_else(|| refused("no VeraCrypt KDF for this hash".into()))?;
    let chain = tcrypt_header::CHAINS
        .iter()
        .find(|c| c.name == create.chain)
        .ok_or_else(|| refused("unknown chain".into()))?;
    let hidden_pim = create.hidden.as_ref().map(|h| h.pim.filter(|&p| p != 0));
    Ok((
        VeracryptMade {
            cipher: chain.name,
            hash: create.prf.name(),
            iterations: kdf.rounds(create.pim.filter(|&p| p != 0)),
            hidden: made.hidden,
            hidden_iterations: hidden_pim.map(|p| kdf.rounds(p)),
        },
        unlocked,
        chain.key_len() * 8,
    ))
}

/// The stores a new volume is written to, claimed exclusively.
#[derive(Debug)]
pub struct Target {
    /// The image (the data, and the header unless it is detached).
    pub image: PathBuf,
    /// The image's store (shared with an engine that seals a new GELI provider).
    pub store: Arc<ImageStore>,
    created: bool,
    /// A detached header: its store, whether this made its file, its path.
    header: Option<(ImageStore, bool, PathBuf)>,
    claims: Claims,
}

impl Target {
    /// Opens the image at `image` for formatting, creating it with `size` bytes when
    /// missing, and `header` (a detached header's file, created empty when missing; the
    /// image itself given twice is an attached header), then claims them exclusively.
    /// Files made here are removed again when this fails.
    pub fn open(
        image: &Path,
        header: Option<&Path>,
        size: Option<u64>,
        cx: &Context,
    ) -> Result<Target> {
        let (store, created) = open_or_create(image, size, false, &cx.remote)?;
        let mut target = Target {
            image: image.to_path_buf(),
            store: Arc::new(store),
            created,
            header: None,
            claims: Claims::default(),
        };
        if let Some(h) = header {
            match open_or_create(h, None, true, &cx.remote) {
                Ok((hdr, made)) if !hdr.same_as(&target.store) => {
                    target.header = Some((hdr, made, h.to_path_buf()));
                }
                Ok(_) => {}
                Err(e) => {
                    target.discard();
                    return Err(e);
                }
            }
        }
        if let Err(e) = target.claim(cx) {
            target.discard();
            return Err(e);
        }
        Ok(target)
    }

    fn claim(&mut self, cx: &Context) -> Result<()> {
        let c = claim(&self.store, &self.image, Mode::Exclusive, cx.on_wait)?;
        self.claims.push(Some(c));
        if let Some((hdr, _, p)) = &self.header {
            let c = claim(hdr, p, Mode::Exclusive, cx.on_wait)?;
            self.claims.push(Some(c));
        }
        Ok(())
    }

    /// Whether the file the header goes to existed before (its contents will be
    /// overwritten: a front end asks first).
    pub fn existed(&self) -> bool {
        match &self.header {
            Some((_, made, _)) => !made,
            None => !self.created,
        }
    }

    /// Whether this made the image's file.
    pub fn created(&self) -> bool {
        self.created
    }

    /// Where the header goes: the image, or the detached header's file.
    pub fn header_path(&self) -> &Path {
        self.header.as_ref().map_or(&self.image, |(_, _, p)| p)
    }

    /// The header's store.
    pub fn header_store(&self) -> &ImageStore {
        self.header.as_ref().map_or(&*self.store, |(h, _, _)| h)
    }

    /// Whether the header is detached.
    pub fn detached(&self) -> bool {
        self.header.is_some()
    }

    /// Where the header and the data go.
    pub fn placement(&self) -> Placement<'_> {
        match &self.header {
            Some((hdr, _, _)) => Placement::Detached {
                header: hdr,
                data: &*self.store,
            },
            None => Placement::Attached(&*self.store),
        }
    }

    /// The signatures of every format found on the stores now (what formatting wipes).
    pub fn signatures(&self) -> Result<Vec<formats::Signature>> {
        let mut found = formats::signatures(&*self.store)?;
        if let Some((hdr, _, _)) = &self.header {
            found.extend(formats::signatures(hdr)?);
        }
        Ok(found)
    }

    /// The exclusive header lock, waiting (through `cx.on_wait`) for another process's.
    pub fn lock(&self, cx: &Context) -> Result<Guard> {
        lock_header(
            self.header_store(),
            self.header_path(),
            Mode::Exclusive,
            cx.on_wait,
        )
    }

    /// Gives up: the claims are released and the files this made are removed.
    pub fn discard(self) {
        let Target {
            image,
            store,
            created,
            header,
            claims,
        } = self;
        drop(claims);
        if let Some((hdr, true, p)) = header {
            drop(hdr);
            let _ = std::fs::remove_file(p);
        }
        if created {
            drop(store);
            let _ = std::fs::remove_file(image);
        }
    }
}

/// Seals every sector of a new authenticated GELI provider on `store` (zeros written
/// through the engine of `unlocked`, with their tags), so that reading any sector
/// succeeds; `done` is told the bytes sealed so far after each step of 64 MiB.
pub fn seal(store: &Arc<ImageStore>, unlocked: &Unlocked, done: &mut dyn FnMut(u64)) -> Result<()> {
    let vol = unlocked.engine(Box::new(Arc::clone(store)), EngineOptions::default())?;
    let total = vol.size();
    let failed = |e| Error::io(store.name(), e);
    let step = 64u64 << 20;
    let mut sealed = 0;
    while sealed < total {
        let n = step.min(total - sealed);
        vol.write_zeroes(sealed, n).map_err(failed)?;
        sealed += n;
        done(sealed);
    }
    vol.flush().map_err(failed)
}

/// The key size in bits of a LUKS volume with `cipher`: `bits` when given (a multiple of
/// 8), otherwise 512 for XTS (two AES-256 keys) and 256 for the other modes.
pub fn luks_key_bits(cipher: &str, bits: Option<usize>) -> Result<usize> {
    let xts = cipher
        .parse::<CipherSpec>()
        .is_ok_and(|s| s.mode == CipherMode::Xts);
    let bits = bits.unwrap_or(if xts { 512 } else { 256 });
    if !bits.is_multiple_of(8) {
        return Err(Error::invalid("the key size is in bits, a multiple of 8"));
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_claim_removes_the_files_made_and_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let hdr = dir.path().join("hdr");
        let cx = Context::default();
        let first = Target::open(&img, None, Some(1 << 20), &cx).unwrap();
        assert!(first.created() && !first.existed() && !first.detached());
        // In use by `first`: refused, and the header file it would have made is gone.
        let e = Target::open(&img, Some(&hdr), None, &cx).unwrap_err();
        assert_eq!(e.class(), crate::Class::InUse, "{e}");
        assert!(img.exists() && !hdr.exists());
        first.discard();
        assert!(!img.exists());
        let e = Target::open(&img, None, None, &cx).unwrap_err();
        assert!(e.message().contains("give a size"), "{e}");
        assert!(!img.exists());
    }

    /// Steps that record what they were asked and answer as set.
    #[derive(Default)]
    struct Recorded {
        refuse: bool,
        asked: Vec<Overwrite>,
        passphrases: usize,
        sealed: Vec<(u64, u64)>,
    }

    impl Steps for Recorded {
        type Error = Error;
        fn confirm(&mut self, what: &Overwrite) -> Result<()> {
            self.asked.push(what.clone());
            if self.refuse {
                return Err(Error::invalid("not confirmed"));
            }
            Ok(())
        }
        fn passphrase(&mut self) -> Result<SecretBytes> {
            self.passphrases += 1;
            Ok(SecretBytes::from_slice(b"pass"))
        }
        fn sealed(&mut self, done: u64, total: u64) {
            self.sealed.push((done, total));
        }
    }

    #[test]
    fn veracrypt_refuses_what_does_not_apply_before_anything_is_opened() {
        let vc = || CreateOptions {
            kind: Kind::Veracrypt,
            ..CreateOptions::default()
        };
        let default = plan_veracrypt(&vc()).unwrap();
        assert_eq!(
            (default.create.chain.as_str(), default.create.prf),
            ("aes", Prf::Sha512)
        );
        let cases: Vec<(CreateOptions, &str)> = vec![
            (
                CreateOptions {
                    header: Some("h".into()),
                    ..vc()
                },
                "header=",
            ),
            (
                CreateOptions {
                    sector_size: Some(4096),
                    ..vc()
                },
                "512-byte sectors",
            ),
            (
                CreateOptions {
                    pbkdf: Pbkdf {
                        kind: Some("argon2id".into()),
                        ..Pbkdf::default()
                    },
                    ..vc()
                },
                "Argon2id",
            ),
            (
                CreateOptions {
                    pbkdf: Pbkdf {
                        iterations: Some(1000),
                        ..Pbkdf::default()
                    },
                    ..vc()
                },
                "PIM",
            ),
            (
                CreateOptions {
                    cipher: Some("serpent-twofish-aes".into()),
                    key_bits: Some(512),
                    ..vc()
                },
                "1536 bits",
            ),
            (
                CreateOptions {
                    pbkdf: Pbkdf {
                        hash: Some("md5".into()),
                        ..Pbkdf::default()
                    },
                    ..vc()
                },
                "unknown VeraCrypt hash",
            ),
            (
                CreateOptions {
                    veracrypt: VeracryptOptions {
                        pim: Some(0),
                        hidden: None,
                    },
                    ..vc()
                },
                "positive",
            ),
        ];
        for (opts, want) in cases {
            let err = plan(&opts).err().expect(want).to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        // VeraCrypt's own options on another format.
        let luks = CreateOptions {
            veracrypt: VeracryptOptions {
                pim: Some(5),
                hidden: None,
            },
            ..CreateOptions::default()
        };
        let err = plan(&luks).err().unwrap().to_string();
        assert!(err.contains("type=\"veracrypt\""), "{err}");
        assert_eq!(veracrypt_prf("Streebog512").unwrap(), Prf::Streebog512);
        assert_eq!(veracrypt_prf("blake2s").unwrap(), Prf::Blake2s256);
    }

    fn fast(kind: Kind) -> CreateOptions {
        CreateOptions {
            kind,
            size: Some(4 << 20),
            pbkdf: Pbkdf {
                kind: Some("pbkdf2".into()),
                iterations: Some(1000),
                ..Pbkdf::default()
            },
            ..CreateOptions::default()
        }
    }

    #[test]
    fn create_asks_before_overwriting_and_keeps_an_image_it_did_not_make() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let cx = Context::default();
        let mut steps = Recorded::default();
        let mut luks2 = fast(Kind::Luks2);
        luks2.size = Some(20 << 20);
        let made = create(&img, &luks2, &cx, &mut steps).unwrap();
        // A new file is not asked about; LUKS2's default sectors are 4096 bytes.
        assert!(steps.asked.is_empty() && steps.passphrases == 1);
        assert_eq!((made.key_bits, made.unlocked.sector_size), (512, 4096));
        assert!(matches!(made.made, Made::Luks(_)) && !made.detached);
        let before = std::fs::read(&img).unwrap();
        // Over it, GELI asks, naming the LUKS header it would wipe; refused, nothing
        // changes and the file stays.
        let mut no = Recorded {
            refuse: true,
            ..Recorded::default()
        };
        let mut geli = fast(Kind::Geli);
        geli.size = None;
        let e = create(&img, &geli, &cx, &mut no).unwrap_err();
        assert_eq!(e.message(), "not confirmed");
        assert_eq!(no.passphrases, 0);
        let asked = &no.asked[0];
        assert!(asked.last_sector && asked.path == img);
        assert_eq!(asked.signatures[0].what, "LUKS header", "{asked:?}");
        assert_eq!(std::fs::read(&img).unwrap(), before);
    }

    #[test]
    fn an_authenticated_geli_provider_is_sealed_with_progress_unless_no_wipe() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("g");
        let cx = Context::default();
        let mut opts = fast(Kind::Geli);
        opts.integrity = Some("hmac-sha256".into());
        let mut steps = Recorded::default();
        let made = create(&img, &opts, &cx, &mut steps).unwrap();
        let total = made.unlocked.data_size;
        assert_eq!(steps.sealed.first(), Some(&(0, total)));
        assert_eq!(steps.sealed.last(), Some(&(total, total)));
        assert_eq!(made.key_bits, 128);
        opts.geli.no_wipe = true;
        let mut steps = Recorded::default();
        std::fs::remove_file(&img).unwrap();
        create(&img, &opts, &cx, &mut steps).unwrap();
        assert!(steps.sealed.is_empty());
    }

    #[test]
    fn refusals_come_before_anything_is_made_and_name_options_as_told() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let cx = Context::default();
        let refused = |opts: CreateOptions, class: crate::Class, words: &str| {
            let e = create(&img, &opts, &cx, &mut Recorded::default()).unwrap_err();
            assert_eq!(e.class(), class, "{e}");
            assert!(e.message().contains(words), "{e}");
            assert!(!img.exists(), "{words}: nothing is made");
        };
        use crate::Class::{InvalidArgument, Unsupported};
        let with = |f: &dyn Fn(&mut CreateOptions)| {
            let mut o = fast(Kind::Luks2);
            f(&mut o);
            o
        };
        refused(
            with(&|o| o.key_bits = Some(100 + 1)),
            InvalidArgument,
            "multiple of 8",
        );
        refused(
            with(&|o| o.rbd_object_size = Some(3 << 20)),
            InvalidArgument,
            "rbd_object_size= 3145728: an rbd object size is a power of two",
        );
        refused(
            with(&|o| o.integrity = Some("hmac-sha256".into())),
            InvalidArgument,
            "integrity= and no_wipe= are for GELI (type=\"geli\") only",
        );
        refused(
            with(&|o| o.cipher = Some("rot13".into())),
            Unsupported,
            "unsupported cipher \"rot13\"",
        );
        refused(
            with(&|o| o.pbkdf.iter_time_ms = Some(0)),
            InvalidArgument,
            "iter_time= must be at least 1",
        );
        let flag = |o: Opt| match o {
            Opt::Header => "--header",
            _ => "--other",
        };
        refused(
            with(&|o| {
                o.kind = Kind::Geli;
                o.header = Some(dir.path().join("hdr"));
                o.names = flag;
            }),
            InvalidArgument,
            "last sector: --header does not apply",
        );
        refused(
            with(&|o| {
                o.kind = Kind::Geli;
                o.cipher = Some("blowfish".into());
            }),
            Unsupported,
            "GELI cipher \"blowfish\" is not supported",
        );
        refused(
            with(&|o| {
                o.kind = Kind::Geli;
                o.geli.no_passphrase = true;
            }),
            InvalidArgument,
            "no passphrase needs at least one keyfiles=",
        );
        refused(
            with(&|o| {
                o.kind = Kind::Geli;
                o.pbkdf.kind = Some("argon2id".into());
            }),
            InvalidArgument,
            "pbkdf2 (sha512) only",
        );
    }

    #[test]
    fn luks_key_sizes_default_by_mode_and_are_whole_bytes() {
        assert_eq!(luks_key_bits("aes-xts-plain64", None).unwrap(), 512);
        assert_eq!(luks_key_bits("aes-cbc-essiv:sha256", None).unwrap(), 256);
        assert_eq!(luks_key_bits("aes-xts-plain64", Some(256)).unwrap(), 256);
        assert!(luks_key_bits("aes-xts-plain64", Some(255)).is_err());
    }
}

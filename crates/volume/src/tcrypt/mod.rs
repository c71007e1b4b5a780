//! VeraCrypt and TrueCrypt volumes (cryptsetup's TCRYPT): existing ones opened, and normal
//! VeraCrypt volumes made ([`create`]).
//!
//! **No signature.** A TCRYPT header is 64 bytes of salt and 448 bytes that look random
//! until decrypted: nothing tells one from random data without the passphrase. So this
//! format is never detected: [`crate::formats::read_as`] reads it only when asked for
//! (`--type tcrypt` or `--type veracrypt`, as cryptsetup's `--type tcrypt`), and the
//! header read here holds no more than where to look and how. [`Format::unlock_key`] does
//! the work: for each header place the options allow (the normal header at 0, the hidden
//! one at 64 KiB or, TrueCrypt 5, 1536 bytes before the end, the backup headers near the
//! end, the system header at 31744), for each KDF of [`header::KDFS`] that may apply
//! (hash hint, PIM, VeraCrypt or TrueCrypt, system), derive 192 bytes with PBKDF2 or
//! VeraCrypt's Argon2id from the passphrase (with keyfiles: the CRC-32 keyfile pool plus the
//! passphrase) and the header's salt, then try every
//! XTS cipher chain of [`header::CHAINS`] (cipher hint) on bytes 64..512 as data unit 0,
//! until the magic (`VERA`/`TRUE`) and both CRC-32s are right. The decrypted header is
//! what `unlock_key` returns as the "key"; `dump` shows its fields after an unlock.
//!
//! **Data.** 512-byte XTS data units whose numbers count from the start of the host
//! (the first data unit of a normal volume, at 128 KiB, is unit 256), as cryptsetup maps
//! them. A single-AES volume goes to the engine as `aes-xts-plain64` under its own key.
//! Chains and the other ciphers are decrypted by a store under the engine
//! (`Chained`) and handed to it encrypted again under a random AES-XTS key of this
//! process, so the engine keeps its many-sectors-per-call AES path and never sees the
//! chain; writes take the way back (AES-XTS decrypted, the chain encrypted). Normal and
//! hidden volumes (from the normal or the backup header) are written; system volumes are
//! read-only here, their writes refused by that store.
//!
//! **Hidden-volume protection** ([`Options::protect`], as VeraCrypt's "protect hidden
//! volume"): an outer volume opened with the hidden volume's secret too. Once the outer
//! volume is unlocked, the hidden volume's header is found with that secret (the same
//! search as an unlock with `--tcrypt-hidden`: every KDF and chain allowed) and its data
//! range read from it; a secret that opens no hidden header refuses the whole open (the
//! outer volume is never served unprotected by mistake). The engine then refuses every
//! write, zeroing or discard that touches the hidden data, whole and before any of it is
//! written (`PermissionDenied`, EPERM over NBD: [`crate::engine::WriteFence`]); the store
//! under the engine refuses host writes into the hidden data and both hidden header slots
//! as well. Reads stay allowed. Without protection, as in VeraCrypt, writing an outer
//! volume can overwrite a hidden volume inside it.
//!
//! **Argon2id** (VeraCrypt 1.26.27 and later; [`header::argon2id_costs`]) is memory-hard:
//! one try holds up to 1 GiB (416 MiB without a PIM) while it runs. The KDFs are tried one
//! after another on the calling thread, so a search never holds two such costs at once;
//! `hash: Some("argon2id")` tries it alone, any other hash hint skips it.
//!
//! **TrueCrypt 4.3 and older** ([`legacy`]): with TrueCrypt's KDFs (and PBKDF2-SHA-1, which
//! only they use) the legacy CBC and LRW chains are tried after the XTS ones. Such a volume
//! opens read-only: its data goes through `LegacyStore`, which decrypts each sector with the
//! legacy chain and hands it to the engine under a random AES-XTS key, and refuses every
//! write; the unlocked volume is read-only with that reason. Their headers have no volume
//! size (the data runs to the end of the host) and the hidden volume ends 1536 bytes
//! before the end, as cryptsetup maps them.
//!
//! Not supported: writing system volumes and TrueCrypt 4.3 and older volumes, changing
//! headers. VeraCrypt volumes, with a hidden volume on request, are made by
//! [`create::create`] (PBKDF2 only: never with Argon2id).

pub mod create;
pub mod header;
pub mod legacy;

use crate::engine::WriteFence;
use crate::error::{Error, Result};
use crate::format::dump::{Field, Report};
use crate::format::{Format, Piece, Unlocked, VolumeInfo};
use crate::kdf::{Kdf, KdfKind};
use crate::layout::IvRule;
use crate::store::{self, Store};
use header::{Chain, Fields, Made, CHAINS, HEADER_LEN, KDFS, KEYS_AT, SALT_LEN};
use sectorcrypt_crypto::cascade::{Cascade, Layer};
use sectorcrypt_crypto::dmcrypt::{CipherMode, CipherSpec, IvMode};
use std::any::Any;
use std::sync::{Arc, Mutex};
use zeroize::Zeroizing;

/// The format's name.
pub const NAME: &str = "tcrypt";
/// XTS data units are 512 bytes, whatever the header's sector size.
const UNIT: u64 = 512;

/// How to look for the header (cryptsetup's TCRYPT options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Try TrueCrypt's KDFs (not with `--type veracrypt`).
    pub truecrypt: bool,
    /// Try VeraCrypt's KDFs.
    pub veracrypt: bool,
    /// VeraCrypt's PIM (`--veracrypt-pim`): only VeraCrypt's KDFs, with its iterations.
    pub pim: Option<u32>,
    /// The hidden volume's header (`--tcrypt-hidden`).
    pub hidden: bool,
    /// The backup header near the end (`--tcrypt-backup`).
    pub backup: bool,
    /// A system-encrypted drive or partition (`--tcrypt-system`).
    pub system: bool,
    /// Only KDFs whose hash name contains this (cryptsetup's `--hash`).
    pub hash: Option<String>,
    /// Only chains whose name contains this (cryptsetup's `--cipher`).
    pub cipher: Option<String>,
    /// Open an outer volume with its hidden volume protected: writes into it refused.
    pub protect: Option<Protect>,
}

/// The hidden volume's secret, given to protect it while its outer volume is written.
#[derive(Clone, PartialEq, Eq)]
pub struct Protect {
    /// The hidden volume's passphrase.
    pub passphrase: Zeroizing<Vec<u8>>,
    /// Its keyfiles, in order.
    pub keyfiles: Vec<Zeroizing<Vec<u8>>>,
    /// Its PIM (only VeraCrypt's KDFs are tried then).
    pub pim: Option<u32>,
}

impl std::fmt::Debug for Protect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Protect")
            .field("keyfiles", &self.keyfiles.len())
            .field("pim", &self.pim)
            .finish_non_exhaustive()
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            truecrypt: true,
            veracrypt: true,
            pim: None,
            hidden: false,
            backup: false,
            system: false,
            hash: None,
            cipher: None,
            protect: None,
        }
    }
}

/// What an unlock found: the decrypted header, and how.
#[derive(Debug, Clone)]
struct Found {
    at: u64,
    kdf: usize,
    chain: usize,
    fields: Fields,
}

/// A VeraCrypt or TrueCrypt volume's header, before and after an unlock.
#[derive(Debug)]
pub struct Tcrypt {
    options: Options,
    keyfiles: Vec<Zeroizing<Vec<u8>>>,
    /// Set by the last successful [`Format::unlock_key`] (for `dump`).
    found: Mutex<Option<Found>>,
}

/// Reads a TCRYPT "header" of `store`: checks the options and that the store can hold a
/// header where they look. Nothing is decrypted until an unlock.
pub fn open(store: &dyn Store, options: Options) -> Result<Tcrypt> {
    if !options.truecrypt && !options.veracrypt {
        return Err(Error::invalid(
            "neither TrueCrypt nor VeraCrypt KDFs allowed",
        ));
    }
    if options.pim.is_some() && !options.veracrypt {
        return Err(Error::invalid(
            "a PIM is VeraCrypt's: it needs VeraCrypt KDFs",
        ));
    }
    if options.pim == Some(0) {
        return Err(Error::invalid("a PIM is a positive number"));
    }
    if options.system && (options.hidden || options.backup) {
        return Err(Error::unsupported(
            "system encryption has no backup header here, and hidden operating systems are \
             not supported: --tcrypt-system takes neither --tcrypt-hidden nor --tcrypt-backup",
        ));
    }
    if let Some(p) = &options.protect {
        if options.hidden || options.system {
            return Err(Error::invalid(
                "hidden-volume protection guards a hidden volume while its outer volume is \
                 written: not with --tcrypt-hidden or --tcrypt-system",
            ));
        }
        if p.pim == Some(0) {
            return Err(Error::invalid("a PIM is a positive number"));
        }
        if p.pim.is_some() && !options.veracrypt {
            return Err(Error::invalid(
                "a PIM is VeraCrypt's: it needs VeraCrypt KDFs",
            ));
        }
        if p.passphrase.is_empty() && p.keyfiles.is_empty() {
            return Err(Error::invalid(
                "hidden-volume protection needs the hidden volume's passphrase, keyfiles or \
                 both: none given",
            ));
        }
    }
    if let Some(c) = &options.cipher {
        let xts = CHAINS.iter().map(|c| c.name);
        if !xts
            .clone()
            .chain(legacy::CHAINS.iter().map(|c| c.name))
            .any(|n| n.contains(c.as_str()))
        {
            let names: Vec<&str> = xts.collect();
            return Err(Error::unsupported(format!(
                "no TCRYPT cipher chain matches {c:?} (supported, in XTS mode: {}; TrueCrypt \
                 4.3 and older, in CBC or LRW mode, read-only: these and blowfish_le, cast5, \
                 des3_ede)",
                names.join(", ")
            )));
        }
    }
    if let Some(h) = &options.hash {
        if !KDFS.iter().any(|k| k.name().contains(h.as_str())) {
            return Err(Error::unsupported(format!(
                "no TCRYPT KDF hash matches {h:?} (supported: sha512, sha256, whirlpool, \
                 ripemd160, stribog512, blake2s-256, argon2id, and sha1 for TrueCrypt 4.3 and \
                 older)"
            )));
        }
    }
    let t = Tcrypt {
        options,
        keyfiles: Vec::new(),
        found: Mutex::new(None),
    };
    let size = store::size(store)?;
    let places = t.places(size);
    if places.is_empty() {
        return Err(Error::truncated(format!(
            "{} has {size} bytes, too few for a TCRYPT volume with a header where asked",
            store.name()
        )));
    }
    Ok(t)
}

impl Tcrypt {
    /// Where the header may be in a store of `size` bytes, in the order tried.
    fn places(&self, size: u64) -> Vec<u64> {
        let o = &self.options;
        let from_end = |n: u64| size.checked_sub(n);
        let places: Vec<Option<u64>> = if o.system {
            vec![Some(header::SYSTEM_HEADER_AT)]
        } else if o.hidden && o.backup {
            vec![from_end(header::BACKUP_HIDDEN_FROM_END)]
        } else if o.hidden {
            // TrueCrypt 5's place holds a header only TrueCrypt's KDFs open: not looked at
            // with VeraCrypt's alone (it would double a search that cannot succeed).
            vec![
                Some(header::HIDDEN_HEADER_AT),
                from_end(header::HIDDEN_LEGACY_FROM_END).filter(|_| o.truecrypt),
            ]
        } else if o.backup {
            vec![from_end(header::BACKUP_FROM_END)]
        } else {
            vec![Some(0)]
        };
        places
            .into_iter()
            .flatten()
            .filter(|&at| {
                at.checked_add(HEADER_LEN as u64)
                    .is_some_and(|end| end <= size)
            })
            .collect()
    }

    /// Whether KDF row `k` is tried with these options.
    fn kdf_allowed(&self, k: &header::Kdf) -> bool {
        let o = &self.options;
        let hash_ok = o.hash.as_deref().is_none_or(|h| k.name().contains(h));
        let kind_ok = match k.made {
            Made::TrueCrypt | Made::TrueCryptLegacy => o.truecrypt && o.pim.is_none(),
            Made::VeraCrypt => o.veracrypt,
            Made::VeraCryptBoot => o.veracrypt && o.system,
        };
        hash_ok && kind_ok
    }

    fn chains(&self) -> impl Iterator<Item = (usize, &'static Chain)> + '_ {
        CHAINS.iter().enumerate().filter(|(_, c)| {
            self.options
                .cipher
                .as_deref()
                .is_none_or(|want| c.name.contains(want))
        })
    }

    /// The legacy chains tried (TrueCrypt's KDFs only), with their key indices.
    fn legacy_chains(&self) -> impl Iterator<Item = (usize, &'static legacy::Chain)> + '_ {
        legacy::CHAINS
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                self.options
                    .cipher
                    .as_deref()
                    .is_none_or(|want| c.name.contains(want))
            })
            .map(|(i, c)| (CHAINS.len() + i, c))
    }

    /// The decrypted header of `raw` under the derived key `dk` with the legacy `chain`,
    /// when right.
    fn try_legacy(
        raw: &[u8; HEADER_LEN],
        dk: &[u8],
        chain: &'static legacy::Chain,
    ) -> Result<Option<Box<[u8; HEADER_LEN]>>> {
        let keys = legacy::Keys::new(chain, dk)?;
        let mut h = Box::new(*raw);
        keys.decrypt_header(&mut h[SALT_LEN..]);
        if Fields::parse(&h).is_some() {
            return Ok(Some(h));
        }
        zeroize::Zeroize::zeroize(&mut h[..]);
        Ok(None)
    }

    /// The decrypted header of `raw` under the derived key `dk` with `chain`, when right.
    fn try_chain(
        raw: &[u8; HEADER_LEN],
        dk: &[u8],
        chain: &Chain,
    ) -> Result<Option<Box<[u8; HEADER_LEN]>>> {
        let cascade = match Cascade::new(chain.layers, &dk[..chain.key_len()]) {
            Ok(c) => c,
            // Equal AES halves: not a key VeraCrypt makes.
            Err(sectorcrypt_crypto::Error::Key(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut h = Box::new(*raw);
        cascade.decrypt(0, HEADER_LEN - SALT_LEN, &mut h[SALT_LEN..])?;
        if Fields::parse(&h).is_some() {
            return Ok(Some(h));
        }
        zeroize::Zeroize::zeroize(&mut h[..]);
        Ok(None)
    }

    fn found(&self) -> Option<Found> {
        self.found.lock().ok().and_then(|f| f.clone())
    }

    /// The data's place: (offset, bytes) in the host, from the decrypted header.
    fn data_range(&self, f: &Fields, size: u64) -> Result<(u64, u64)> {
        let (offset, len) = if self.options.system {
            // As cryptsetup maps a drive or partition image without partition data: from
            // the encrypted area's start to the end of the image (an image of the first
            // part of a drive holds less than the whole encrypted area), never past the
            // area.
            let left = size.saturating_sub(f.mk_offset);
            (f.mk_offset, f.mk_size.min(left - left % UNIT))
        } else if self.options.hidden && f.version <= 3 {
            let off = size
                .checked_sub(f.hidden_size)
                .and_then(|s| s.checked_sub(header::HIDDEN_LEGACY_FROM_END))
                .ok_or_else(|| Error::corrupt("the hidden volume is larger than its host"))?;
            (off, f.hidden_size)
        } else if self.options.hidden {
            (f.mk_offset, f.hidden_size)
        } else if f.volume_size == 0 {
            // TrueCrypt 4.3 and older headers have no volume size: the data runs to the
            // end of the host, as cryptsetup maps them.
            let left = size.saturating_sub(f.mk_offset);
            (f.mk_offset, left - left % UNIT)
        } else {
            (f.mk_offset, f.volume_size)
        };
        if !offset.is_multiple_of(UNIT) || !len.is_multiple_of(UNIT) || len == 0 {
            return Err(Error::corrupt(format!(
                "the TCRYPT header places the data at {offset} for {len} bytes: not whole \
                 512-byte units"
            )));
        }
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok((offset, len)),
            _ => Err(Error::truncated(format!(
                "the TCRYPT volume's data is bytes {offset}..{} but the image has {size} bytes",
                offset.saturating_add(len)
            ))),
        }
    }
}

impl Tcrypt {
    /// The host byte ranges of the hidden volume `p` opens inside this outer volume of a
    /// store of `size` bytes: its data, and both hidden header slots (64 KiB after the
    /// start, the last 64 KiB). A secret that opens no hidden header is refused.
    fn hidden_area(&self, store: &dyn Store, p: &Protect, size: u64) -> Result<Vec<(u64, u64)>> {
        let finder = Tcrypt {
            options: Options {
                hidden: true,
                pim: p.pim,
                hash: None,
                cipher: None,
                protect: None,
                ..self.options.clone()
            },
            keyfiles: p.keyfiles.clone(),
            found: Mutex::new(None),
        };
        let key = match finder.unlock_key(store, &p.passphrase, None) {
            Ok((key, _)) => key,
            Err(Error::WrongPassphrase) => {
                return Err(Error::invalid(format!(
                    "hidden-volume protection: the hidden volume's passphrase (with its \
                     keyfiles and PIM, if any) opens no hidden volume header in {}; nothing \
                     was opened (the outer volume is not served unprotected)",
                    store.name()
                )))
            }
            Err(e) => return Err(e),
        };
        let (h, _) = split_key(&key)?;
        let fields =
            Fields::parse(h).ok_or_else(|| Error::invalid("not a decrypted TCRYPT header"))?;
        let (offset, len) = finder.data_range(&fields, size)?;
        let slot = header::HIDDEN_HEADER_AT;
        Ok(vec![
            (offset, offset + len),
            (slot, slot + header::BACKUP_HIDDEN_FROM_END),
            (size - header::BACKUP_HIDDEN_FROM_END, size),
        ])
    }
}

/// A chain a header was found with: an XTS chain of VeraCrypt and TrueCrypt 5+, or a
/// legacy (CBC or LRW) chain of TrueCrypt 4.3 and older.
#[derive(Debug, Clone, Copy)]
enum AnyChain {
    Xts(&'static Chain),
    Legacy(&'static legacy::Chain),
}

impl AnyChain {
    /// The chain of index `i`: the XTS chains, then the legacy ones.
    fn get(i: usize) -> Option<AnyChain> {
        match CHAINS.get(i) {
            Some(c) => Some(AnyChain::Xts(c)),
            None => legacy::CHAINS.get(i - CHAINS.len()).map(AnyChain::Legacy),
        }
    }

    fn name(self) -> &'static str {
        match self {
            AnyChain::Xts(c) => c.name,
            AnyChain::Legacy(c) => c.name,
        }
    }

    fn mode(self) -> &'static str {
        match self {
            AnyChain::Xts(_) => "xts-plain64",
            AnyChain::Legacy(c) => c.mode_name,
        }
    }

    fn key_bits(self) -> usize {
        match self {
            AnyChain::Xts(c) => c.key_len() * 8,
            AnyChain::Legacy(c) => c.key_len() * 8,
        }
    }
}

/// The decrypted header and the chain, as [`Format::unlock_key`] hands them to
/// [`Format::unlocked`]: 512 bytes of header, then the chain's index.
fn split_key(key: &[u8]) -> Result<(&[u8; HEADER_LEN], AnyChain)> {
    let bad = || Error::invalid("not a TCRYPT key (a decrypted header and its chain)");
    if key.len() != HEADER_LEN + 1 {
        return Err(bad());
    }
    let h: &[u8; HEADER_LEN] = key[..HEADER_LEN].try_into().map_err(|_| bad())?;
    let chain = AnyChain::get(usize::from(key[HEADER_LEN])).ok_or_else(bad)?;
    Ok((h, chain))
}

impl Format for Tcrypt {
    fn name(&self) -> &'static str {
        NAME
    }

    fn uuid(&self) -> Option<&str> {
        None
    }

    fn active_keyslots(&self) -> Result<Vec<usize>> {
        Ok(vec![0])
    }

    fn keyslot_kdf(&self, slot: usize) -> Result<Kdf> {
        let _ = slot;
        Err(Error::unsupported(
            "a TCRYPT header names no KDF: it is found by trying them (see dump after an \
             unlock)",
        ))
    }

    fn kdf_kinds(&self) -> &'static [KdfKind] {
        &[]
    }

    fn unlock_key(
        &self,
        store: &dyn Store,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(Zeroizing<Vec<u8>>, usize)> {
        if slot.is_some_and(|s| s != 0) {
            return Err(crate::format::no_keyslot(slot));
        }
        if passphrase.is_empty() && self.keyfiles.is_empty() {
            return Err(Error::invalid(
                "a TCRYPT volume opens with a passphrase, keyfiles or both: none given",
            ));
        }
        let password = header::password(passphrase, &self.keyfiles, self.options.veracrypt)?;
        let size = store::size(store)?;
        for at in self.places(size) {
            let mut raw = Zeroizing::new([0u8; HEADER_LEN]);
            store::read_exact(store, &mut raw[..], at, "TCRYPT header")?;
            for (k, kdf) in KDFS.iter().enumerate() {
                if !self.kdf_allowed(kdf) {
                    continue;
                }
                let dk = kdf.derive(&password, &raw[..SALT_LEN], self.options.pim)?;
                let xts = self
                    .chains()
                    .filter(|_| kdf.made != Made::TrueCryptLegacy)
                    .map(|(c, chain)| (c, AnyChain::Xts(chain)));
                let old = self
                    .legacy_chains()
                    .filter(|_| matches!(kdf.made, Made::TrueCrypt | Made::TrueCryptLegacy))
                    .map(|(c, chain)| (c, AnyChain::Legacy(chain)));
                for (c, chain) in xts.chain(old) {
                    let found = match chain {
                        AnyChain::Xts(chain) => Tcrypt::try_chain(&raw, &dk, chain)?,
                        AnyChain::Legacy(chain) => Tcrypt::try_legacy(&raw, &dk, chain)?,
                    };
                    if let Some(mut h) = found {
                        let fields = Fields::parse(&h).ok_or_else(|| {
                            Error::corrupt("the TCRYPT header changed while read")
                        })?;
                        let mut key = Zeroizing::new(Vec::with_capacity(HEADER_LEN + 1));
                        key.extend_from_slice(&h[..]);
                        key.push(c as u8);
                        zeroize::Zeroize::zeroize(&mut h[..]);
                        if let Ok(mut f) = self.found.lock() {
                            *f = Some(Found {
                                at,
                                kdf: k,
                                chain: c,
                                fields,
                            });
                        }
                        return Ok((key, 0));
                    }
                }
            }
        }
        Err(Error::WrongPassphrase)
    }

    fn unlocked(
        &self,
        store: &dyn Store,
        key: Zeroizing<Vec<u8>>,
        keyslot: usize,
    ) -> Result<Unlocked> {
        let (h, chain) = split_key(&key)?;
        let fields =
            Fields::parse(h).ok_or_else(|| Error::invalid("not a decrypted TCRYPT header"))?;
        let size = store::size(store)?;
        let (offset, len) = self.data_range(&fields, size)?;
        let chain = match chain {
            AnyChain::Xts(c) => c,
            AnyChain::Legacy(c) => {
                return Tcrypt::unlocked_legacy(h, &fields, c, (offset, len), keyslot)
            }
        };
        let info = VolumeInfo {
            cipher: format!("{}-xts-plain64", chain.name),
            sector_size: UNIT as usize,
            iv: IvRule::Units512 {
                first: offset / UNIT,
            },
            data_offset: offset,
            data_size: len,
        };
        let spec = CipherSpec::aes(CipherMode::Xts, IvMode::Plain64);
        // The master keys: every layer's primary key, then every secondary key.
        let master = Zeroizing::new(h[KEYS_AT..KEYS_AT + chain.key_len()].to_vec());
        let aes_only = chain.layers == [Layer::Aes];
        let engine_key = if aes_only {
            master.clone()
        } else {
            let mut k = Zeroizing::new(vec![0u8; 64]);
            crate::random(&mut k)?;
            k
        };
        let layers = chain.layers;
        let writable = !self.options.system;
        let protected = match &self.options.protect {
            Some(p) => self.hidden_area(store, p, size)?,
            None => Vec::new(),
        };
        // The hidden data as plaintext offsets of this volume (the header slots lie
        // outside its data area: only the store below sees them).
        let fence: Vec<std::ops::Range<u64>> = protected
            .iter()
            .map(|&(start, end)| {
                let clip = |at: u64| at.clamp(offset, offset + len) - offset;
                clip(start)..clip(end)
            })
            .collect();
        let (map_master, map_engine) = (master.clone(), engine_key.clone());
        let unlocked = Unlocked::new(info, spec, master, keyslot)
            .with_engine_key(&engine_key)
            .with_store_map(Arc::new(move |inner| -> Result<Box<dyn Store>> {
                Ok(Box::new(Chained::new(
                    inner,
                    layers,
                    &map_master,
                    &map_engine,
                    aes_only,
                    writable,
                    protected.clone(),
                )?))
            }));
        Ok(if self.options.protect.is_some() {
            unlocked.with_fence(WriteFence::new(fence, "the protected hidden volume"))
        } else {
            unlocked
        })
    }

    fn volume_info(&self, store: &dyn Store) -> Result<VolumeInfo> {
        let found = self.found().ok_or_else(|| {
            Error::unsupported(
                "a TCRYPT volume shows where its data is only once unlocked (its header is \
                 encrypted whole)",
            )
        })?;
        let size = store::size(store)?;
        let (offset, len) = self.data_range(&found.fields, size)?;
        let chain =
            AnyChain::get(found.chain).ok_or_else(|| Error::invalid("not a TCRYPT chain"))?;
        Ok(VolumeInfo {
            cipher: format!("{}-{}", chain.name(), chain.mode()),
            sector_size: UNIT as usize,
            iv: IvRule::Units512 {
                first: offset / UNIT,
            },
            data_offset: offset,
            data_size: len,
        })
    }

    fn verify_key(&self, key: &[u8]) -> Result<bool> {
        Ok(split_key(key)
            .ok()
            .is_some_and(|(h, _)| Fields::parse(h).is_some()))
    }

    fn unchangeable(&self) -> Option<Error> {
        Some(not_changed())
    }

    fn set_keyfiles(&mut self, files: Vec<Zeroizing<Vec<u8>>>) -> Result<()> {
        self.keyfiles = files;
        Ok(())
    }

    /// Keyfiles alone (an empty passphrase) open a volume made without a password.
    fn set_passphrase_component(&mut self, used: bool) -> Result<()> {
        let _ = used;
        Ok(())
    }

    fn backup_pieces(&self, image_size: u64) -> Vec<Piece> {
        let _ = image_size;
        Vec::new()
    }

    /// The fields `cryptsetup tcryptDump` prints, with its labels and forms, then where
    /// the header was found and the iterations.
    fn report(&self) -> Report {
        let mut fields = Vec::new();
        let mut title = "TCRYPT header information.";
        match self.found() {
            None => fields.push(Field::new(
                "Header",
                "encrypted (give the passphrase to see it)",
            )),
            Some(f) => {
                let h = &f.fields;
                let kdf = &KDFS[f.kdf];
                let chain = AnyChain::get(f.chain);
                if &h.magic == b"VERA" {
                    title = "VERACRYPT header information.";
                }
                fields.extend([
                    Field::new("Version", h.version),
                    Field::new(
                        "Driver req.",
                        format!("{:x}.{:x}", h.min_program >> 8, h.min_program & 0xff),
                    ),
                    Field::new("Flags", format!("0x{:x}", h.flags)),
                    Field::new("Sector size", format!("{} [bytes]", h.sector_size)),
                    Field::new("MK offset", format!("{} [bytes]", h.mk_offset)),
                ]);
                if h.volume_size != 0 {
                    fields.push(Field::new(
                        "Volume size",
                        format!("{} [bytes]", h.volume_size),
                    ));
                }
                if h.hidden_size != 0 {
                    fields.push(Field::new(
                        "Hidden size",
                        format!("{} [bytes]", h.hidden_size),
                    ));
                }
                let pim = self.options.pim;
                match kdf.memory_kib(pim) {
                    None => fields.extend([
                        Field::new("PBKDF", "PBKDF2"),
                        Field::new("PBKDF2 hash", kdf.name()),
                    ]),
                    Some(_) => fields.push(Field::new("PBKDF", "Argon2id")),
                }
                fields.extend([
                    Field::new("Cipher chain", chain.map_or("?", AnyChain::name)),
                    Field::new("Cipher mode", chain.map_or("?", AnyChain::mode)),
                    Field::new("MK bits", chain.map_or(0, AnyChain::key_bits)),
                    Field::new("Header offset", format!("{} [bytes]", f.at)),
                ]);
                match kdf.memory_kib(pim) {
                    None => fields.push(Field::new("Iterations", kdf.rounds(pim))),
                    // As luksDump shows an Argon2 keyslot's costs.
                    Some(kib) => fields.extend([
                        Field::new("Time cost", kdf.rounds(pim)),
                        Field::new("Memory", format!("{kib} [kB]")),
                        Field::new("Threads", 1),
                    ]),
                }
            }
        }
        Report {
            title,
            blank_after_title: false,
            value_column: 15,
            fields,
            blank_after_fields: false,
            sections: Vec::new(),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match self.found() {
            None => serde_json::json!({ "decrypted": false }),
            Some(f) => {
                let h = &f.fields;
                let kdf = &KDFS[f.kdf];
                let pim = self.options.pim;
                let chain = AnyChain::get(f.chain);
                let mut json = serde_json::json!({
                    "decrypted": true,
                    "header_offset": f.at,
                    "magic": h.magic_str(),
                    "version": h.version,
                    "min_program_version": h.min_program,
                    "sector_size": h.sector_size,
                    "mk_offset": h.mk_offset,
                    "mk_size": h.mk_size,
                    "volume_size": h.volume_size,
                    "hidden_volume_size": h.hidden_size,
                    "flags": h.flags,
                    "system": h.flags & 1 != 0,
                    "kdf": "pbkdf2",
                    "hash": kdf.name(),
                    "iterations": kdf.rounds(pim),
                    "pim": pim,
                    "cipher": chain.map_or("?", AnyChain::name),
                    "cipher_mode": chain.map_or("?", AnyChain::mode),
                    "key_bits": chain.map_or(0, AnyChain::key_bits),
                    "read_only": matches!(chain, Some(AnyChain::Legacy(_))),
                    "time": null,
                    "memory": null,
                    "cpus": null,
                });
                if let Some(kib) = kdf.memory_kib(pim) {
                    // Argon2id: no hash; the passes, memory (KiB) and lanes under a LUKS2
                    // keyslot's names.
                    json["kdf"] = "argon2id".into();
                    json["hash"] = serde_json::Value::Null;
                    json["time"] = kdf.rounds(pim).into();
                    json["memory"] = kib.into();
                    json["cpus"] = 1.into();
                }
                json
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Tcrypt {
    /// The unlocked volume of a legacy (TrueCrypt 4.3 and older) header `h`: read-only,
    /// its sectors decrypted by [`LegacyStore`] and handed to the engine under a random
    /// AES-XTS key of this process.
    fn unlocked_legacy(
        h: &[u8; HEADER_LEN],
        fields: &Fields,
        chain: &'static legacy::Chain,
        (offset, len): (u64, u64),
        keyslot: usize,
    ) -> Result<Unlocked> {
        let info = VolumeInfo {
            cipher: format!("{}-{}", chain.name, chain.mode_name),
            sector_size: UNIT as usize,
            iv: IvRule::Units512 {
                first: offset / UNIT,
            },
            data_offset: offset,
            data_size: len,
        };
        let spec = CipherSpec::aes(CipherMode::Xts, IvMode::Plain64);
        let material = Zeroizing::new(h[KEYS_AT..].to_vec());
        let master = chain.volume_key(&material);
        // Checked here, so that the store map below cannot fail on the key.
        legacy::Keys::new(chain, &material)?;
        let mut engine_key = Zeroizing::new(vec![0u8; 64]);
        crate::random(&mut engine_key)?;
        // LRW counts sectors from the data's start, CBC from mk_offset / 512 there.
        let first_sector = match chain.mode {
            legacy::Mode::Lrw => 0,
            legacy::Mode::Cbc | legacy::Mode::InnerCbc => fields.mk_offset / UNIT,
        };
        let map_engine = engine_key.clone();
        Ok(Unlocked::new(info, spec, master, keyslot)
            .with_engine_key(&engine_key)
            .with_read_only_because(LEGACY_READ_ONLY)
            .with_store_map(Arc::new(move |inner| -> Result<Box<dyn Store>> {
                Ok(Box::new(LegacyStore {
                    inner,
                    keys: legacy::Keys::new(chain, &material)?,
                    engine: Cascade::new(&[Layer::Aes], &map_engine)?,
                    data_unit: offset / UNIT,
                    first_sector,
                }))
            })))
    }
}

/// The host store as the engine sees a legacy (CBC or LRW) TrueCrypt volume: every
/// 512-byte unit read is decrypted with the legacy chain and encrypted again under the
/// engine's AES-XTS key with the same unit number; every write is refused (these volumes
/// are read-only here).
struct LegacyStore {
    inner: Box<dyn Store>,
    keys: legacy::Keys,
    engine: Cascade,
    /// The host unit of the data's first sector.
    data_unit: u64,
    /// The legacy sector number of the data's first sector.
    first_sector: u64,
}

impl std::fmt::Debug for LegacyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacyStore")
            .field("inner", &self.inner)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// The refusal of every write to a legacy volume.
const LEGACY_READ_ONLY: &str = "TrueCrypt 4.3 and older volumes (legacy CBC and LRW modes) \
                                are read-only here: nothing was written";

impl Store for LegacyStore {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn size(&self) -> std::io::Result<u64> {
        self.inner.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)?;
        whole_units(buf.len(), offset)?;
        let first = offset / UNIT;
        for (i, unit) in buf.chunks_exact_mut(UNIT as usize).enumerate() {
            let host = first + i as u64;
            let sector = host
                .checked_sub(self.data_unit)
                .map(|n| n + self.first_sector)
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "a read before the legacy TrueCrypt volume's data",
                    )
                })?;
            self.keys.decrypt_sector(sector, unit);
        }
        self.engine
            .encrypt(first, UNIT as usize, buf)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let _ = (buf, offset);
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            LEGACY_READ_ONLY,
        ))
    }

    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
}

fn not_changed() -> Error {
    Error::unsupported(
        "TCRYPT (VeraCrypt, TrueCrypt) headers are never changed here: keyslots and header \
         restores are not supported (format --type veracrypt makes new volumes)",
    )
}

/// The host store as the engine sees a TCRYPT volume: for chains other than single AES
/// every 512-byte unit read is decrypted with the chain and encrypted again under the
/// engine's AES-XTS key with the same unit number (the number of the unit in the host, as
/// the engine's IV rule gives it), and every unit written the other way; writes refused
/// when the volume is not `writable` (system volumes) or when they touch a `protected`
/// host range (a protected hidden volume's data and header slots: the engine refuses
/// such requests whole before they get here; this is the last line).
struct Chained {
    inner: Box<dyn Store>,
    /// The volume's chain and the engine's AES-XTS, when they differ.
    translate: Option<(Cascade, Cascade)>,
    writable: bool,
    /// Host byte ranges (start, end) no write may touch.
    protected: Vec<(u64, u64)>,
}

impl std::fmt::Debug for Chained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chained")
            .field("inner", &self.inner)
            .field("translated", &self.translate.is_some())
            .finish_non_exhaustive()
    }
}

impl Chained {
    fn new(
        inner: Box<dyn Store>,
        layers: &[Layer],
        master: &[u8],
        engine_key: &[u8],
        aes_only: bool,
        writable: bool,
        protected: Vec<(u64, u64)>,
    ) -> Result<Chained> {
        let translate = if aes_only {
            None
        } else {
            Some((
                Cascade::new(layers, master)?,
                Cascade::new(&[Layer::Aes], engine_key)?,
            ))
        };
        Ok(Chained {
            inner,
            translate,
            writable,
            protected,
        })
    }
}

impl Store for Chained {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn size(&self) -> std::io::Result<u64> {
        self.inner.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)?;
        let Some((chain, engine)) = &self.translate else {
            return Ok(());
        };
        whole_units(buf.len(), offset)?;
        let first = offset / UNIT;
        let unit = UNIT as usize;
        chain
            .decrypt(first, unit, buf)
            .and_then(|()| engine.encrypt(first, unit, buf))
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if !self.writable {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "system VeraCrypt/TrueCrypt volumes are read-only here",
            ));
        }
        let end = offset.saturating_add(buf.len() as u64);
        if let Some(&(start, stop)) = self
            .protected
            .iter()
            .find(|&&(start, stop)| offset < stop && start < end)
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "refused: a write at host bytes {offset}..{end} touches the protected \
                     hidden volume (host bytes {start}..{stop}); nothing of it was written"
                ),
            ));
        }
        let Some((chain, engine)) = &self.translate else {
            return self.inner.write_at(buf, offset);
        };
        whole_units(buf.len(), offset)?;
        let first = offset / UNIT;
        let unit = UNIT as usize;
        let mut data = Zeroizing::new(buf.to_vec());
        engine
            .decrypt(first, unit, &mut data)
            .and_then(|()| chain.encrypt(first, unit, &mut data))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.inner.write_at(&data, offset)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
}

/// Refuses a request that is not whole 512-byte units (the engine only makes such).
fn whole_units(len: usize, offset: u64) -> std::io::Result<()> {
    if offset.is_multiple_of(UNIT) && (len as u64).is_multiple_of(UNIT) {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "TCRYPT data is read and written in whole 512-byte units",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    /// `--hash argon2id` tries VeraCrypt's Argon2id row alone (as cryptsetup's `--hash`
    /// matches its KDF table's name when a row has no hash), with or without a PIM; a
    /// hash never selects it; TrueCrypt-only searches never try it.
    #[test]
    fn hash_argon2id_selects_only_the_argon2id_row() {
        let with = |hash: Option<&str>, pim: Option<u32>, veracrypt: bool| Tcrypt {
            options: Options {
                hash: hash.map(str::to_string),
                pim,
                veracrypt,
                ..Options::default()
            },
            keyfiles: Vec::new(),
            found: Mutex::new(None),
        };
        let tried = |t: &Tcrypt| -> Vec<&'static str> {
            KDFS.iter()
                .filter(|k| t.kdf_allowed(k))
                .map(|k| k.name())
                .collect()
        };
        assert_eq!(tried(&with(Some("argon2id"), None, true)), ["argon2id"]);
        assert_eq!(tried(&with(Some("argon"), Some(8), true)), ["argon2id"]);
        assert!(!tried(&with(Some("sha512"), None, true)).contains(&"argon2id"));
        assert!(tried(&with(None, None, true)).contains(&"argon2id"));
        assert!(tried(&with(None, None, false))
            .iter()
            .all(|&n| n != "argon2id"));
    }

    /// A hidden header is looked for at TrueCrypt 5's place (1536 bytes before the end)
    /// only when TrueCrypt's KDFs, the only ones that open it, are tried.
    #[test]
    fn the_legacy_hidden_place_is_looked_at_with_truecrypt_kdfs_only() {
        let size = 1 << 20;
        let with = |truecrypt: bool| Tcrypt {
            options: Options {
                hidden: true,
                truecrypt,
                ..Options::default()
            },
            keyfiles: Vec::new(),
            found: Mutex::new(None),
        };
        assert_eq!(
            with(true).places(size),
            [
                header::HIDDEN_HEADER_AT,
                size - header::HIDDEN_LEGACY_FROM_END
            ]
        );
        assert_eq!(with(false).places(size), [header::HIDDEN_HEADER_AT]);
    }

    /// The last line of hidden-volume protection: the store under the engine refuses a
    /// host write that touches a protected range (here a hidden header slot), single AES
    /// and a chain alike, writing nothing of it; writes beside it go through.
    #[test]
    fn the_chain_store_refuses_host_writes_into_protected_ranges() {
        let slot = (header::HIDDEN_HEADER_AT, 2 * header::HIDDEN_HEADER_AT);
        for (layers, aes_only) in [
            (&[Layer::Aes][..], true),
            (&[Layer::Serpent, Layer::Aes][..], false),
        ] {
            let mem = Arc::new(MemStore::new(1 << 18));
            let master: Vec<u8> = (0..64 * layers.len()).map(|i| i as u8).collect();
            let engine: Vec<u8> = (0..64u8).map(|i| i ^ 0x5a).collect();
            let store = Chained::new(
                Box::new(Arc::clone(&mem)),
                layers,
                &master,
                &engine,
                aes_only,
                true,
                vec![slot],
            )
            .unwrap();
            for (offset, len) in [(slot.0, 512), (slot.0 - 512, 1024), (slot.1 - 512, 4096)] {
                let err = store.write_at(&vec![7u8; len], offset).unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
                assert!(err.to_string().contains("protected hidden volume"), "{err}");
            }
            assert!(
                mem.to_vec().iter().all(|&b| b == 0),
                "a refused write landed"
            );
            store.write_at(&[7u8; 512], slot.0 - 512).unwrap();
            store.write_at(&[7u8; 512], slot.1).unwrap();
            let bytes = mem.to_vec();
            assert!(bytes[slot.0 as usize..slot.1 as usize]
                .iter()
                .all(|&b| b == 0));
            assert!(bytes[slot.0 as usize - 512..slot.0 as usize]
                .iter()
                .any(|&b| b != 0));
        }
    }
}

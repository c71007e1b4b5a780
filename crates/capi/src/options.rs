//! `sectorcrypt_open_options`, the options of `sectorcrypt_open_with`, in safe Rust: the
//! C layout, and how its fields become the image library's `OpenOptions`.
//!
//! **Versioned by size.** The caller sets `size` to `sizeof(sectorcrypt_open_options)` as
//! its header declares it. Fields are only ever added at the end: a program built against
//! an older header passes a smaller size, and the fields it does not know take their
//! defaults; a program built against a newer header passes a larger size, accepted when
//! every byte beyond the fields this library knows is zero (it asks for nothing this
//! library cannot do), refused otherwise. A struct zeroed but for `size` asks for every
//! default: every field's zero means "the default". Adding a field keeps the ABI
//! (`build.rs`); changing or removing one breaks it.

use crate::status::Failure;
use sectorcrypt_image::{Context, OpenOptions, RemoteOptions};
use sectorcrypt_volume::engine::EngineOptions;
use sectorcrypt_volume::formats::Requested;
use sectorcrypt_volume::tcrypt::{Options as TcryptOptions, Protect};
use std::ffi::c_char;
use std::path::PathBuf;
use zeroize::Zeroizing;

/// `sectorcrypt_open` flag: open read-only (the files are opened for reading; writes give
/// `SECTORCRYPT_ERR_READ_ONLY`).
pub const SECTORCRYPT_OPEN_READ_ONLY: u32 = 1;

/// `sectorcrypt_open` flag, with `SECTORCRYPT_OPEN_READ_ONLY`: open even while another
/// process writes the volume (cryptsetup's `--shared`), accepting that the data read may
/// change under it. Without it a read-only open beside a writer is refused.
pub const SECTORCRYPT_OPEN_SHARED: u32 = 2;

/// `sectorcrypt_open_options.flags` (with `SECTORCRYPT_OPEN_READ_ONLY` and
/// `SECTORCRYPT_OPEN_SHARED`): try only the keyslot in `keyslot`.
pub const SECTORCRYPT_OPEN_KEYSLOT: u32 = 4;
/// `sectorcrypt_open_options.flags`: the key has no passphrase component (GELI made with
/// `-P`: its keyfiles alone); the passphrase may then be NULL.
pub const SECTORCRYPT_OPEN_NO_PASSPHRASE: u32 = 8;
/// `sectorcrypt_open_options.flags`: a remote store's connections and requests have no
/// time limit (`timeout_secs` is ignored).
pub const SECTORCRYPT_OPEN_NO_TIMEOUT: u32 = 16;
/// `sectorcrypt_open_options.flags`: refuse a volume whose sectors are not authenticated
/// (the command line's `--integrity`).
pub const SECTORCRYPT_OPEN_INTEGRITY: u32 = 32;
/// `sectorcrypt_open_options.flags`, with `format` "veracrypt" or "tcrypt": open the
/// hidden volume (cryptsetup's `--tcrypt-hidden`).
pub const SECTORCRYPT_OPEN_TCRYPT_HIDDEN: u32 = 64;
/// `sectorcrypt_open_options.flags`, with `format` "veracrypt" or "tcrypt": use the
/// backup header near the end (cryptsetup's `--tcrypt-backup`).
pub const SECTORCRYPT_OPEN_TCRYPT_BACKUP: u32 = 128;
/// `sectorcrypt_open_options.flags`, with `format` "veracrypt" or "tcrypt": a
/// system-encrypted drive or partition (cryptsetup's `--tcrypt-system`).
pub const SECTORCRYPT_OPEN_TCRYPT_SYSTEM: u32 = 256;

/// Every flag this library knows.
const KNOWN_FLAGS: u32 = SECTORCRYPT_OPEN_READ_ONLY
    | SECTORCRYPT_OPEN_SHARED
    | SECTORCRYPT_OPEN_KEYSLOT
    | SECTORCRYPT_OPEN_NO_PASSPHRASE
    | SECTORCRYPT_OPEN_NO_TIMEOUT
    | SECTORCRYPT_OPEN_INTEGRITY
    | TCRYPT_FLAGS;

/// The flags that need a VeraCrypt/TrueCrypt `format`.
const TCRYPT_FLAGS: u32 = SECTORCRYPT_OPEN_TCRYPT_HIDDEN
    | SECTORCRYPT_OPEN_TCRYPT_BACKUP
    | SECTORCRYPT_OPEN_TCRYPT_SYSTEM;

/// How `sectorcrypt_open_with` opens a volume. Set `size` to `sizeof` this struct and
/// zero what you leave at its default.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OpenOptionsC {
    /// `sizeof(sectorcrypt_open_options)` as the caller's header declares it.
    pub size: usize,
    /// `SECTORCRYPT_OPEN_*` flags, or 0.
    pub flags: u32,
    /// With `SECTORCRYPT_OPEN_KEYSLOT`: the only keyslot tried.
    pub keyslot: u32,
    /// A detached header's file (or locator), NUL-terminated; NULL: the header is in the
    /// image.
    pub header: *const c_char,
    /// GELI's keyfile components: `keyfile_count` paths of files, NUL-terminated, in
    /// order; NULL when `keyfile_count` is 0.
    pub keyfiles: *const *const c_char,
    /// How many paths `keyfiles` holds.
    pub keyfile_count: usize,
    /// The engine's worker threads for large requests; 0: one per core.
    pub threads: u32,
    /// NBD connections when the server allows several; 0: 4.
    pub connections: u32,
    /// Seconds a remote store's connection or request may take; 0: 30 (see
    /// `SECTORCRYPT_OPEN_NO_TIMEOUT`).
    pub timeout_secs: u32,
    /// Reconnections per request after a remote store's connection failed (0: none).
    pub retry: u32,
    /// The format, for those that have no signature: "veracrypt" (VeraCrypt's KDFs) or
    /// "tcrypt" (TrueCrypt's too), or "fvault2" (a FileVault 2 volume whose header is
    /// damaged, to say why); NULL: detected (LUKS2, LUKS1, GELI, BitLocker, FileVault 2).
    pub format: *const c_char,
    /// VeraCrypt/TrueCrypt: try only the KDFs whose hash name contains this (cryptsetup's
    /// `--hash`: each KDF tried costs its full iterations); NULL: all.
    pub tcrypt_hash: *const c_char,
    /// VeraCrypt/TrueCrypt: try only the cipher chains whose name contains this
    /// (cryptsetup's `--cipher`); NULL: all.
    pub tcrypt_cipher: *const c_char,
    /// VeraCrypt: the PIM (cryptsetup's `--veracrypt-pim`); 0: none.
    pub veracrypt_pim: u32,
    /// With `protect_hidden`: the hidden volume's PIM; 0: none.
    pub protect_hidden_pim: u32,
    /// VeraCrypt/TrueCrypt: open the outer volume with its hidden volume protected
    /// (VeraCrypt's "protect hidden volume": a write that touches it fails, and nothing
    /// of it is written): the hidden volume's passphrase, `protect_hidden_len` bytes;
    /// NULL: no protection.
    pub protect_hidden: *const c_char,
    /// Bytes of `protect_hidden`.
    pub protect_hidden_len: usize,
    /// With `protect_hidden`: the hidden volume's keyfiles, `protect_hidden_keyfile_count`
    /// paths, in order.
    pub protect_hidden_keyfiles: *const *const c_char,
    /// How many paths `protect_hidden_keyfiles` holds.
    pub protect_hidden_keyfile_count: usize,
}

/// What the pointers of an options struct point to, read by `ffi.rs`.
#[derive(Debug, Default)]
pub struct Pointed {
    /// `header`.
    pub header: Option<PathBuf>,
    /// `keyfiles`.
    pub keyfiles: Vec<PathBuf>,
    /// `format`.
    pub format: Option<String>,
    /// `tcrypt_hash`.
    pub hash: Option<String>,
    /// `tcrypt_cipher`.
    pub cipher: Option<String>,
    /// `protect_hidden`, copied into wiped memory.
    pub protect_hidden: Option<Zeroizing<Vec<u8>>>,
    /// `protect_hidden_keyfiles`.
    pub protect_keyfiles: Vec<PathBuf>,
}

impl OpenOptionsC {
    /// Every default (a zeroed struct of this library's size).
    pub fn zeroed() -> OpenOptionsC {
        OpenOptionsC {
            size: std::mem::size_of::<OpenOptionsC>(),
            flags: 0,
            keyslot: 0,
            header: std::ptr::null(),
            keyfiles: std::ptr::null(),
            keyfile_count: 0,
            threads: 0,
            connections: 0,
            timeout_secs: 0,
            retry: 0,
            format: std::ptr::null(),
            tcrypt_hash: std::ptr::null(),
            tcrypt_cipher: std::ptr::null(),
            veracrypt_pim: 0,
            protect_hidden_pim: 0,
            protect_hidden: std::ptr::null(),
            protect_hidden_len: 0,
            protect_hidden_keyfiles: std::ptr::null(),
            protect_hidden_keyfile_count: 0,
        }
    }

    /// Keeps the fields of `self` (read from a caller's struct of `size` bytes) that lie
    /// wholly within `size` bytes; the others take their defaults.
    pub fn cut_to(mut self, size: usize) -> OpenOptionsC {
        let d = OpenOptionsC::zeroed();
        macro_rules! keep {
            ($($f:ident),*) => {$(
                if std::mem::offset_of!(OpenOptionsC, $f) + std::mem::size_of_val(&d.$f) > size {
                    self.$f = d.$f;
                }
            )*};
        }
        keep!(
            flags,
            keyslot,
            header,
            keyfiles,
            keyfile_count,
            threads,
            connections,
            timeout_secs,
            retry,
            format,
            tcrypt_hash,
            tcrypt_cipher,
            veracrypt_pim,
            protect_hidden_pim,
            protect_hidden,
            protect_hidden_len,
            protect_hidden_keyfiles,
            protect_hidden_keyfile_count
        );
        self.size = size;
        self
    }

    /// The library's options for these, with what the caller's pointers gave (read by
    /// `ffi.rs`); the keyfiles are read here.
    pub fn to_options(&self, p: Pointed) -> Result<OpenOptions, Failure> {
        let flag = |f: u32| self.flags & f != 0;
        if self.flags & !KNOWN_FLAGS != 0 {
            return Err(Failure::invalid(format!(
                "open options: unknown flags {:#x}",
                self.flags & !KNOWN_FLAGS
            )));
        }
        let read_only = flag(SECTORCRYPT_OPEN_READ_ONLY);
        let shared = flag(SECTORCRYPT_OPEN_SHARED);
        if shared && !read_only {
            return Err(Failure::invalid(
                "open options: SECTORCRYPT_OPEN_SHARED is for a read-only open",
            ));
        }
        let keyfiles = read_keyfiles(&p.keyfiles)?;
        let requested = self.requested(&p)?;
        Ok(OpenOptions {
            header: p.header,
            read_only,
            shared,
            key_slot: flag(SECTORCRYPT_OPEN_KEYSLOT).then_some(self.keyslot as usize),
            keyfiles,
            no_passphrase: flag(SECTORCRYPT_OPEN_NO_PASSPHRASE),
            integrity: flag(SECTORCRYPT_OPEN_INTEGRITY),
            requested,
            engine: EngineOptions {
                threads: (self.threads != 0).then_some(self.threads as usize),
                ..EngineOptions::default()
            },
            context: Context {
                remote: remote_options(
                    self.connections,
                    self.timeout_secs,
                    self.retry,
                    flag(SECTORCRYPT_OPEN_NO_TIMEOUT),
                ),
                on_wait: None,
            },
        })
    }
}

impl OpenOptionsC {
    /// The format `format` names, with the VeraCrypt/TrueCrypt options, which need it.
    fn requested(&self, p: &Pointed) -> Result<Option<Requested>, Failure> {
        let tcrypt = self.flags & TCRYPT_FLAGS != 0
            || self.veracrypt_pim != 0
            || p.hash.is_some()
            || p.cipher.is_some()
            || p.protect_hidden.is_some();
        let truecrypt = match p.format.as_deref() {
            None if tcrypt => {
                return Err(Failure::invalid(
                    "open options: the VeraCrypt/TrueCrypt options (TCRYPT flags, \
                     veracrypt_pim, tcrypt_hash, tcrypt_cipher, protect_hidden) need format \
                     \"veracrypt\" or \"tcrypt\"",
                ))
            }
            None => return Ok(None),
            Some("fvault2") if tcrypt => {
                return Err(Failure::invalid(
                    "open options: FileVault 2 takes none of the VeraCrypt/TrueCrypt options",
                ))
            }
            Some("fvault2") => return Ok(Some(Requested::Fvault2)),
            Some("tcrypt") => true,
            Some("veracrypt") => false,
            Some(other) => {
                return Err(Failure::invalid(format!(
                    "open options: format {other:?}: name only veracrypt, tcrypt or fvault2 \
                     (the others are detected)"
                )))
            }
        };
        if p.protect_hidden.is_none()
            && (self.protect_hidden_pim != 0 || !p.protect_keyfiles.is_empty())
        {
            return Err(Failure::invalid(
                "open options: protect_hidden_pim and protect_hidden_keyfiles go with \
                 protect_hidden",
            ));
        }
        let protect = match &p.protect_hidden {
            Some(pass) => Some(Protect {
                passphrase: pass.clone(),
                keyfiles: read_keyfiles(&p.protect_keyfiles)?,
                pim: (self.protect_hidden_pim != 0).then_some(self.protect_hidden_pim),
            }),
            None => None,
        };
        let flag = |f: u32| self.flags & f != 0;
        Ok(Some(Requested::Tcrypt(TcryptOptions {
            truecrypt,
            pim: (self.veracrypt_pim != 0).then_some(self.veracrypt_pim),
            hidden: flag(SECTORCRYPT_OPEN_TCRYPT_HIDDEN),
            backup: flag(SECTORCRYPT_OPEN_TCRYPT_BACKUP),
            system: flag(SECTORCRYPT_OPEN_TCRYPT_SYSTEM),
            hash: p.hash.clone(),
            cipher: p.cipher.clone(),
            protect,
            ..TcryptOptions::default()
        })))
    }
}

/// The keyfiles at `paths`, read into wiped memory.
fn read_keyfiles(paths: &[PathBuf]) -> Result<Vec<Zeroizing<Vec<u8>>>, Failure> {
    paths
        .iter()
        .map(|p| {
            std::fs::read(p).map(Zeroizing::new).map_err(|e| {
                Failure::from(sectorcrypt_image::Error::cannot_open(
                    format!("keyfile {}", p.display()),
                    e,
                ))
            })
        })
        .collect()
}

/// The remote settings of a C options struct (`connections`, `timeout_secs`, `retry`,
/// each 0 for its default; `no_timeout`: no time limit at all).
pub fn remote_options(
    connections: u32,
    timeout_secs: u32,
    retry: u32,
    no_timeout: bool,
) -> RemoteOptions {
    let defaults = RemoteOptions::default();
    RemoteOptions {
        connections: match connections {
            0 => defaults.connections,
            n => n as usize,
        },
        timeout_secs: match (no_timeout, timeout_secs) {
            (true, _) => 0,
            (false, 0) => defaults.timeout_secs,
            (false, n) => u64::from(n),
        },
        retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_options_are_the_defaults_and_flags_are_checked() {
        let o = OpenOptionsC::zeroed()
            .to_options(Pointed::default())
            .unwrap();
        assert!(!o.read_only && !o.shared && o.key_slot.is_none() && !o.no_passphrase);
        assert_eq!(o.context.remote, RemoteOptions::default());
        assert_eq!(o.engine.threads, None);
        let mut c = OpenOptionsC::zeroed();
        c.flags = SECTORCRYPT_OPEN_KEYSLOT | SECTORCRYPT_OPEN_NO_TIMEOUT;
        c.connections = 2;
        c.threads = 3;
        let o = c.to_options(Pointed::default()).unwrap();
        assert_eq!(o.key_slot, Some(0));
        assert_eq!(o.context.remote.timeout_secs, 0);
        assert_eq!(o.context.remote.connections, 2);
        assert_eq!(o.engine.threads, Some(3));
        c.flags = 1 << 20;
        assert!(c.to_options(Pointed::default()).is_err());
        c.flags = SECTORCRYPT_OPEN_SHARED;
        assert!(c.to_options(Pointed::default()).is_err());
        // The VeraCrypt options need the format named.
        c.flags = SECTORCRYPT_OPEN_TCRYPT_HIDDEN;
        assert!(c.to_options(Pointed::default()).is_err());
        let named = || Pointed {
            format: Some("veracrypt".into()),
            ..Pointed::default()
        };
        let o = c.to_options(named()).unwrap();
        assert!(matches!(o.requested, Some(Requested::Tcrypt(t)) if t.hidden && !t.truecrypt));
        c.flags = 0;
        c.protect_hidden_pim = 2;
        assert!(c.to_options(named()).is_err());
    }
}

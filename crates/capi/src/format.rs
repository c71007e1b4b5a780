//! `sectorcrypt_format_options`, the options of `sectorcrypt_format`, in safe Rust: the C
//! layout, and how its fields become the image library's `CreateOptions` (whose defaults
//! and refusals are those of every front end). Versioned by size as
//! `sectorcrypt_open_options` is (`options.rs`): fields are only added at the end, a
//! smaller size leaves the later fields at their defaults, a larger one is accepted when
//! its unknown bytes are zero, and a zero field means its default.

use crate::options::remote_options;
use crate::status::Failure;
use sectorcrypt_crypto::secret::SecretBytes;
use sectorcrypt_image::create::{self, CreateOptions, GeliOptions, Kind, Pbkdf};
use sectorcrypt_image::Context;
use std::ffi::c_char;
use std::path::{Path, PathBuf};

/// `sectorcrypt_format_options.kind`: LUKS2 (the default, 0).
pub const SECTORCRYPT_FORMAT_LUKS2: u32 = 0;
/// `sectorcrypt_format_options.kind`: LUKS1.
pub const SECTORCRYPT_FORMAT_LUKS1: u32 = 1;
/// `sectorcrypt_format_options.kind`: a GELI provider.
pub const SECTORCRYPT_FORMAT_GELI: u32 = 2;

/// `sectorcrypt_format_options.flags`: GELI keyed by its keyfiles alone (geli init `-P`);
/// the passphrase may then be NULL.
pub const SECTORCRYPT_FORMAT_NO_PASSPHRASE: u32 = 1;
/// `sectorcrypt_format_options.flags`: an authenticated GELI provider is not sealed (its
/// sectors fail to read until written).
pub const SECTORCRYPT_FORMAT_NO_WIPE: u32 = 2;
/// `sectorcrypt_format_options.flags`: GELI asks for the passphrase while booting (`-b`).
pub const SECTORCRYPT_FORMAT_GELI_BOOT: u32 = 4;
/// `sectorcrypt_format_options.flags`: the GELI loader may attach it (`-g`).
pub const SECTORCRYPT_FORMAT_GELI_BOOT_LOADER: u32 = 8;
/// `sectorcrypt_format_options.flags`: GELI shows the passphrase length while booting
/// (`-d`).
pub const SECTORCRYPT_FORMAT_GELI_DISPLAY_PASS: u32 = 16;
/// `sectorcrypt_format_options.flags`: GELI does not pass TRIM through (`-T`).
pub const SECTORCRYPT_FORMAT_GELI_NO_TRIM: u32 = 32;
/// `sectorcrypt_format_options.flags`: a GELI provider without AUTORESIZE (`-R`).
pub const SECTORCRYPT_FORMAT_GELI_NO_AUTORESIZE: u32 = 64;
/// `sectorcrypt_format_options.flags`: a remote store's connections and requests have no
/// time limit (`timeout_secs` is ignored).
pub const SECTORCRYPT_FORMAT_NO_TIMEOUT: u32 = 128;

/// Every flag this library knows.
const KNOWN_FLAGS: u32 = 255;

/// How `sectorcrypt_format` makes a volume. Set `size` to `sizeof` this struct and zero
/// what you leave at its default (those of `sectorcrypt format`). Strings are
/// NUL-terminated; NULL means the default.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FormatOptionsC {
    /// `sizeof(sectorcrypt_format_options)` as the caller's header declares it.
    pub size: usize,
    /// `SECTORCRYPT_FORMAT_*` flags, or 0.
    pub flags: u32,
    /// `SECTORCRYPT_FORMAT_LUKS2` (0), `SECTORCRYPT_FORMAT_LUKS1` or
    /// `SECTORCRYPT_FORMAT_GELI`.
    pub kind: u32,
    /// The cipher (LUKS: "aes-xts-plain64", ...; GELI: "aes-xts", "aes-cbc", "null").
    pub cipher: *const c_char,
    /// The key size in bits; 0: 512 for LUKS with XTS, 256 other LUKS, 128 for GELI.
    pub key_bits: u32,
    /// The sector size in bytes; 0: LUKS2 4096 where the data area allows, else 512.
    pub sector_size: u32,
    /// The KDF: "argon2id", "argon2i" or "pbkdf2".
    pub pbkdf: *const c_char,
    /// PBKDF2's hash and the AF splitter's (LUKS): "sha256" (default), "sha1", "sha512".
    pub hash: *const c_char,
    /// The KDF's calibration target in milliseconds; 0: 2000.
    pub iter_time_ms: u32,
    /// A fixed KDF cost (PBKDF2 iterations, Argon2 time cost) instead of calibration; 0:
    /// calibrate.
    pub iterations: u32,
    /// Argon2's memory in KiB; 0: calibrated.
    pub pbkdf_memory_kib: u32,
    /// Argon2's lanes; 0: the default.
    pub pbkdf_parallel: u32,
    /// A LUKS2 label.
    pub label: *const c_char,
    /// A detached LUKS header's file (created empty when missing).
    pub header: *const c_char,
    /// The size of a file created when the locator names none; 0: none is created.
    pub image_size: u64,
    /// The object size of the RBD image the LUKS volume lies on (its data is aligned to
    /// it); 0: none.
    pub rbd_object_size: u64,
    /// GELI's tag algorithm ("hmac-sha256", ...): the provider is then sealed (every
    /// sector written) unless `SECTORCRYPT_FORMAT_NO_WIPE`.
    pub integrity: *const c_char,
    /// GELI's keyfile components: `keyfile_count` paths, in order.
    pub keyfiles: *const *const c_char,
    /// How many paths `keyfiles` holds.
    pub keyfile_count: usize,
    /// GELI's metadata version (1 to 7); 0: 7.
    pub geli_version: u32,
    /// NBD connections when the server allows several; 0: 4.
    pub connections: u32,
    /// Seconds a remote store's connection or request may take; 0: 30.
    pub timeout_secs: u32,
    /// Reconnections per request after a remote store's connection failed (0: none).
    pub retry: u32,
}

/// The strings a `FormatOptionsC` points to, read by `ffi.rs` (None for NULL).
#[derive(Debug, Default)]
pub struct FormatStrings {
    /// `cipher`.
    pub cipher: Option<String>,
    /// `pbkdf`.
    pub pbkdf: Option<String>,
    /// `hash`.
    pub hash: Option<String>,
    /// `label`.
    pub label: Option<String>,
    /// `header`.
    pub header: Option<PathBuf>,
    /// `integrity`.
    pub integrity: Option<String>,
    /// `keyfiles`.
    pub keyfiles: Vec<PathBuf>,
}

impl FormatOptionsC {
    /// Every default (a zeroed struct of this library's size).
    pub fn zeroed() -> FormatOptionsC {
        FormatOptionsC {
            size: std::mem::size_of::<FormatOptionsC>(),
            flags: 0,
            kind: 0,
            cipher: std::ptr::null(),
            key_bits: 0,
            sector_size: 0,
            pbkdf: std::ptr::null(),
            hash: std::ptr::null(),
            iter_time_ms: 0,
            iterations: 0,
            pbkdf_memory_kib: 0,
            pbkdf_parallel: 0,
            label: std::ptr::null(),
            header: std::ptr::null(),
            image_size: 0,
            rbd_object_size: 0,
            integrity: std::ptr::null(),
            keyfiles: std::ptr::null(),
            keyfile_count: 0,
            geli_version: 0,
            connections: 0,
            timeout_secs: 0,
            retry: 0,
        }
    }

    /// Keeps the fields of `self` (read from a caller's struct of `size` bytes) that lie
    /// wholly within `size` bytes; the others take their defaults.
    pub fn cut_to(mut self, size: usize) -> FormatOptionsC {
        let d = FormatOptionsC::zeroed();
        macro_rules! keep {
            ($($f:ident),*) => {$(
                if std::mem::offset_of!(FormatOptionsC, $f) + std::mem::size_of_val(&d.$f) > size {
                    self.$f = d.$f;
                }
            )*};
        }
        keep!(
            flags,
            kind,
            cipher,
            key_bits,
            sector_size,
            pbkdf,
            hash,
            iter_time_ms,
            iterations,
            pbkdf_memory_kib,
            pbkdf_parallel,
            label,
            header,
            image_size,
            rbd_object_size,
            integrity,
            keyfiles,
            keyfile_count,
            geli_version,
            connections,
            timeout_secs,
            retry
        );
        self.size = size;
        self
    }

    /// The library's options and context for these, with the strings the caller's
    /// pointers gave (read by `ffi.rs`); the keyfiles are read here.
    pub fn to_options(&self, s: FormatStrings) -> Result<(CreateOptions, Context), Failure> {
        if self.flags & !KNOWN_FLAGS != 0 {
            return Err(Failure::invalid(format!(
                "format options: unknown flags {:#x}",
                self.flags & !KNOWN_FLAGS
            )));
        }
        let flag = |f: u32| self.flags & f != 0;
        let kind = match self.kind {
            SECTORCRYPT_FORMAT_LUKS2 => Kind::Luks2,
            SECTORCRYPT_FORMAT_LUKS1 => Kind::Luks1,
            SECTORCRYPT_FORMAT_GELI => Kind::Geli,
            k => {
                return Err(Failure::invalid(format!(
                    "format options: unknown kind {k} (0 LUKS2, 1 LUKS1, 2 GELI)"
                )))
            }
        };
        let nonzero = |v: u32| (v != 0).then_some(v);
        let keyfiles = s
            .keyfiles
            .iter()
            .map(|p| {
                std::fs::read(p)
                    .map(|k| SecretBytes::from_slice(&zeroize::Zeroizing::new(k)))
                    .map_err(|e| {
                        Failure::from(sectorcrypt_image::Error::cannot_open(
                            format!("keyfile {}", p.display()),
                            e,
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let opts = CreateOptions {
            kind,
            cipher: s.cipher,
            key_bits: nonzero(self.key_bits).map(|b| b as usize),
            sector_size: nonzero(self.sector_size).map(|b| b as usize),
            pbkdf: Pbkdf {
                kind: s.pbkdf,
                hash: s.hash,
                iter_time_ms: nonzero(self.iter_time_ms),
                memory_kib: nonzero(self.pbkdf_memory_kib),
                parallel: nonzero(self.pbkdf_parallel),
                iterations: nonzero(self.iterations),
            },
            label: s.label,
            header: s.header,
            size: (self.image_size != 0).then_some(self.image_size),
            rbd_object_size: (self.rbd_object_size != 0).then_some(self.rbd_object_size),
            integrity: s.integrity,
            keyfiles,
            volume_key: None,
            geli: GeliOptions {
                version: nonzero(self.geli_version).unwrap_or(GeliOptions::default().version),
                boot: flag(SECTORCRYPT_FORMAT_GELI_BOOT),
                boot_loader: flag(SECTORCRYPT_FORMAT_GELI_BOOT_LOADER),
                display_pass: flag(SECTORCRYPT_FORMAT_GELI_DISPLAY_PASS),
                no_trim: flag(SECTORCRYPT_FORMAT_GELI_NO_TRIM),
                no_autoresize: flag(SECTORCRYPT_FORMAT_GELI_NO_AUTORESIZE),
                no_passphrase: flag(SECTORCRYPT_FORMAT_NO_PASSPHRASE),
                no_wipe: flag(SECTORCRYPT_FORMAT_NO_WIPE),
            },
            // VeraCrypt volumes are not made through the C API (yet).
            veracrypt: Default::default(),
            names: c_name,
        };
        let cx = Context {
            remote: remote_options(
                self.connections,
                self.timeout_secs,
                self.retry,
                flag(SECTORCRYPT_FORMAT_NO_TIMEOUT),
            ),
            on_wait: None,
        };
        Ok((opts, cx))
    }
}

/// How refusals name the options: by their field in `sectorcrypt_format_options`.
fn c_name(o: sectorcrypt_image::create::Opt) -> &'static str {
    use sectorcrypt_image::create::Opt;
    match o {
        Opt::Header => "options->header",
        Opt::KeySize => "options->key_bits",
        Opt::SectorSize => "options->sector_size",
        Opt::IterTime => "options->iter_time_ms",
        Opt::RbdObjectSize => "options->rbd_object_size",
        Opt::Integrity => "options->integrity",
        Opt::NoWipe => "SECTORCRYPT_FORMAT_NO_WIPE",
        Opt::Keyfiles => "options->keyfiles",
        Opt::NoPassphrase => "SECTORCRYPT_FORMAT_NO_PASSPHRASE",
        Opt::VolumeKey => "a volume key",
        Opt::GeliKind => "SECTORCRYPT_FORMAT_GELI",
        // Never set here: the C API makes no VeraCrypt volumes.
        Opt::Pim => "a VeraCrypt PIM",
        Opt::HiddenSize => "a VeraCrypt hidden volume",
        Opt::VeracryptKind => "a VeraCrypt volume",
    }
}

/// What `sectorcrypt_format` asks for: nothing is confirmed (the C caller asked before),
/// the passphrase was given.
struct Given(Option<SecretBytes>);

impl create::Steps for Given {
    type Error = sectorcrypt_image::Error;

    fn confirm(&mut self, _: &create::Overwrite) -> Result<(), Self::Error> {
        Ok(())
    }

    fn passphrase(&mut self) -> Result<SecretBytes, Self::Error> {
        self.0
            .take()
            .ok_or_else(|| sectorcrypt_image::Error::invalid("a passphrase is needed"))
    }
}

/// Makes a new volume at `image` with the library's one creator.
pub fn format(
    image: &Path,
    pass: Option<SecretBytes>,
    opts: &CreateOptions,
    cx: &Context,
) -> Result<(), Failure> {
    create::create(image, opts, cx, &mut Given(pass))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sectorcrypt_image::RemoteOptions;

    #[test]
    fn zeroed_format_options_are_the_defaults_and_older_sizes_cut_fields() {
        let (o, cx) = FormatOptionsC::zeroed()
            .to_options(FormatStrings::default())
            .unwrap();
        assert_eq!(o.kind, Kind::Luks2);
        assert!(o.key_bits.is_none() && o.size.is_none() && o.pbkdf.iter_time_ms.is_none());
        assert_eq!(o.geli.version, GeliOptions::default().version);
        assert_eq!(cx.remote, RemoteOptions::default());
        let mut c = FormatOptionsC::zeroed();
        c.kind = SECTORCRYPT_FORMAT_GELI;
        c.flags = SECTORCRYPT_FORMAT_NO_WIPE | SECTORCRYPT_FORMAT_GELI_NO_TRIM;
        c.retry = 2;
        let (o, cx) = c.to_options(FormatStrings::default()).unwrap();
        assert!(o.kind == Kind::Geli && o.geli.no_wipe && o.geli.no_trim && !o.geli.boot);
        assert_eq!(cx.remote.retry, 2);
        // A caller that knows fields up to `kind` only: the later ones are defaults.
        let cut = c.cut_to(std::mem::offset_of!(FormatOptionsC, cipher));
        assert_eq!((cut.kind, cut.retry), (SECTORCRYPT_FORMAT_GELI, 0));
        // No padding: `ffi.rs` copies the caller's bytes into it.
        assert_eq!(std::mem::size_of::<FormatOptionsC>(), 136);
        c.kind = 9;
        assert!(c.to_options(FormatStrings::default()).is_err());
        c.kind = 0;
        c.flags = 1 << 20;
        assert!(c.to_options(FormatStrings::default()).is_err());
    }
}

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

/// Every flag this library knows.
const KNOWN_FLAGS: u32 = SECTORCRYPT_OPEN_READ_ONLY
    | SECTORCRYPT_OPEN_SHARED
    | SECTORCRYPT_OPEN_KEYSLOT
    | SECTORCRYPT_OPEN_NO_PASSPHRASE
    | SECTORCRYPT_OPEN_NO_TIMEOUT
    | SECTORCRYPT_OPEN_INTEGRITY;

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
            retry
        );
        self.size = size;
        self
    }

    /// The library's options for these, with the header path and keyfile paths the
    /// caller's pointers gave (read by `ffi.rs`); the keyfiles are read here.
    pub fn to_options(
        &self,
        header: Option<PathBuf>,
        keyfiles: &[PathBuf],
    ) -> Result<OpenOptions, Failure> {
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
        let keyfiles = keyfiles
            .iter()
            .map(|p| {
                std::fs::read(p).map(Zeroizing::new).map_err(|e| {
                    Failure::from(sectorcrypt_image::Error::cannot_open(
                        format!("keyfile {}", p.display()),
                        e,
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(OpenOptions {
            header,
            read_only,
            shared,
            key_slot: flag(SECTORCRYPT_OPEN_KEYSLOT).then_some(self.keyslot as usize),
            keyfiles,
            no_passphrase: flag(SECTORCRYPT_OPEN_NO_PASSPHRASE),
            integrity: flag(SECTORCRYPT_OPEN_INTEGRITY),
            // VeraCrypt and TrueCrypt volumes are not opened through the C API yet.
            requested: None,
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
        let o = OpenOptionsC::zeroed().to_options(None, &[]).unwrap();
        assert!(!o.read_only && !o.shared && o.key_slot.is_none() && !o.no_passphrase);
        assert_eq!(o.context.remote, RemoteOptions::default());
        assert_eq!(o.engine.threads, None);
        let mut c = OpenOptionsC::zeroed();
        c.flags = SECTORCRYPT_OPEN_KEYSLOT | SECTORCRYPT_OPEN_NO_TIMEOUT;
        c.connections = 2;
        c.threads = 3;
        let o = c.to_options(None, &[]).unwrap();
        assert_eq!(o.key_slot, Some(0));
        assert_eq!(o.context.remote.timeout_secs, 0);
        assert_eq!(o.context.remote.connections, 2);
        assert_eq!(o.engine.threads, Some(3));
        c.flags = 1 << 20;
        assert!(c.to_options(None, &[]).is_err());
        c.flags = SECTORCRYPT_OPEN_SHARED;
        assert!(c.to_options(None, &[]).is_err());
    }
}

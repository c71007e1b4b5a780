//! The one file with `unsafe`: the C entry points. Each checks its pointer arguments,
//! turns them into Rust values (paths, slices, out-parameters), and runs the safe code of
//! `volume.rs` and `cipher.rs` inside [`guard`], which catches panics and records the
//! last error. The doc comments here are the C header's (cbindgen copies them).
//!
//! Contract kept here so that nothing else needs `unsafe`:
//! - a pointer is read only after it was checked non-NULL (and, for an out-parameter,
//!   aligned), and only for the length the caller gave, at most `isize::MAX` bytes;
//! - a buffer borrowed from the caller is used only during the call;
//! - handles are numbers looked up in a [`Registry`], never dereferenced, so a closed or
//!   foreign handle is `SECTORCRYPT_ERR_BAD_HANDLE`, not a use of freed memory;
//! - secrets (passphrase, key) are copied at once into secret memory (the crypto crate's
//!   `SecretBytes`: locked pages, out of core dumps, wiped when dropped) and never put
//!   into an error detail.
#![allow(
    unsafe_code,
    reason = "the C ABI: raw pointers from C turned into slices, strings and results"
)]

use crate::cipher::{Cipher, Direction};
use crate::format::{FormatOptionsC, FormatStrings};
use crate::last_error::{self, guard};
use crate::options::{OpenOptionsC, Pointed, SECTORCRYPT_OPEN_READ_ONLY, SECTORCRYPT_OPEN_SHARED};
use crate::registry::Registry;
use crate::status::{Failure, Status, UNKNOWN};
use crate::volume::{Info, OpenVolume};
use sectorcrypt_crypto::secret::SecretBytes;
use sectorcrypt_image::OpenOptions;
use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `sectorcrypt_cipher_new` flag: the IV number counts sectors instead of 512-byte units
/// (dm-crypt's `iv_large_sectors`); sector sizes may then be any multiple of 16 from 16
/// to 65536.
pub const SECTORCRYPT_CIPHER_IV_LARGE_SECTORS: u32 = 1;

/// An open volume. Made by `sectorcrypt_open`, ended by `sectorcrypt_close`. One handle
/// may be used from many threads at once (reads and writes run in parallel).
#[derive(Debug)]
pub struct Volume {
    _opaque: [u8; 0],
}

/// A sector cipher with its key. Made by `sectorcrypt_cipher_new`, ended by
/// `sectorcrypt_cipher_free`. One handle may be used from many threads at once.
#[derive(Debug)]
pub struct SectorCipher {
    _opaque: [u8; 0],
}

static VOLUMES: Registry<OpenVolume> = Registry::new();
static CIPHERS: Registry<Cipher> = Registry::new();

/// The handle value C sees for registry number `id` (never dereferenced).
fn handle<T>(id: usize) -> *mut T {
    std::ptr::without_provenance_mut(id)
}

fn volume(h: *mut Volume) -> Result<Arc<OpenVolume>, Failure> {
    if h.is_null() {
        return Err(Failure::null("the volume handle"));
    }
    VOLUMES.get(h.addr()).ok_or_else(bad_handle)
}

fn cipher(h: *mut SectorCipher) -> Result<Arc<Cipher>, Failure> {
    if h.is_null() {
        return Err(Failure::null("the cipher handle"));
    }
    CIPHERS.get(h.addr()).ok_or_else(bad_handle)
}

/// Runs `op` on the volume of handle `h` inside [`guard`].
fn with_volume(h: *mut Volume, op: impl FnOnce(&OpenVolume) -> Result<(), Failure>) -> Status {
    guard(|| op(&*volume(h)?))
}

fn bad_handle() -> Failure {
    Failure::new(
        Status::ERR_BAD_HANDLE,
        "the handle is closed, or was not made by this library",
    )
}

/// Stores `value` in the caller's `*out`.
///
/// # Safety
/// `out`, when non-NULL and aligned, must be valid for a write of a `T`.
unsafe fn put<T>(out: *mut T, value: T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::null(what));
    }
    if !out.is_aligned() {
        return Err(Failure::invalid(format!("{what} is not aligned")));
    }
    // SAFETY: non-NULL and aligned (checked above); the caller promises it is writable.
    unsafe { out.write(value) };
    Ok(())
}

/// The NUL-terminated path `p` (any bytes but NUL; not necessarily UTF-8).
///
/// # Safety
/// `p`, when non-NULL, must point to a NUL-terminated string that outlives `'a`.
unsafe fn path<'a>(p: *const c_char, what: &str) -> Result<&'a Path, Failure> {
    if p.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL (checked above); the caller promises a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    Ok(Path::new(OsStr::from_bytes(bytes)))
}

/// The caller's `len` bytes at `p`; NULL is accepted for an empty buffer.
///
/// # Safety
/// `p`, when non-NULL, must be valid for reads of `len` bytes for `'a`, not written
/// meanwhile.
unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    check_buffer(p, len, what)?;
    // SAFETY: non-NULL and at most isize::MAX bytes (checked); the caller promises `len`
    // readable bytes that nothing writes during the call; u8 needs no alignment.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// The caller's `len` writable bytes at `p`; NULL is accepted for an empty buffer.
///
/// # Safety
/// `p`, when non-NULL, must be valid for reads and writes of `len` bytes for `'a`, and
/// not accessed otherwise meanwhile.
unsafe fn bytes_mut<'a>(p: *mut c_void, len: usize, what: &str) -> Result<&'a mut [u8], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_buffer(p, len, what)?;
    // SAFETY: as in `bytes`, and the caller promises nothing else accesses the bytes
    // during the call, so the unique borrow holds.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
}

fn check_buffer(p: *const c_void, len: usize, what: &str) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::null(what));
    }
    if len > isize::MAX as usize {
        return Err(Failure::invalid(format!(
            "{what}: a length of {len} bytes is larger than any buffer"
        )));
    }
    Ok(())
}

/// A secret: copied at once into secret memory, wiped when dropped. NULL is refused even with
/// length 0 (an empty passphrase is a non-NULL pointer with length 0).
///
/// # Safety
/// As for `bytes`.
unsafe fn secret(p: *const u8, len: usize, what: &str) -> Result<SecretBytes, Failure> {
    if p.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: the caller's promise, passed on.
    let borrowed = unsafe { bytes(p.cast(), len, what) }?;
    Ok(SecretBytes::from_slice(borrowed))
}

fn check_flags(flags: u32, known: u32, what: &str) -> Result<(), Failure> {
    if flags & !known != 0 {
        return Err(Failure::invalid(format!(
            "unknown {what} flags {:#x}",
            flags & !known
        )));
    }
    Ok(())
}

/// Opens and unlocks the volume `path` names (LUKS2, LUKS1 or GELI) with the passphrase
/// of `passphrase_len` bytes at `passphrase`, and stores its handle in `*out` (NULL on
/// failure). `path` is a locator, as the `sectorcrypt` command takes it: a file or block
/// device, an NBD URI (`nbd://host[:port]/export`, `nbd+unix:///export?socket=PATH`,
/// `nbds://`, `nbds+unix://`) or an `rbd:pool/image` spec; a remote store is reached with
/// the defaults of `sectorcrypt_open_options` (4 connections, 30 s, no retry). `header`
/// is the file holding a detached header, or NULL when the header is in `path`. `flags`:
/// 0, or `SECTORCRYPT_OPEN_READ_ONLY`, optionally with `SECTORCRYPT_OPEN_SHARED`.
///
/// The library copies the passphrase into locked memory it wipes; the caller's copy is
/// the caller's to wipe. The files stay open, with a shared use claim that makes
/// `sectorcrypt erase` and `header restore` refuse the volume, until `sectorcrypt_close`,
/// and with the writer claim: one writer at a time, and no read-only open beside a
/// writer unless `SECTORCRYPT_OPEN_SHARED`.
///
/// Errors: `SECTORCRYPT_ERR_NULL` (path, passphrase or out NULL),
/// `SECTORCRYPT_ERR_NOT_FOUND`, `SECTORCRYPT_ERR_IO`, `SECTORCRYPT_ERR_NO_HEADER`,
/// `SECTORCRYPT_ERR_CORRUPT_HEADER`, `SECTORCRYPT_ERR_WRONG_PASSPHRASE`,
/// `SECTORCRYPT_ERR_UNSUPPORTED`, `SECTORCRYPT_ERR_KEYSLOT`, `SECTORCRYPT_ERR_UNREACHABLE`
/// (an NBD export or RBD cluster that cannot be reached), `SECTORCRYPT_ERR_IN_USE`
/// (another process is erasing the volume or replacing its header, or writes it, or
/// reads it while this open would write), `SECTORCRYPT_ERR_INVALID_ARGUMENT` (unknown
/// flags, or `SECTORCRYPT_OPEN_SHARED` without `SECTORCRYPT_OPEN_READ_ONLY`).
///
/// # Safety
/// `path` and `header` (when not NULL) are NUL-terminated strings; `passphrase` points
/// to `passphrase_len` readable bytes; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_open(
    path: *const c_char,
    header: *const c_char,
    passphrase: *const c_char,
    passphrase_len: usize,
    flags: u32,
    out: *mut *mut Volume,
) -> Status {
    guard(|| {
        // SAFETY: the caller's promise for `out`.
        unsafe { put(out, std::ptr::null_mut(), "out") }?;
        // SAFETY: the caller's promises for `path`, `header` and `passphrase`.
        let (image, header, pass) = unsafe {
            (
                self::path(path, "path")?,
                if header.is_null() {
                    None
                } else {
                    Some(self::path(header, "header")?)
                },
                secret(passphrase.cast(), passphrase_len, "passphrase")?,
            )
        };
        check_flags(
            flags,
            SECTORCRYPT_OPEN_READ_ONLY | SECTORCRYPT_OPEN_SHARED,
            "open",
        )?;
        let read_only = flags & SECTORCRYPT_OPEN_READ_ONLY != 0;
        let shared = flags & SECTORCRYPT_OPEN_SHARED != 0;
        if shared && !read_only {
            return Err(Failure::invalid(
                "open: SECTORCRYPT_OPEN_SHARED is for a read-only open",
            ));
        }
        let opts = OpenOptions {
            header: header.map(Path::to_path_buf),
            read_only,
            shared,
            ..OpenOptions::default()
        };
        let opened = OpenVolume::open(image, &pass, &opts)?;
        let id = VOLUMES.insert(opened);
        // SAFETY: the caller's promise for `out` (written above already).
        unsafe { put(out, handle(id), "out") }
    })
}

/// Opens and unlocks the volume `locator` names, as `sectorcrypt_open` does, with the
/// options in `*options` (NULL: every default): a detached header, GELI keyfile
/// components (or VeraCrypt keyfiles), a keyslot, no passphrase component, the engine's
/// threads, how a remote store is reached (connections, timeout, retry), and VeraCrypt or
/// TrueCrypt volumes by name (`format`, with cryptsetup's PIM, hidden, backup, system,
/// hash and cipher options) with an outer volume's hidden volume protected
/// (`protect_hidden`: a write into it fails with `SECTORCRYPT_ERR_IO`, EACCES in the
/// detail, and nothing of it is written). Set `options->size` to
/// `sizeof(sectorcrypt_open_options)`; zeroed fields take their defaults. `passphrase`
/// may be NULL with `SECTORCRYPT_OPEN_NO_PASSPHRASE`.
///
/// Errors: those of `sectorcrypt_open`; `SECTORCRYPT_ERR_INVALID_ARGUMENT` also for a
/// `size` smaller than the `size` field, or larger than this library's struct with
/// non-zero bytes past it (options this library does not know); a keyfile that cannot be
/// read is `SECTORCRYPT_ERR_NOT_FOUND` or `SECTORCRYPT_ERR_IO`.
///
/// # Safety
/// `locator` is a NUL-terminated string; `passphrase`, when not NULL, points to
/// `passphrase_len` readable bytes; `options`, when not NULL, points to `options->size`
/// readable bytes, its `header`, `format`, `tcrypt_hash` and `tcrypt_cipher` (when not
/// NULL) to NUL-terminated strings, its `keyfiles` to `keyfile_count` pointers to
/// NUL-terminated strings, its `protect_hidden` (when not NULL) to `protect_hidden_len`
/// readable bytes and its `protect_hidden_keyfiles` to `protect_hidden_keyfile_count`
/// pointers to NUL-terminated strings; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_open_with(
    locator: *const c_char,
    passphrase: *const c_char,
    passphrase_len: usize,
    options: *const OpenOptionsC,
    out: *mut *mut Volume,
) -> Status {
    guard(|| {
        // SAFETY: the caller's promise for `out`.
        unsafe { put(out, std::ptr::null_mut(), "out") }?;
        // SAFETY: the caller's promises for `options` and the strings it points to.
        let (opts, pointed) = unsafe { open_options(options) }?;
        let opts = opts.to_options(pointed)?;
        // SAFETY: the caller's promises for `locator` and `passphrase`.
        let (image, pass) = unsafe {
            (
                self::path(locator, "locator")?,
                if passphrase.is_null() && opts.no_passphrase {
                    SecretBytes::default()
                } else {
                    secret(passphrase.cast(), passphrase_len, "passphrase")?
                },
            )
        };
        let opened = OpenVolume::open(image, &pass, &opts)?;
        let id = VOLUMES.insert(opened);
        // SAFETY: the caller's promise for `out` (written above already).
        unsafe { put(out, handle(id), "out") }
    })
}

/// The caller's options (every default for NULL), cut to the size it gave, with the
/// header path and keyfile paths they point to.
///
/// # Safety
/// As for `sectorcrypt_open_with`'s `options`.
unsafe fn open_options(p: *const OpenOptionsC) -> Result<(OpenOptionsC, Pointed), Failure> {
    if p.is_null() {
        return Ok((OpenOptionsC::zeroed(), Pointed::default()));
    }
    // SAFETY: the caller's promise for `options`.
    let (o, size) = unsafe { versioned(p, OpenOptionsC::zeroed(), "open options") }?;
    let o = o.cut_to(size);
    let header = if o.header.is_null() {
        None
    } else {
        // SAFETY: the caller's promise for `header`.
        Some(unsafe { self::path(o.header, "options->header") }?.to_path_buf())
    };
    let protect_hidden = if o.protect_hidden.is_null() {
        None
    } else {
        // SAFETY: the caller's promise for `protect_hidden`: `protect_hidden_len` bytes.
        let b = unsafe {
            bytes(
                o.protect_hidden.cast(),
                o.protect_hidden_len,
                "protect_hidden",
            )
        }?;
        Some(zeroize::Zeroizing::new(b.to_vec()))
    };
    // SAFETY: the caller's promises for `keyfiles`, the strings and the hidden volume's
    // keyfiles.
    let pointed = unsafe {
        Pointed {
            header,
            keyfiles: paths(o.keyfiles, o.keyfile_count, "options->keyfiles[i]")?,
            format: text(o.format, "options->format")?,
            hash: text(o.tcrypt_hash, "options->tcrypt_hash")?,
            cipher: text(o.tcrypt_cipher, "options->tcrypt_cipher")?,
            protect_hidden,
            protect_keyfiles: paths(
                o.protect_hidden_keyfiles,
                o.protect_hidden_keyfile_count,
                "options->protect_hidden_keyfiles[i]",
            )?,
        }
    };
    Ok((o, pointed))
}

/// A caller's struct versioned by size (`options.rs`): its first field `size`, then the
/// fields it knows. Returns the struct (`zeroed` with the caller's first `size` bytes,
/// up to this library's size) and the caller's size; a larger struct whose bytes beyond
/// this library's are not all zero is refused.
///
/// # Safety
/// `p` is non-NULL and points to at least `size` readable bytes, `size` being its first
/// field; `T` is plain integers and pointers without padding (any bytes are valid).
unsafe fn versioned<T: Copy>(p: *const T, zeroed: T, what: &str) -> Result<(T, usize), Failure> {
    let known = std::mem::size_of::<T>();
    // SAFETY: non-NULL; the caller promises at least `size` readable bytes, and `size` is
    // the first field (read unaligned: nothing is assumed of the caller's alignment).
    let size = unsafe { p.cast::<usize>().read_unaligned() };
    if size < std::mem::size_of::<usize>() {
        return Err(Failure::invalid(format!(
            "{what}: size {size} is smaller than the size field"
        )));
    }
    // SAFETY: the caller promises `size` readable bytes at `p`.
    let given = unsafe { bytes(p.cast(), size, "options") }?;
    if given
        .get(known..)
        .is_some_and(|extra| extra.iter().any(|&b| b != 0))
    {
        return Err(Failure::invalid(format!(
            "{what}: {size} bytes, with options past the {known} this library knows"
        )));
    }
    let mut o = zeroed;
    let n = size.min(known);
    // SAFETY: `o` is `known` bytes of plain integers and pointers (any bytes are valid
    // values; no padding: the caller's promise for `T`), `given` holds at least `n`
    // bytes; the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(given.as_ptr(), (&raw mut o).cast::<u8>(), n);
    }
    Ok((o, size))
}

/// A string option: None for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn text(p: *const c_char, what: &str) -> Result<Option<String>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's promise.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(|s| Some(s.to_owned()))
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// Paths at `p`, `count` of them (none when `count` is 0).
///
/// # Safety
/// When `count` > 0, `p` points to `count` readable pointers to NUL-terminated strings.
unsafe fn paths(
    p: *const *const c_char,
    count: usize,
    what: &str,
) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::with_capacity(count.min(64));
    if count > 0 {
        if p.is_null() {
            return Err(Failure::null(what));
        }
        for i in 0..count {
            // SAFETY: the caller promises `count` readable pointers at `p`.
            let k = unsafe { p.add(i).read_unaligned() };
            // SAFETY: the caller promises each is a NUL-terminated string.
            out.push(unsafe { self::path(k, what) }?.to_path_buf());
        }
    }
    Ok(out)
}

/// Makes a new volume at `locator` (a file or block device, created with
/// `options->image_size` bytes when missing; an NBD URI; an `rbd:` spec), as
/// `sectorcrypt format` does with the same options: LUKS2 (the default), LUKS1 or GELI,
/// every default and refusal the same. An existing image is overwritten without asking
/// (ask before calling); a volume in use gives `SECTORCRYPT_ERR_IN_USE`; a bad option
/// `SECTORCRYPT_ERR_INVALID_ARGUMENT` or `SECTORCRYPT_ERR_UNSUPPORTED` before anything
/// is written; a file made here is removed again when formatting fails. Open the volume
/// with `sectorcrypt_open_with` afterwards.
///
/// # Safety
/// `locator` is a NUL-terminated string; `passphrase`, when not NULL, points to
/// `passphrase_len` readable bytes (NULL only with `SECTORCRYPT_FORMAT_NO_PASSPHRASE`);
/// `options`, when not NULL, points to `options->size` readable bytes, its strings (when
/// not NULL) are NUL-terminated and its `keyfiles` are `keyfile_count` pointers to
/// NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_format(
    locator: *const c_char,
    passphrase: *const c_char,
    passphrase_len: usize,
    options: *const FormatOptionsC,
) -> Status {
    guard(|| {
        let (o, strings) = if options.is_null() {
            (FormatOptionsC::zeroed(), FormatStrings::default())
        } else {
            // SAFETY: the caller's promise for `options`.
            let (o, size) =
                unsafe { versioned(options, FormatOptionsC::zeroed(), "format options") }?;
            let o = o.cut_to(size);
            // SAFETY: the caller's promises for the strings `options` points to.
            let strings = unsafe {
                FormatStrings {
                    cipher: text(o.cipher, "options->cipher")?,
                    pbkdf: text(o.pbkdf, "options->pbkdf")?,
                    hash: text(o.hash, "options->hash")?,
                    label: text(o.label, "options->label")?,
                    header: if o.header.is_null() {
                        None
                    } else {
                        Some(self::path(o.header, "options->header")?.to_path_buf())
                    },
                    integrity: text(o.integrity, "options->integrity")?,
                    keyfiles: paths(o.keyfiles, o.keyfile_count, "options->keyfiles[i]")?,
                }
            };
            (o, strings)
        };
        let (opts, cx) = o.to_options(strings)?;
        // SAFETY: the caller's promises for `locator` and `passphrase`.
        let (image, pass) = unsafe {
            (
                self::path(locator, "locator")?,
                if passphrase.is_null() && opts.geli.no_passphrase {
                    None
                } else {
                    Some(secret(passphrase.cast(), passphrase_len, "passphrase")?)
                },
            )
        };
        crate::format::format(image, pass, &opts, &cx)
    })
}

/// Flushes (when writable) and closes the volume, releasing its files and claims, and
/// frees the handle: it must not be used again. NULL is accepted and does nothing. The
/// handle is freed even when the flush fails (`SECTORCRYPT_ERR_IO`); a handle already
/// closed gives `SECTORCRYPT_ERR_BAD_HANDLE`.
#[no_mangle]
pub extern "C" fn sectorcrypt_close(volume: *mut Volume) -> Status {
    guard(|| {
        if volume.is_null() {
            return Ok(());
        }
        let v = VOLUMES.remove(volume.addr()).ok_or_else(bad_handle)?;
        if v.read_only() {
            Ok(())
        } else {
            v.flush()
        }
    })
}

/// Stores the volume's plaintext size in bytes in `*size`.
///
/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_size(volume: *mut Volume, size: *mut u64) -> Status {
    // SAFETY: the caller's promise for `size`.
    with_volume(volume, |v| unsafe { put(size, v.size(), "size") })
}

/// Stores the volume's encryption sector size in bytes in `*sector_size`.
///
/// # Safety
/// `sector_size` is writable.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_sector_size(
    volume: *mut Volume,
    sector_size: *mut u32,
) -> Status {
    // SAFETY: the caller's promise for `sector_size`.
    with_volume(volume, |v| unsafe {
        put(sector_size, v.sector_size(), "sector_size")
    })
}

/// Fills `*info` with what the volume is: size, data offset, sector size, keyslot,
/// read-only, format and cipher.
///
/// # Safety
/// `info` is writable.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_info(volume: *mut Volume, info: *mut Info) -> Status {
    // SAFETY: the caller's promise for `info`.
    with_volume(volume, |v| unsafe { put(info, v.info(), "info") })
}

/// Reads `len` bytes of plaintext at byte `offset` into `buf`: any offset and length
/// (partial sectors are read and decrypted whole). The whole range must lie inside the
/// volume (`SECTORCRYPT_ERR_OUT_OF_RANGE` otherwise; nothing is read). `buf` may be NULL
/// when `len` is 0.
///
/// # Safety
/// `buf` points to `len` writable bytes not accessed otherwise during the call.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_pread(
    volume: *mut Volume,
    buf: *mut c_void,
    len: usize,
    offset: u64,
) -> Status {
    with_volume(volume, |v| {
        // SAFETY: the caller's promise for `buf` (used during this call only).
        let buf = unsafe { bytes_mut(buf, len, "buf") }?;
        v.read(buf, offset)
    })
}

/// Writes the `len` bytes of plaintext at `buf` at byte `offset`: any offset and length
/// (partial sectors are read, changed and written back whole, under a lock of their own).
/// The whole range must lie inside the volume (`SECTORCRYPT_ERR_OUT_OF_RANGE`); a
/// read-only volume gives `SECTORCRYPT_ERR_READ_ONLY`. Data is durable after
/// `sectorcrypt_flush` or `sectorcrypt_close`.
///
/// # Safety
/// `buf` points to `len` readable bytes not written during the call.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_pwrite(
    volume: *mut Volume,
    buf: *const c_void,
    len: usize,
    offset: u64,
) -> Status {
    with_volume(volume, |v| {
        // SAFETY: the caller's promise for `buf` (used during this call only).
        let buf = unsafe { bytes(buf, len, "buf") }?;
        v.write(buf, offset)
    })
}

/// Makes every completed write durable (fdatasync of the image).
#[no_mangle]
pub extern "C" fn sectorcrypt_flush(volume: *mut Volume) -> Status {
    with_volume(volume, OpenVolume::flush)
}

/// Makes a sector cipher from a dm-crypt cipher string (`aes-xts-plain64`,
/// `aes-xts-plain`, `aes-cbc-plain64`, `aes-cbc-plain`, `aes-cbc-essiv:sha256`,
/// `aes-ecb`) and a key of `key_len` bytes (XTS: 32, 48 or 64; the others: 16, 24 or
/// 32), and stores its handle in `*out` (NULL on failure). `flags`: 0, or
/// `SECTORCRYPT_CIPHER_IV_LARGE_SECTORS`. The library keeps a copy of the key for the
/// handle's life in locked memory (`mlock`, or `memfd_secret` where the kernel has it)
/// that is left out of core dumps and wiped when the cipher is freed.
///
/// Errors: `SECTORCRYPT_ERR_NULL`, `SECTORCRYPT_ERR_UNKNOWN_CIPHER`,
/// `SECTORCRYPT_ERR_BAD_KEY` (length; XTS halves that are equal),
/// `SECTORCRYPT_ERR_INVALID_ARGUMENT` (unknown flags, a spec that is not UTF-8).
///
/// # Safety
/// `spec` is a NUL-terminated string; `key` points to `key_len` readable bytes; `out` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_cipher_new(
    spec: *const c_char,
    key: *const u8,
    key_len: usize,
    flags: u32,
    out: *mut *mut SectorCipher,
) -> Status {
    guard(|| {
        // SAFETY: the caller's promise for `out`.
        unsafe { put(out, std::ptr::null_mut(), "out") }?;
        if spec.is_null() {
            return Err(Failure::null("spec"));
        }
        // SAFETY: non-NULL; the caller promises a NUL-terminated string.
        let spec = unsafe { CStr::from_ptr(spec) }
            .to_str()
            .map_err(|_| Failure::invalid("the cipher string is not UTF-8"))?;
        // SAFETY: the caller's promise for `key`.
        let key = unsafe { secret(key, key_len, "key") }?;
        check_flags(flags, SECTORCRYPT_CIPHER_IV_LARGE_SECTORS, "cipher")?;
        let large_iv = flags & SECTORCRYPT_CIPHER_IV_LARGE_SECTORS != 0;
        let id = CIPHERS.insert(Cipher::new(spec, &key, large_iv)?);
        // SAFETY: the caller's promise for `out` (written above already).
        unsafe { put(out, handle(id), "out") }
    })
}

/// The body of encrypt and decrypt, once the caller's buffer is a slice (or why not).
fn transform<'a>(
    dir: Direction,
    cipher: *mut SectorCipher,
    buf: impl FnOnce() -> Result<&'a mut [u8], Failure>,
    first_sector: u64,
    sector_size: u32,
) -> Status {
    guard(|| {
        let c = self::cipher(cipher)?;
        c.apply(dir, buf()?, first_sector, sector_size as usize)
    })
}

/// Encrypts `len` bytes at `buf` in place: whole sectors of `sector_size` bytes (512,
/// 1024, 2048, 4096; with `SECTORCRYPT_CIPHER_IV_LARGE_SECTORS` any multiple of 16 up to
/// 65536), the first with IV number `first_sector`. As dm-crypt counts, the IV number is
/// in 512-byte units (the IV of sector k of 4096 bytes is 8k) unless the cipher was made
/// with `SECTORCRYPT_CIPHER_IV_LARGE_SECTORS`. `buf` needs no alignment.
///
/// Errors: `SECTORCRYPT_ERR_NULL`, `SECTORCRYPT_ERR_BAD_HANDLE`, `SECTORCRYPT_ERR_LENGTH`
/// (not a whole number of sectors; the buffer is left as it was),
/// `SECTORCRYPT_ERR_INVALID_ARGUMENT` (a sector size not accepted).
///
/// # Safety
/// `buf` points to `len` writable bytes not accessed otherwise during the call.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_cipher_encrypt(
    cipher: *mut SectorCipher,
    buf: *mut c_void,
    len: usize,
    first_sector: u64,
    sector_size: u32,
) -> Status {
    // SAFETY: the caller's promise for `buf` (used during this call only).
    let buf = || unsafe { bytes_mut(buf, len, "buf") };
    transform(Direction::Encrypt, cipher, buf, first_sector, sector_size)
}

/// Decrypts `len` bytes at `buf` in place; arguments and errors as for
/// `sectorcrypt_cipher_encrypt`.
///
/// # Safety
/// `buf` points to `len` writable bytes not accessed otherwise during the call.
#[no_mangle]
pub unsafe extern "C" fn sectorcrypt_cipher_decrypt(
    cipher: *mut SectorCipher,
    buf: *mut c_void,
    len: usize,
    first_sector: u64,
    sector_size: u32,
) -> Status {
    // SAFETY: the caller's promise for `buf` (used during this call only).
    let buf = || unsafe { bytes_mut(buf, len, "buf") };
    transform(Direction::Decrypt, cipher, buf, first_sector, sector_size)
}

/// Frees the cipher and wipes its keys; the handle must not be used again. NULL is
/// accepted and does nothing; a handle already freed gives `SECTORCRYPT_ERR_BAD_HANDLE`.
#[no_mangle]
pub extern "C" fn sectorcrypt_cipher_free(cipher: *mut SectorCipher) -> Status {
    guard(|| {
        if cipher.is_null() {
            return Ok(());
        }
        CIPHERS
            .remove(cipher.addr())
            .map(drop)
            .ok_or_else(bad_handle)
    })
}

/// The fixed message of a status code: a static string, never NULL (a number that is no
/// code has a message saying so).
#[no_mangle]
pub extern "C" fn sectorcrypt_strerror(status: c_int) -> *const c_char {
    Status::from_code(status.into())
        .map_or(UNKNOWN, Status::message)
        .as_ptr()
}

/// What the calling thread's last call into this library failed on (which file, which
/// offset, what the operating system said), or an empty string after a success. Never
/// NULL, never a passphrase or key. The string belongs to the library and stays valid
/// until the thread's next call into it.
#[no_mangle]
pub extern "C" fn sectorcrypt_last_error() -> *const c_char {
    last_error::pointer()
}

/// The library's version, e.g. `0.1.0` (a static string).
#[no_mangle]
pub extern "C" fn sectorcrypt_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => panic!("the version has a NUL"),
        };
    VERSION.as_ptr()
}

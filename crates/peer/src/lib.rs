//! A peer for `sectorcrypt bench`: another library's AES behind a tiny C ABI, so that the
//! bench can load it with `dlopen` beside the system OpenSSL it links.
//!
//! The library is built with exactly one feature: `openssl4` (OpenSSL 4 from `openssl-src`,
//! linked statically, its symbols local to this library: see build.rs) or `aws-lc`
//! (AWS-LC from `aws-lc-sys`, whose symbols carry a prefix). Both speak OpenSSL's EVP
//! interface, so one body of code drives either; `evp` holds the few declarations.
//!
//! The ABI (version [`SC_PEER_ABI`]; every function is safe to call from one thread per
//! context, contexts are independent):
//!
//! - `sc_peer_abi() -> u32`, `sc_peer_name() -> *const c_char`,
//!   `sc_peer_version() -> *const c_char` (static NUL-terminated strings);
//! - `sc_peer_new(cipher, key, key_len, encrypt) -> *mut Ctx`: a context for the cipher
//!   named as OpenSSL names it (`"aes-256-xts"`), keyed once; null when the library has no
//!   such cipher or the key does not fit it;
//! - `sc_peer_units(ctx, src, dst, len, unit, first, step) -> c_int`: `len` bytes as
//!   `len / unit` data units, unit `i` with the 16-byte IV plain64(`first + i * step`)
//!   (little-endian counter, zero padded), one IV set and one update per unit, as a disk
//!   layer does; `dst` has room for `len + 16` bytes (OpenSSL's EVP asks for one block of
//!   slack);
//! - `sc_peer_message(ctx, iv, iv_len, src, dst, len, tag, tag_len) -> c_int`: one
//!   message: IV set, one update, and for an AEAD cipher the final step and the tag
//!   (written when encrypting, checked when decrypting); `tag` is null for the others;
//! - `sc_peer_free(ctx)`.
//!
//! The `c_int` results are 1 on success, 0 on failure (a decryption whose tag does not
//! verify fails).
#![allow(unsafe_code)]

#[cfg(all(feature = "openssl4", feature = "aws-lc"))]
compile_error!("build one peer at a time: feature `openssl4` or `aws-lc`");
#[cfg(not(any(feature = "openssl4", feature = "aws-lc")))]
compile_error!("choose a peer: feature `openssl4` or `aws-lc` (scripts/bench-peers.sh)");

use std::ffi::{c_char, c_int, CStr};
use std::ptr;

/// The version of the C ABI above; the bench refuses a library of another.
pub const SC_PEER_ABI: u32 = 1;

const EVP_CTRL_GCM_GET_TAG: c_int = 0x10;
const EVP_CTRL_GCM_SET_TAG: c_int = 0x11;
const OPENSSL_VERSION: c_int = 0;

#[cfg(feature = "openssl4")]
mod evp {
    //! OpenSSL 4's EVP calls (`openssl/evp.h`, `openssl/crypto.h`), linked statically.
    use std::ffi::{c_char, c_int, c_uchar, c_void};
    pub type Cipher = c_void;
    pub type CipherCtx = c_void;
    pub const NAME: &[u8] = b"openssl\0";
    extern "C" {
        pub fn OpenSSL_version(which: c_int) -> *const c_char;
        pub fn EVP_CIPHER_fetch(
            libctx: *mut c_void,
            name: *const c_char,
            props: *const c_char,
        ) -> *mut Cipher;
        pub fn EVP_CIPHER_free(cipher: *mut Cipher);
        pub fn EVP_CIPHER_get_key_length(cipher: *const Cipher) -> c_int;
        pub fn EVP_CIPHER_CTX_new() -> *mut CipherCtx;
        pub fn EVP_CIPHER_CTX_free(ctx: *mut CipherCtx);
        pub fn EVP_CIPHER_CTX_set_padding(ctx: *mut CipherCtx, pad: c_int) -> c_int;
        pub fn EVP_CIPHER_CTX_ctrl(
            ctx: *mut CipherCtx,
            cmd: c_int,
            arg: c_int,
            ptr: *mut c_void,
        ) -> c_int;
        pub fn EVP_CipherInit_ex(
            ctx: *mut CipherCtx,
            cipher: *const Cipher,
            engine: *mut c_void,
            key: *const c_uchar,
            iv: *const c_uchar,
            enc: c_int,
        ) -> c_int;
        pub fn EVP_CipherUpdate(
            ctx: *mut CipherCtx,
            out: *mut c_uchar,
            outl: *mut c_int,
            inp: *const c_uchar,
            inl: c_int,
        ) -> c_int;
        pub fn EVP_CipherFinal_ex(
            ctx: *mut CipherCtx,
            out: *mut c_uchar,
            outl: *mut c_int,
        ) -> c_int;
    }

    /// The cipher named `name` (explicitly fetched: OpenSSL 3 and later would fetch it
    /// again at each key set otherwise), or null.
    ///
    /// # Safety
    /// `name` is a NUL-terminated string.
    pub unsafe fn cipher(name: *const c_char) -> *mut Cipher {
        // SAFETY: the caller passes a C string; a null library context and property query
        // mean the default ones.
        unsafe { EVP_CIPHER_fetch(std::ptr::null_mut(), name, std::ptr::null()) }
    }

    /// # Safety
    /// `cipher` came from [`cipher`] and is freed once.
    pub unsafe fn free_cipher(cipher: *mut Cipher) {
        // SAFETY: per the contract, a fetched cipher freed once.
        unsafe { EVP_CIPHER_free(cipher) }
    }

    /// # Safety
    /// `cipher` is a live cipher.
    pub unsafe fn key_length(cipher: *const Cipher) -> usize {
        // SAFETY: per the contract.
        unsafe { EVP_CIPHER_get_key_length(cipher) }.max(0) as usize
    }
}

#[cfg(feature = "aws-lc")]
mod evp {
    //! AWS-LC's EVP calls, from `aws-lc-sys` (prefixed symbols).
    pub use aws_lc_sys::{
        EVP_CIPHER_CTX_ctrl, EVP_CIPHER_CTX_free, EVP_CIPHER_CTX_new, EVP_CIPHER_CTX_set_padding,
        EVP_CipherFinal_ex, EVP_CipherInit_ex, EVP_CipherUpdate, OpenSSL_version,
        EVP_CIPHER as Cipher, EVP_CIPHER_CTX as CipherCtx,
    };
    use std::ffi::c_char;
    pub const NAME: &[u8] = b"aws-lc\0";

    /// The cipher named `name` (static in AWS-LC), or null.
    ///
    /// # Safety
    /// `name` is a NUL-terminated string.
    pub unsafe fn cipher(name: *const c_char) -> *mut Cipher {
        // SAFETY: the caller passes a C string; the result is a static table entry.
        unsafe { aws_lc_sys::EVP_get_cipherbyname(name) as *mut Cipher }
    }

    /// AWS-LC's ciphers are static: nothing to free.
    ///
    /// # Safety
    /// None needed; `unsafe` to match the other peer's signature.
    pub unsafe fn free_cipher(_cipher: *mut Cipher) {}

    /// # Safety
    /// `cipher` is a live cipher.
    pub unsafe fn key_length(cipher: *const Cipher) -> usize {
        // SAFETY: per the contract.
        unsafe { aws_lc_sys::EVP_CIPHER_key_length(cipher) as usize }
    }
}

/// One keyed cipher context.
pub struct Ctx {
    cipher: *mut evp::Cipher,
    ctx: *mut evp::CipherCtx,
    /// Whether the cipher is an AEAD one (GCM): the message call then finishes it and
    /// handles the tag.
    aead: bool,
    /// The direction the context was keyed for.
    encrypt: bool,
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: both were created by `sc_peer_new` and are freed only here, once (a null
        // context is accepted by EVP_CIPHER_CTX_free).
        unsafe {
            evp::EVP_CIPHER_CTX_free(self.ctx);
            evp::free_cipher(self.cipher);
        }
    }
}

#[no_mangle]
pub extern "C" fn sc_peer_abi() -> u32 {
    SC_PEER_ABI
}

#[no_mangle]
pub extern "C" fn sc_peer_name() -> *const c_char {
    evp::NAME.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn sc_peer_version() -> *const c_char {
    // SAFETY: OpenSSL_version takes any selector and returns a static string.
    unsafe { evp::OpenSSL_version(OPENSSL_VERSION) }
}

/// See the module documentation.
///
/// # Safety
/// `cipher` is a NUL-terminated string; `key` points to `key_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sc_peer_new(
    cipher: *const c_char,
    key: *const u8,
    key_len: usize,
    encrypt: c_int,
) -> *mut Ctx {
    if cipher.is_null() || key.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `cipher` is a C string per the contract.
    let aead = unsafe { CStr::from_ptr(cipher) }
        .to_bytes()
        .ends_with(b"gcm");
    // SAFETY: `cipher` is a C string per the contract.
    let c = unsafe { evp::cipher(cipher) };
    if c.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: EVP_CIPHER_CTX_new has no preconditions.
    let ctx = unsafe { evp::EVP_CIPHER_CTX_new() };
    // From here on the owner frees both, on every path.
    let owner = Ctx {
        cipher: c,
        ctx,
        aead,
        encrypt: encrypt != 0,
    };
    // SAFETY: `c` is a live cipher.
    if ctx.is_null() || unsafe { evp::key_length(c) } != key_len {
        return ptr::null_mut();
    }
    // SAFETY: `ctx` and `c` are live; `key` holds `key_len` bytes, which is the cipher's
    // key length (checked above), all EVP reads; no IV yet (set per unit or message).
    let ok = unsafe {
        evp::EVP_CipherInit_ex(ctx, c, ptr::null_mut(), key, ptr::null(), (encrypt != 0) as c_int)
    } == 1
        // SAFETY: `ctx` is live and initialised.
        && unsafe { evp::EVP_CIPHER_CTX_set_padding(ctx, 0) } == 1;
    if !ok {
        return ptr::null_mut();
    }
    Box::into_raw(Box::new(owner))
}

/// Sets the IV and runs one update of `len` bytes from `src` to `dst`.
///
/// # Safety
/// `ctx` is live; `iv` holds the cipher's IV length; `src` has `len` readable bytes and
/// `dst` room for `len + 16`.
unsafe fn update(ctx: &Ctx, iv: *const u8, src: *const u8, dst: *mut u8, len: usize) -> bool {
    let Ok(inl) = c_int::try_from(len) else {
        return false;
    };
    let mut outl: c_int = 0;
    // SAFETY: per the contract; a null cipher, engine and key keep the ones set, -1 keeps
    // the direction.
    (unsafe { evp::EVP_CipherInit_ex(ctx.ctx, ptr::null(), ptr::null_mut(), ptr::null(), iv, -1) }
        == 1)
        // SAFETY: per the contract: `len` bytes in, room for `len + 16` out.
        && unsafe { evp::EVP_CipherUpdate(ctx.ctx, dst, &mut outl, src, inl) } == 1
        && outl == inl
}

/// See the module documentation.
///
/// # Safety
/// `ctx` came from `sc_peer_new` and is not in use elsewhere; `src` has `len` readable
/// bytes, `dst` room for `len + 16`; `unit` divides `len`.
#[no_mangle]
pub unsafe extern "C" fn sc_peer_units(
    ctx: *mut Ctx,
    src: *const u8,
    dst: *mut u8,
    len: usize,
    unit: usize,
    first: u64,
    step: u64,
) -> c_int {
    // SAFETY: per the contract, a live context used by this call alone.
    let Some(ctx) = (unsafe { ctx.as_ref() }) else {
        return 0;
    };
    if unit == 0 || !len.is_multiple_of(unit) || src.is_null() || dst.is_null() {
        return 0;
    }
    for i in 0..len / unit {
        let mut iv = [0u8; 16];
        let n = first.wrapping_add((i as u64).wrapping_mul(step));
        iv[..8].copy_from_slice(&n.to_le_bytes());
        let at = i * unit;
        // SAFETY: unit `i` lies within `len`; `dst` has `len + 16` bytes, so the unit's
        // output and its 16 bytes of slack fit; the IV is 16 bytes, every AES mode's IV length or more.
        if !unsafe { update(ctx, iv.as_ptr(), src.add(at), dst.add(at), unit) } {
            return 0;
        }
    }
    1
}

/// See the module documentation.
///
/// # Safety
/// `ctx` came from `sc_peer_new` and is not in use elsewhere; `iv` has `iv_len` bytes
/// (12 for GCM, 16 for the others); `src` has `len` readable bytes, `dst` room for
/// `len + 16`; `tag` is null or has `tag_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn sc_peer_message(
    ctx: *mut Ctx,
    iv: *const u8,
    iv_len: usize,
    src: *const u8,
    dst: *mut u8,
    len: usize,
    tag: *mut u8,
    tag_len: usize,
) -> c_int {
    // SAFETY: per the contract, a live context used by this call alone.
    let Some(ctx) = (unsafe { ctx.as_ref() }) else {
        return 0;
    };
    let want_iv = if ctx.aead { 12 } else { 16 };
    if iv.is_null() || iv_len != want_iv || src.is_null() || dst.is_null() {
        return 0;
    }
    if !ctx.aead {
        // SAFETY: per the contract.
        return unsafe { update(ctx, iv, src, dst, len) } as c_int;
    }
    let (Ok(inl), Ok(tl)) = (c_int::try_from(len), c_int::try_from(tag_len)) else {
        return 0;
    };
    if tag.is_null() || tag_len == 0 || tag_len > 16 {
        return 0;
    }
    let mut outl: c_int = 0;
    let mut fin: c_int = 0;
    // SAFETY: per the contract: IV of 12 bytes, `len` bytes in, room for `len + 16` out;
    // the final step writes nothing for GCM (into the 16 bytes of slack).
    let ok = unsafe {
        evp::EVP_CipherInit_ex(ctx.ctx, ptr::null(), ptr::null_mut(), ptr::null(), iv, -1) == 1
            && set_tag_if_decrypting(ctx, tag, tl)
            && evp::EVP_CipherUpdate(ctx.ctx, dst, &mut outl, src, inl) == 1
            && outl == inl
            && evp::EVP_CipherFinal_ex(ctx.ctx, dst.add(len), &mut fin) == 1
            && fin == 0
            && get_tag_if_encrypting(ctx, tag, tl)
    };
    ok as c_int
}

/// # Safety
/// `tag` has `tl` bytes.
unsafe fn set_tag_if_decrypting(ctx: &Ctx, tag: *mut u8, tl: c_int) -> bool {
    // SAFETY: the tag buffer holds `tl` bytes, which EVP copies.
    ctx.encrypt
        || unsafe { evp::EVP_CIPHER_CTX_ctrl(ctx.ctx, EVP_CTRL_GCM_SET_TAG, tl, tag.cast()) } == 1
}

/// # Safety
/// `tag` has room for `tl` bytes.
unsafe fn get_tag_if_encrypting(ctx: &Ctx, tag: *mut u8, tl: c_int) -> bool {
    // SAFETY: the tag buffer has room for `tl` bytes, which EVP writes.
    !ctx.encrypt
        || unsafe { evp::EVP_CIPHER_CTX_ctrl(ctx.ctx, EVP_CTRL_GCM_GET_TAG, tl, tag.cast()) } == 1
}

/// See the module documentation.
///
/// # Safety
/// `ctx` came from `sc_peer_new` (or is null) and is not used after.
#[no_mangle]
pub unsafe extern "C" fn sc_peer_free(ctx: *mut Ctx) {
    if !ctx.is_null() {
        // SAFETY: per the contract, a box made by `sc_peer_new`, dropped once.
        drop(unsafe { Box::from_raw(ctx) });
    }
}

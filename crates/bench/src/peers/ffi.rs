//! The one file of the bench with `unsafe`: loading a peer library (crates/peer) with
//! `dlopen` and calling its C ABI (version [`ABI`], documented in crates/peer/src/lib.rs).
//!
//! Contract kept here so that nothing above needs `unsafe`:
//! - a library is opened with `RTLD_NOW | RTLD_LOCAL` (its symbols never resolve anything
//!   else, and every one of its own is bound before use) and never closed: the handle and
//!   the function pointers live for the whole process (OpenSSL registers exit handlers
//!   that must find their code mapped);
//! - a library is used only when it reports the ABI version this file speaks;
//! - a [`Context`] owns one peer context, made by `sc_peer_new` and freed once by `Drop`;
//!   it is neither `Send` nor `Sync` (raw pointer), so one thread at a time uses it;
//! - every buffer passed is a live Rust slice whose length the call is told, and every
//!   output buffer has the 16 bytes of slack the ABI asks for (checked before the call).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The version of the peer ABI this file speaks.
pub(crate) const ABI: u32 = 1;

type AbiFn = unsafe extern "C" fn() -> u32;
type StrFn = unsafe extern "C" fn() -> *const c_char;
type NewFn = unsafe extern "C" fn(*const c_char, *const u8, usize, c_int) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type UnitsFn =
    unsafe extern "C" fn(*mut c_void, *const u8, *mut u8, usize, usize, u64, u64) -> c_int;
type MessageFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    usize,
    *const u8,
    *mut u8,
    usize,
    *mut u8,
    usize,
) -> c_int;

/// A loaded peer library (never unloaded).
#[derive(Debug)]
pub(crate) struct Library {
    pub name: String,
    pub version: String,
    new: NewFn,
    free: FreeFn,
    units: UnitsFn,
    message: MessageFn,
}

/// The last `dlerror` message.
fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call
    // on this thread; it is copied at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null: a C string (above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// A static C string from the library, copied.
///
/// # Safety
/// `f` returns null or a NUL-terminated string that stays valid.
unsafe fn string(f: StrFn) -> String {
    // SAFETY: per the contract.
    let p = unsafe { f() };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null: a C string (contract).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Library {
    /// Opens the peer library at `path` and checks its ABI version.
    pub fn open(path: &Path) -> Result<&'static Library, String> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{}: a NUL in the path", path.display()))?;
        // SAFETY: a C string path; dlopen runs the library's initialisers (Rust's and
        // OpenSSL's or AWS-LC's, which only set up their own state).
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(dl_error());
        }
        let sym = |name: &str| -> Result<*mut c_void, String> {
            let n = CString::new(name).expect("no NUL");
            // SAFETY: a live handle (never closed) and a C string.
            let p = unsafe { libc::dlsym(handle, n.as_ptr()) };
            if p.is_null() {
                Err(format!("{}: no symbol {name}", path.display()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol is the function of that name in the peer ABI, whose
        // signature is the type it is cast to; the ABI version is checked before any other
        // is called.
        unsafe {
            let abi: AbiFn = std::mem::transmute::<*mut c_void, AbiFn>(sym("sc_peer_abi")?);
            let got = abi();
            if got != ABI {
                return Err(format!(
                    "{}: peer ABI version {got}, this bench speaks {ABI}; rebuild it (scripts/bench-peers.sh)",
                    path.display()
                ));
            }
            let name: StrFn = std::mem::transmute::<*mut c_void, StrFn>(sym("sc_peer_name")?);
            let version: StrFn = std::mem::transmute::<*mut c_void, StrFn>(sym("sc_peer_version")?);
            let lib = Library {
                name: string(name),
                version: string(version),
                new: std::mem::transmute::<*mut c_void, NewFn>(sym("sc_peer_new")?),
                free: std::mem::transmute::<*mut c_void, FreeFn>(sym("sc_peer_free")?),
                units: std::mem::transmute::<*mut c_void, UnitsFn>(sym("sc_peer_units")?),
                message: std::mem::transmute::<*mut c_void, MessageFn>(sym("sc_peer_message")?),
            };
            Ok(Box::leak(Box::new(lib)))
        }
    }
}

/// One keyed cipher context of a peer library.
#[derive(Debug)]
pub(crate) struct Context {
    lib: &'static Library,
    ctx: *mut c_void,
}

impl Context {
    /// A context for `cipher` (OpenSSL's name, such as `aes-256-xts`) keyed with `key`;
    /// `None` when the library has no such cipher.
    pub fn new(lib: &'static Library, cipher: &str, key: &[u8], encrypt: bool) -> Option<Context> {
        let c = CString::new(cipher).ok()?;
        // SAFETY: a C string and a key slice of the length passed.
        let ctx = unsafe { (lib.new)(c.as_ptr(), key.as_ptr(), key.len(), encrypt as c_int) };
        (!ctx.is_null()).then_some(Context { lib, ctx })
    }

    /// `src` as data units of `unit` bytes, unit `i` with IV plain64(`first + i * step`),
    /// into `dst` (at least 16 bytes longer than `src`). False when the peer fails.
    pub fn units(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        unit: usize,
        first: u64,
        step: u64,
    ) -> bool {
        assert!(
            dst.len() >= src.len() + 16,
            "peer output needs 16 bytes of slack"
        );
        // SAFETY: a live context used by this thread alone (`&mut self`); `src` and `dst`
        // are live slices, `dst` with the slack the ABI asks for (asserted).
        unsafe {
            (self.lib.units)(
                self.ctx,
                src.as_ptr(),
                dst.as_mut_ptr(),
                src.len(),
                unit,
                first,
                step,
            ) == 1
        }
    }

    /// One message with `iv` from `src` into `dst` (at least 16 bytes longer than `src`);
    /// for an AEAD cipher `tag` receives the tag (encrypting) or holds the one to verify
    /// (decrypting). False when the peer fails (a tag that does not verify included).
    pub fn message(
        &mut self,
        iv: &[u8],
        src: &[u8],
        dst: &mut [u8],
        tag: Option<&mut [u8]>,
    ) -> bool {
        assert!(
            dst.len() >= src.len() + 16,
            "peer output needs 16 bytes of slack"
        );
        let (tp, tl) = match tag {
            Some(t) => (t.as_mut_ptr(), t.len()),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: a live context used by this thread alone (`&mut self`); every pointer
        // is a live slice of the length passed with it (or null with 0), `dst` with the
        // slack the ABI asks for (asserted).
        unsafe {
            (self.lib.message)(
                self.ctx,
                iv.as_ptr(),
                iv.len(),
                src.as_ptr(),
                dst.as_mut_ptr(),
                src.len(),
                tp,
                tl,
            ) == 1
        }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: made by `sc_peer_new`, freed only here, once.
        unsafe { (self.lib.free)(self.ctx) }
    }
}

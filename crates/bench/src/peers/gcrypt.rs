//! libgcrypt (the system's `libgcrypt.so.20`) loaded with `dlopen`, for the ciphers the
//! peer libraries of crates/peer lack: only the few calls a bench peer needs
//! (`gcry_check_version`, `gcry_cipher_open`/`setkey`/`setiv`/`encrypt`/`close`).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

const LIBRARY: &CStr = c"libgcrypt.so.20";
/// `GCRY_CIPHER_SERPENT256`, `GCRY_CIPHER_CAMELLIA256`, `GCRY_CIPHER_TWOFISH` (256-bit
/// key) and `GCRY_CIPHER_MODE_XTS` of gcrypt.h.
pub(crate) const SERPENT256: c_int = 306;
pub(crate) const CAMELLIA256: c_int = 312;
pub(crate) const TWOFISH: c_int = 10;
pub(crate) const MODE_XTS: c_int = 13;

type CheckVersion = unsafe extern "C" fn(*const c_char) -> *const c_char;
type Open = unsafe extern "C" fn(*mut *mut c_void, c_int, c_int, c_uint) -> c_uint;
type SetKey = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_uint;
type Crypt = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, *const c_void, usize) -> c_uint;
type Close = unsafe extern "C" fn(*mut c_void);

/// One open libgcrypt cipher handle.
pub(crate) struct Gcrypt {
    handle: *mut c_void,
    setiv: SetKey,
    encrypt: Crypt,
    close: Close,
    pub version: String,
}

fn symbol(lib: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: `lib` is a handle dlopen returned and never closed; `name` is a C string.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(format!("libgcrypt: no symbol {name:?}"));
    }
    Ok(p)
}

/// The library's entry points and version, loaded once per process: libgcrypt's first
/// `gcry_check_version` initialises it and must not run on two threads at once (tests
/// opening two peers in parallel made `gcry_cipher_open` fail).
struct Library {
    open: Open,
    setkey: SetKey,
    setiv: SetKey,
    encrypt: Crypt,
    close: Close,
    version: String,
}

/// The loaded library, or why it cannot be.
fn library() -> Result<&'static Library, String> {
    static LIBRARY_ONCE: std::sync::OnceLock<Result<Library, String>> = std::sync::OnceLock::new();
    LIBRARY_ONCE
        .get_or_init(load)
        .as_ref()
        .map_err(Clone::clone)
}

fn load() -> Result<Library, String> {
    // SAFETY: a C string path; the library stays loaded for the process's life.
    let lib = unsafe { libc::dlopen(LIBRARY.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return Err("libgcrypt.so.20 not found".into());
    }
    // SAFETY: each symbol has the C signature gcrypt.h declares for it.
    let (check, open, setkey, setiv, encrypt, close) = unsafe {
        (
            std::mem::transmute::<*mut c_void, CheckVersion>(symbol(lib, c"gcry_check_version")?),
            std::mem::transmute::<*mut c_void, Open>(symbol(lib, c"gcry_cipher_open")?),
            std::mem::transmute::<*mut c_void, SetKey>(symbol(lib, c"gcry_cipher_setkey")?),
            std::mem::transmute::<*mut c_void, SetKey>(symbol(lib, c"gcry_cipher_setiv")?),
            std::mem::transmute::<*mut c_void, Crypt>(symbol(lib, c"gcry_cipher_encrypt")?),
            std::mem::transmute::<*mut c_void, Close>(symbol(lib, c"gcry_cipher_close")?),
        )
    };
    // SAFETY: a null argument asks for the version without a check and initialises the
    // library (once: `library` runs this on one thread); the result is a static C string.
    let version = unsafe {
        let v = check(std::ptr::null());
        if v.is_null() {
            return Err("libgcrypt: no version".into());
        }
        CStr::from_ptr(v).to_string_lossy().into_owned()
    };
    Ok(Library {
        open,
        setkey,
        setiv,
        encrypt,
        close,
        version,
    })
}

impl Gcrypt {
    /// Opens `algo` in `mode` under `key`.
    pub(crate) fn open(algo: c_int, mode: c_int, key: &[u8]) -> Result<Gcrypt, String> {
        let lib = library()?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `handle` is a valid out-pointer; the key slice is valid for its length.
        unsafe {
            if (lib.open)(&mut handle, algo, mode, 0) != 0 || handle.is_null() {
                return Err("libgcrypt: gcry_cipher_open failed".into());
            }
            if (lib.setkey)(handle, key.as_ptr().cast(), key.len()) != 0 {
                (lib.close)(handle);
                return Err("libgcrypt: gcry_cipher_setkey failed".into());
            }
        }
        Ok(Gcrypt {
            handle,
            setiv: lib.setiv,
            encrypt: lib.encrypt,
            close: lib.close,
            version: lib.version.clone(),
        })
    }

    /// Encrypts `buf` in place as one XTS data unit with this 16-byte tweak.
    pub(crate) fn encrypt_unit(&mut self, tweak: &[u8; 16], buf: &mut [u8]) -> Result<(), String> {
        // SAFETY: the handle is open; the tweak and buffer are valid for their lengths, and
        // a null input asks for in-place encryption.
        let rc = unsafe {
            if (self.setiv)(self.handle, tweak.as_ptr().cast(), 16) != 0 {
                return Err("libgcrypt: gcry_cipher_setiv failed".into());
            }
            (self.encrypt)(
                self.handle,
                buf.as_mut_ptr().cast(),
                buf.len(),
                std::ptr::null(),
                0,
            )
        };
        if rc != 0 {
            return Err(format!("libgcrypt: gcry_cipher_encrypt failed ({rc})"));
        }
        Ok(())
    }
}

impl Drop for Gcrypt {
    fn drop(&mut self) {
        // SAFETY: the handle is open and closed only here.
        unsafe { (self.close)(self.handle) }
    }
}

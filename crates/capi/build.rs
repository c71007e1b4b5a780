//! Names the shared library for the dynamic loader: the cdylib's SONAME is
//! `libsectorcrypt.so.N`, N being [`ABI_MAJOR`], so that a program linked to it records
//! `NEEDED libsectorcrypt.so.N` and keeps working with any later library of the same ABI.
//! `scripts/install-lib.sh` reads the SONAME back from the file it installs, and the tests
//! get N as `SECTORCRYPT_ABI_MAJOR`: this constant is the one place it is written.
//!
//! Only the cdylib gets the option (`rustc-cdylib-link-arg`), and only for ELF targets
//! with a GNU-style linker; the static library, the rlib and the tests are left alone.

/// The C ABI's major number. It changes when the C API or ABI breaks: a function, type,
/// constant or status code removed or renamed, a signature or a struct's layout changed,
/// or a documented behaviour a C program relies on altered; additions keep it. It started
/// at 0 with the project's 0.x versions.
const ABI_MAJOR: u32 = 0;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=SECTORCRYPT_ABI_MAJOR={ABI_MAJOR}");
    let family = std::env::var("CARGO_CFG_TARGET_FAMILY").unwrap_or_default();
    let vendor = std::env::var("CARGO_CFG_TARGET_VENDOR").unwrap_or_default();
    if family.split(',').any(|f| f == "unix") && vendor != "apple" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsectorcrypt.so.{ABI_MAJOR}");
    }
}

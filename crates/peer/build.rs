//! Builds the chosen peer library's native part.
//!
//! `openssl4`: OpenSSL from `openssl-src` (static libcrypto). The library must not reach
//! the system OpenSSL that the bench process has already loaded (same symbol names): the
//! cdylib exports only its `sc_peer_*` functions (rustc's version script makes the rest
//! local), and `-Bsymbolic` binds what is left inside the library at link time.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    #[cfg(feature = "openssl4")]
    {
        let artifacts = openssl_src::Build::new().build();
        println!(
            "cargo:rustc-link-search=native={}",
            artifacts.lib_dir().display()
        );
        println!("cargo:rustc-link-lib=static=crypto");
        println!(
            "cargo:rustc-env=SC_PEER_OPENSSL_SRC={}",
            openssl_src::version()
        );
    }
}

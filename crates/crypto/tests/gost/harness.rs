//! What the GOST tests share: the backends under test, the vector file, hex, test data,
//! the modes by name and the in-place / out-of-place round trip.

use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_crypto::{gost89, magma, GostBackend, Mode};
use std::path::PathBuf;

/// Every GOST backend this CPU can run, soft first; the others are skipped with a printed
/// reason. Soft must always be usable.
pub fn backends() -> Vec<GostBackend> {
    let report = |b: GostBackend| (b, b.ensure_usable().map_err(|e| e.to_string()));
    let slowest_first = GostBackend::ALL.into_iter().rev();
    sectorcrypt_testkit::usable(
        "gost",
        GostBackend::Soft,
        slowest_first.map(report).collect(),
    )
}

/// The vectors folder (`sectorcrypt_testkit::vectors`).
pub fn vectors() -> PathBuf {
    sectorcrypt_testkit::vectors("gost")
}

pub use sectorcrypt_testkit::unhex;

/// A deterministic pseudo-random buffer (xorshift), so failures reproduce.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The block or stream mode `name` (`gost89-ecb`, `gost89-cnt`, `gost89-cfb`,
/// `gost89-cbc`, `magma-ecb`, `magma-ctr`, `magma-ofb`, `magma-cbc`, `magma-cfb`,
/// `magma-ctr-acpkm/SECTION`) on `backend`; `sbox` and `mesh` apply to GOST 28147-89 only.
pub fn mode(name: &str, key: &[u8], sbox: Sbox, mesh: bool, backend: GostBackend) -> Box<dyn Mode> {
    let b = backend;
    if let Some(section) = name.strip_prefix("magma-ctr-acpkm/") {
        let section = section.parse().expect("a section size");
        return Box::new(magma::CtrAcpkm::with_backend(key, section, b).unwrap());
    }
    match name {
        "gost89-ecb" => Box::new(gost89::Ecb::with_backend(key, sbox, mesh, b).unwrap()),
        "gost89-cnt" => Box::new(gost89::Cnt::with_backend(key, sbox, mesh, b).unwrap()),
        "gost89-cfb" => Box::new(gost89::Cfb::with_backend(key, sbox, mesh, b).unwrap()),
        "gost89-cbc" => Box::new(gost89::Cbc::with_backend(key, sbox, mesh, b).unwrap()),
        "magma-ecb" => Box::new(magma::Ecb::with_backend(key, b).unwrap()),
        "magma-ctr" => Box::new(magma::Ctr::with_backend(key, b).unwrap()),
        "magma-ofb" => Box::new(magma::Ofb::with_backend(key, b).unwrap()),
        "magma-cbc" => Box::new(magma::Cbc::with_backend(key, b).unwrap()),
        "magma-cfb" => Box::new(magma::Cfb::with_backend(key, b).unwrap()),
        _ => panic!("no mode {name}"),
    }
}

/// Encrypts `x` in place and out of place (they must agree), decrypts the result both
/// ways (each must give `x` back) and returns the ciphertext.
pub fn round_trip(m: &dyn Mode, iv: &[u8], x: &[u8]) -> Vec<u8> {
    let mut ct = x.to_vec();
    m.encrypt(iv, &mut ct).unwrap();
    let mut out = vec![0u8; x.len()];
    m.encrypt_to(iv, x, &mut out).unwrap();
    assert_eq!(out, ct, "in place and out of place differ");
    let mut back = vec![0u8; x.len()];
    m.decrypt_to(iv, &ct, &mut back).unwrap();
    assert_eq!(back, x, "decrypt_to");
    m.decrypt(iv, &mut out).unwrap();
    assert_eq!(out, x, "decrypt in place");
    ct
}

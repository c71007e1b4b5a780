//! XTS over Serpent, Twofish, Camellia and AES, alone and in cascades, against vectors made
//! with Botan 2 (an implementation independent of the RustCrypto crates the cascade uses):
//! `tests/data/cascade-xts-botan.py` made them and says how. Two 512-byte data units
//! numbered from 0x123456789a; the key and plaintext are fixed byte patterns. Botan 2
//! lacks Kuznyechik: its XTS is checked against OpenSSL's gost provider (gost-engine,
//! `kuznyechik-ecb`, the XTS tweaks applied around it here) on every backend, and the
//! VeraCrypt fixtures that use it (crates/volume/tests/tcrypt) check it too.

use sectorcrypt_crypto::cascade::{
    CamelliaBackend, Cascade, KuznyechikBackend, Layer, SerpentBackend, TwofishBackend,
};
use sha2::{Digest, Sha256};

const UNIT: u64 = 0x12_3456_789a;

fn key(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 37 + 11) as u8).collect()
}

fn plain() -> Vec<u8> {
    (0..1024).map(|i| (i * 7 + 3) as u8).collect()
}

/// The layers of cryptsetup's chain name.
fn layers(name: &str) -> Vec<Layer> {
    name.split('-').map(|n| Layer::parse(n).unwrap()).collect()
}

/// (chain, SHA-256 of the ciphertext, its first 32 bytes), from Botan.
const VECTORS: &[(&str, &str, &str)] = &[
    (
        "serpent",
        "e0d6fe6ce3ee67657a8cd0f6428a994696fc461b5841275619dcce5eb391ad87",
        "557d4006d191f5e2a1161f13533b775771d9dca7b756883e59b8b9e3681066f0",
    ),
    (
        "twofish",
        "33743e84b53e8218c75ef260031c2b88b9b74c27568464de55564365ee6955e1",
        "89334a4af034860eab383c35a85ad64c0d1e66b8282ef2aebd94a58bb5fd7e3b",
    ),
    (
        "camellia",
        "16aa78d4ee032865d8e7d26f134cb2200ec3a2be848955559577d2405a53302d",
        "be7e248a165b2c04ca4be8858bb99062bbabe0eac62b9c9de295e5a84cf0d5ed",
    ),
    (
        "aes",
        "5ddf7508f4b2d3238087725cfdac4663c11cdcecbbc48fc97fa25272b599361d",
        "a9b24554957ccf0cee1245361163a82081f8e31a3624f42a36a2d7f3d1765edc",
    ),
    (
        "serpent-twofish-aes",
        "581f88111291e37843c6c0ef3fa6eba8b3027f8901912fa8550d748169d4d87e",
        "472b90d79a1c9e80beac23bc7308d360e2d6692d101011b6e1ae1e95bf2132a7",
    ),
    (
        "aes-twofish-serpent",
        "2a696464bd5c404b8ed218d5a5f56b390551289b913a8afd50dcd45f9c59ea91",
        "6ae98009f24b9bd451ec758f78fffa1424cc0a9977e7d5923d641b6ef811489f",
    ),
    (
        "serpent-camellia",
        "c6c8dbdc0c28668a3788b12c3d15451e31e53697f72fb5af6319503f3032e9a0",
        "328a2c6ffe76b00e9a854cfe0051f8a542a97bb2805f4f7a2fc7b11a12d25761",
    ),
];

/// Every Serpent backend this CPU runs, the portable one first; the others are printed as
/// skipped with the feature the CPU lacks.
fn serpent_backends() -> Vec<SerpentBackend> {
    let report = |b: SerpentBackend| (b, b.ensure_usable().map_err(|e| e.to_string()));
    let slowest_first = SerpentBackend::ALL.into_iter().rev();
    sectorcrypt_testkit::usable(
        "serpent",
        SerpentBackend::Soft,
        slowest_first.map(report).collect(),
    )
}

/// Every Camellia backend this CPU runs, the portable one first; the others are printed as
/// skipped with the feature the CPU lacks.
fn camellia_backends() -> Vec<CamelliaBackend> {
    let mut out = Vec::new();
    for b in CamelliaBackend::ALL.into_iter().rev() {
        match b.ensure_usable() {
            Ok(()) => out.push(b),
            Err(e) => eprintln!("camellia backend {b}: SKIPPED ({e})"),
        }
    }
    assert_eq!(out.first(), Some(&CamelliaBackend::Soft));
    out
}

/// Every Twofish backend this CPU runs, the portable one first; the others are printed as
/// skipped with the feature the CPU lacks.
fn twofish_backends() -> Vec<TwofishBackend> {
    let mut out = Vec::new();
    for b in TwofishBackend::ALL.into_iter().rev() {
        match b.ensure_usable() {
            Ok(()) => out.push(b),
            Err(e) => eprintln!("twofish backend {b}: SKIPPED ({e})"),
        }
    }
    assert_eq!(out.first(), Some(&TwofishBackend::Soft));
    out
}

/// The Botan vectors through the selected backends, and again with the Serpent, the
/// Camellia and the Twofish layers on every backend this CPU runs.
#[test]
fn xts_layers_and_cascades_match_botan() {
    for &(name, digest, head) in VECTORS {
        let l = layers(name);
        let k = key(Cascade::key_len(&l));
        let mut cascades = vec![("selected".to_string(), Cascade::new(&l, &k).unwrap())];
        if l.contains(&Layer::Serpent) {
            for b in serpent_backends() {
                let c = Cascade::with_serpent_backend(&l, &k, b).unwrap();
                assert_eq!(c.serpent_backend(), Some(b));
                cascades.push((format!("serpent on {b}"), c));
            }
        }
        if l.contains(&Layer::Camellia) {
            for b in camellia_backends() {
                let c = Cascade::with_camellia_backend(&l, &k, b).unwrap();
                assert_eq!(c.camellia_backend(), Some(b));
                cascades.push((format!("camellia on {b}"), c));
            }
        }
        if l.contains(&Layer::Twofish) {
            for b in twofish_backends() {
                let c = Cascade::with_twofish_backend(&l, &k, b).unwrap();
                assert_eq!(c.twofish_backend(), Some(b));
                cascades.push((format!("twofish on {b}"), c));
            }
        }
        for (on, c) in cascades {
            let mut buf = plain();
            c.encrypt(UNIT, 512, &mut buf).unwrap();
            assert_eq!(hex::encode(&buf[..32]), head, "{name}, {on}");
            assert_eq!(hex::encode(Sha256::digest(&buf)), digest, "{name}, {on}");
            c.decrypt(UNIT, 512, &mut buf).unwrap();
            assert_eq!(buf, plain(), "{name}, {on}: decrypt undoes encrypt");
        }
    }
}

#[test]
fn kuznyechik_layers_round_trip_and_differ_by_unit() {
    let l = [Layer::Kuznyechik, Layer::Camellia];
    let c = Cascade::new(&l, &key(128)).unwrap();
    let mut a = plain();
    c.encrypt(7, 512, &mut a).unwrap();
    // Unit 8 (the second unit) is not unit 7's ciphertext repeated.
    assert_ne!(a[..512], a[512..]);
    c.decrypt(7, 512, &mut a).unwrap();
    assert_eq!(a, plain());
}

#[test]
fn bad_sizes_are_refused() {
    let l = [Layer::Serpent];
    assert!(Cascade::new(&l, &key(32)).is_err());
    assert!(Cascade::new(&[], &[]).is_err());
    let c = Cascade::new(&l, &key(64)).unwrap();
    let mut odd = vec![0u8; 520];
    assert!(c.encrypt(0, 512, &mut odd).is_err());
    assert!(c.encrypt(0, 20, &mut odd[..40]).is_err());
    // AES layers refuse equal key halves, as the AES-XTS does.
    let mut same = key(64);
    same.copy_within(0..32, 32);
    assert!(Cascade::new(&[Layer::Aes], &same).is_err());
}

/// Every Kuznyechik backend this CPU runs, the portable one first; the others are printed
/// as skipped with the feature the CPU lacks.
fn kuznyechik_backends() -> Vec<KuznyechikBackend> {
    let report = |b: KuznyechikBackend| (b, b.ensure_usable().map_err(|e| e.to_string()));
    let slowest_first = KuznyechikBackend::ALL.into_iter().rev();
    sectorcrypt_testkit::usable(
        "kuznyechik",
        KuznyechikBackend::Soft,
        slowest_first.map(report).collect(),
    )
}

/// Kuznyechik-ECB of OpenSSL's gost provider, or `None` when it is not installed.
fn gost_kuznyechik_ecb() -> Option<openssl::cipher::Cipher> {
    let provider = openssl::provider::Provider::try_load(None, "gostprov", true).ok()?;
    // The provider stays loaded for the rest of the process.
    std::mem::forget(provider);
    openssl::cipher::Cipher::fetch(None, "kuznyechik-ecb", None).ok()
}

/// XTS over OpenSSL's Kuznyechik-ECB: the unit tweaks encrypted with `k2`, each unit's
/// blocks XORed with the tweak sequence around one ECB call with `k1`.
fn openssl_xts(
    ecb: &openssl::cipher::CipherRef,
    key: &[u8],
    encrypt: bool,
    first: u64,
    unit: usize,
    buf: &mut [u8],
) {
    use openssl::cipher_ctx::CipherCtx;
    let run = |k: &[u8], enc: bool, data: &mut [u8]| {
        let mut ctx = CipherCtx::new().unwrap();
        if enc {
            ctx.encrypt_init(Some(ecb), Some(k), None).unwrap();
        } else {
            ctx.decrypt_init(Some(ecb), Some(k), None).unwrap();
        }
        ctx.set_padding(false);
        let mut out = vec![0u8; data.len() + 16];
        let n = ctx.cipher_update(data, Some(&mut out)).unwrap();
        assert_eq!(n, data.len());
        data.copy_from_slice(&out[..n]);
    };
    let (k1, k2) = key.split_at(32);
    for (i, u) in buf.chunks_exact_mut(unit).enumerate() {
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&first.wrapping_add(i as u64).to_le_bytes());
        run(k2, true, &mut t);
        let mut mask = vec![0u8; unit];
        for m in mask.chunks_exact_mut(16) {
            m.copy_from_slice(&t);
            let v = u128::from_le_bytes(t);
            t = ((v << 1) ^ (0x87 * (v >> 127))).to_le_bytes();
        }
        u.iter_mut().zip(&mask).for_each(|(x, m)| *x ^= m);
        run(k1, encrypt, u);
        u.iter_mut().zip(&mask).for_each(|(x, m)| *x ^= m);
    }
}

/// Kuznyechik-XTS on every backend against OpenSSL's gost provider: units of 16 bytes to
/// 4 KiB (packed several to a step, run step by step, and short last steps), unit numbers
/// from 0 and past 2^64, both ways; and a Kuznyechik-Camellia cascade on every backend
/// against the portable one.
#[test]
fn kuznyechik_xts_on_every_backend_matches_openssl_gost() {
    let Some(ecb) = gost_kuznyechik_ecb() else {
        sectorcrypt_testkit::skipped!(
            "skipped: OpenSSL's gost provider (libengine-gost-openssl) is not installed"
        );
        return;
    };
    let k = key(64);
    for b in kuznyechik_backends() {
        let c = Cascade::with_kuznyechik_backend(&[Layer::Kuznyechik], &k, b).unwrap();
        assert_eq!(c.kuznyechik_backend(), Some(b));
        for (unit, units) in [
            (16usize, 3usize),
            (64, 9),
            (512, 9),
            (528, 2),
            (1040, 2),
            (4096, 3),
        ] {
            for first in [0u64, u64::MAX - 1] {
                let src: Vec<u8> = (0..unit * units).map(|i| (i * 13 + 5) as u8).collect();
                let mut want = src.clone();
                openssl_xts(&ecb, &k, true, first, unit, &mut want);
                let mut got = src.clone();
                c.encrypt(first, unit, &mut got).unwrap();
                assert_eq!(got, want, "{b}: encrypt {units} x {unit} from {first}");
                let mut back = want.clone();
                openssl_xts(&ecb, &k, false, first, unit, &mut back);
                assert_eq!(back, src, "openssl round trip");
                c.decrypt(first, unit, &mut got).unwrap();
                assert_eq!(got, src, "{b}: decrypt {units} x {unit} from {first}");
            }
        }
    }
    let l = [Layer::Kuznyechik, Layer::Camellia];
    let k = key(128);
    let soft = Cascade::with_kuznyechik_backend(&l, &k, KuznyechikBackend::Soft).unwrap();
    let mut want = plain();
    soft.encrypt(UNIT, 512, &mut want).unwrap();
    for b in kuznyechik_backends() {
        let c = Cascade::with_kuznyechik_backend(&l, &k, b).unwrap();
        let mut got = plain();
        c.encrypt(UNIT, 512, &mut got).unwrap();
        assert_eq!(got, want, "kuznyechik-camellia on {b}");
    }
}

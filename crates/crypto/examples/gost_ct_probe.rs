//! A constant-time probe for `scripts/gost-ct-cachegrind.sh`: runs the GOST 28147-89 and
//! Magma modes on one backend with a key, IV and data derived from a seed. Under
//! cachegrind, runs with different seeds must execute exactly the same number of
//! instructions, data reads and writes, and (with the cache simulation) the same L1 misses:
//! a branch, a loop count or a table index that depended on the secret would change them.
//!
//! Usage: `gost_ct_probe SEED soft|avx2|avx512`
#![forbid(unsafe_code)]

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use sectorcrypt_crypto::gost89::Sbox;
use sectorcrypt_crypto::{gost89, magma, GostBackend};

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .expect("usage: gost_ct_probe SEED soft|avx2|avx512");
    let backend = GostBackend::from_name(&args.next().expect("a backend")).expect("a backend");
    // ChaCha: the same instructions and accesses for every seed.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rnd = |n: usize| -> Vec<u8> {
        let mut v = vec![0u8; n];
        rng.fill_bytes(&mut v);
        v
    };
    let key = rnd(32);
    let mut data = rnd(8192);
    let iv: [u8; 8] = rnd(8).try_into().expect("8 bytes");
    let mut nonce = iv;
    nonce[0] &= 0x7f;
    let s = Sbox::CryptoProA;
    let b = backend;
    gost89::Cnt::with_backend(&key, s, true, b)
        .and_then(|c| c.encrypt(&iv, &mut data))
        .expect("cnt");
    gost89::Cfb::with_backend(&key, s, true, b)
        .and_then(|c| c.encrypt(&iv, &mut data))
        .expect("cfb");
    gost89::Cbc::with_backend(&key, s, true, b)
        .and_then(|c| c.decrypt(&iv, &mut data))
        .expect("cbc");
    let m = gost89::Mac::with_backend(&key, s, true, b)
        .expect("mac")
        .mac(&data);
    magma::Ctr::with_backend(&key, b)
        .and_then(|c| c.encrypt(&[1, 2, 3, 4], &mut data))
        .expect("ctr");
    let mut tag = [0u8; 8];
    magma::Mgm::with_backend(&key, b)
        .and_then(|c| c.seal(&nonce, &m, &mut data, &mut tag))
        .expect("mgm");
    let t = magma::Mac::with_backend(&key, b).expect("mac").mac(&data);
    // Kept alive without formatting them (formatting numbers branches on their digits).
    std::hint::black_box((m, tag, t, &data));
}

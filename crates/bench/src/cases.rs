//! The benchmark cases. Their names are an interface (scripts compare them across runs).

mod engine_threads;
mod gcrypt_xts;
mod geli_auth;
mod kuznyechik_xts;

use crate::limit::Bound;
use crate::peers::{Job, Output, Shape};
use crate::Side;
use openssl::cipher::{Cipher, CipherRef};
use openssl::cipher_ctx::CipherCtx;
use sectorcrypt_crypto::{
    aes::{Cbc, Ctr, Ecb, Gcm},
    cascade::Layer,
    dmcrypt::{CipherSpec, SectorCipher, SectorLayout},
    gost89,
    gost89::Sbox,
    magma, Backend, GostBackend,
};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{mpsc, Arc};

/// Our side and the peer of one case.
pub(crate) struct Built {
    pub ours: Side<'static>,
    pub peer: Option<Side<'static>>,
    /// The case's work as any EVP-like library can do it: the other peer libraries
    /// ([`crate::peers`]) run it too. `None` for the cases whose peer is not a library.
    pub job: Option<Job>,
}

type Build = fn(Backend, bool, usize) -> Result<Built, String>;

pub(crate) struct Case {
    pub name: &'static str,
    pub build: Build,
    /// What bounds the case (its `limit` in the report).
    pub bound: Bound,
}

/// Bytes per call for the sector cases: 256 KiB, so source and destination stay in L2.
const SECTOR_BUFFER: usize = 256 << 10;

pub(crate) fn all() -> Vec<Case> {
    vec![
        aes("aes-128-xts/4096", 10, |b, _, _| {
            xts_sectors(b, 32, 4096, true)
        }),
        aes("aes-256-xts/4096", 14, |b, _, _| {
            xts_sectors(b, 64, 4096, true)
        }),
        aes("aes-256-xts-dec/4096", 14, |b, _, _| {
            xts_sectors(b, 64, 4096, false)
        }),
        aes("aes-256-xts/512", 14, |b, _, _| {
            xts_sectors(b, 64, 512, true)
        }),
        aes("aes-256-xts-dec/512", 14, |b, _, _| {
            xts_sectors(b, 64, 512, false)
        }),
        aes("aes-256-ctr/16384", 14, |b, _, _| {
            message(b, "ctr", 32, 16384)
        }),
        aes("aes-256-cbc-dec/16384", 14, |b, _, _| {
            message(b, "cbc-dec", 32, 16384)
        }),
        aes("aes-256-ecb/16384", 14, |b, _, _| {
            message(b, "ecb", 32, 16384)
        }),
        aes("aes-128-ecb/16384", 10, |b, _, _| {
            message(b, "ecb", 16, 16384)
        }),
        aes("aes-256-cbc-enc/16384", 14, |b, _, _| {
            message(b, "cbc-enc", 32, 16384)
        }),
        aes("aes-256-cbc-enc-sectors/4096x64", 14, |b, _, _| {
            cbc_sectors(b, 4096, 64)
        }),
        case("aes-256-xts/4096-mt", xts_multithreaded).bound(Bound::Aes {
            rounds: 14,
            threads: true,
        }),
        case("engine-xts-2threads", |_, _, _| {
            engine_threads::engine_xts_2threads()
        }),
        aes("geli-xts/4096", 14, |_, _, _| geli_xts(4096)),
        case("geli-auth-sha256/4096", |_, _, _| {
            geli_auth::geli_auth_sha256()
        }),
        case("serpent-256-xts/4096", |_, _, _| {
            gcrypt_xts::case(Layer::Serpent)
        }),
        case("camellia-256-xts/4096", |_, _, _| {
            gcrypt_xts::case(Layer::Camellia)
        }),
        case("twofish-256-xts/4096", |_, _, _| {
            gcrypt_xts::case(Layer::Twofish)
        }),
        case("kuznyechik-xts/4096", |_, _, _| {
            kuznyechik_xts::kuznyechik_xts()
        }),
        aes_gcm("aes-256-gcm/16384", 14, |b, _, _| gcm(b, 32, 16384, true)),
        aes_gcm("aes-256-gcm/512", 14, |b, _, _| gcm(b, 32, 512, true)),
        aes_gcm("aes-128-gcm/16384", 10, |b, _, _| gcm(b, 16, 16384, true)),
        aes_gcm("aes-256-gcm-dec/16384", 14, |b, _, _| {
            gcm(b, 32, 16384, false)
        }),
        case("gost89-cnt/16384", |b, _, _| gost(b, "gost89-cnt", 16384)),
        case("magma-ctr/16384", |b, _, _| gost(b, "magma-ctr", 16384)),
        case("gost89-ecb/16384", |b, _, _| gost(b, "gost89-ecb", 16384)),
        case("gost89-cfb/16384", |b, _, _| gost(b, "gost89-cfb", 16384)),
        case("gost89-mac/16384", |b, _, _| gost(b, "gost89-mac", 16384)),
        case("mac-sha256-units/4096", |_, _, _| mac_sha256_units(4096)),
    ]
}

/// A case named `name`, built by `build`, with no stated limit.
const fn case(name: &'static str, build: Build) -> Case {
    Case {
        name,
        build,
        bound: Bound::None,
    }
}

/// An AES case of `rounds` rounds per block on one core.
const fn aes(name: &'static str, rounds: usize, build: Build) -> Case {
    case(name, build).bound(Bound::Aes {
        rounds,
        threads: false,
    })
}

/// An AES-GCM case of `rounds` rounds per block on one core (the same bound: the AES
/// units' limit; GHASH costs no rounds).
const fn aes_gcm(name: &'static str, rounds: usize, build: Build) -> Case {
    aes(name, rounds, build)
}

impl Case {
    /// The case with the limit `bound`.
    const fn bound(self, bound: Bound) -> Case {
        Case { bound, ..self }
    }
}

/// Deterministic filler: the content does not matter to the ciphers, only that both sides
/// see the same bytes.
fn input(len: usize) -> Rc<Vec<u8>> {
    Rc::new(
        (0..len)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect(),
    )
}

fn key(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(151).wrapping_add(7))
        .collect()
}

fn plain64(n: u64) -> [u8; 16] {
    let mut iv = [0u8; 16];
    iv[..8].copy_from_slice(&n.to_le_bytes());
    iv
}

fn e(err: impl std::fmt::Display) -> String {
    err.to_string()
}

/// A zeroed output buffer of `len` bytes that a side writes and the check before timing
/// reads.
fn output(len: usize) -> Output {
    Rc::new(RefCell::new(vec![0u8; len]))
}

/// The system OpenSSL's version string (`OpenSSL 3.0.19 27 Jan 2026`).
fn system_openssl() -> Option<String> {
    Some(openssl::version::version().to_string())
}

/// OpenSSL, one EVP call per sector with that sector's plain64 IV (`step` IV units per
/// sector), or with `iv` when given, key set once.
fn openssl_per_sector(
    cipher: &'static CipherRef,
    key: &[u8],
    sector: usize,
    step: u64,
    iv: Option<[u8; 16]>,
    encrypt: bool,
    src: Rc<Vec<u8>>,
) -> Result<Side<'static>, String> {
    let mut ctx = CipherCtx::new().map_err(e)?;
    if encrypt {
        ctx.encrypt_init(Some(cipher), Some(key), None).map_err(e)?;
    } else {
        ctx.decrypt_init(Some(cipher), Some(key), None).map_err(e)?;
    }
    ctx.set_padding(false);
    // The crate asks for one block of slack after each output (OpenSSL may hold a block
    // back when padding is on; it is off here, so exactly `sector` bytes are written).
    let out = output(src.len() + 16);
    let dst = out.clone();
    let bytes = src.len();
    Ok(Side {
        version: system_openssl(),
        output: Some((out, bytes)),
        name: "openssl".into(),
        bytes,
        call: Box::new(move || {
            let mut dst = dst.borrow_mut();
            for (i, s) in src.chunks_exact(sector).enumerate() {
                let d = &mut dst[i * sector..(i + 1) * sector + 16];
                let iv = iv.unwrap_or_else(|| plain64(i as u64 * step));
                let ok = if encrypt {
                    ctx.encrypt_init(None, None, Some(&iv))
                } else {
                    ctx.decrypt_init(None, None, Some(&iv))
                };
                ok.and_then(|()| ctx.cipher_update(s, Some(d)))
                    .expect("openssl");
            }
        }),
    })
}

fn sector_cipher(
    b: Backend,
    spec: &str,
    key: &[u8],
    sector: usize,
) -> Result<SectorCipher, String> {
    let spec: CipherSpec = spec.parse().map_err(e)?;
    SectorCipher::with_backend(spec, key, SectorLayout::new(sector, false).map_err(e)?, b)
        .map_err(e)
}

fn ours_sectors(c: SectorCipher, encrypt: bool, src: Rc<Vec<u8>>) -> Side<'static> {
    let out = output(src.len());
    let dst = out.clone();
    Side {
        version: None,
        output: Some((out, src.len())),
        name: "sectorcrypt".into(),
        bytes: src.len(),
        call: Box::new(move || {
            let mut dst = dst.borrow_mut();
            if encrypt {
                c.encrypt_to(0, &src, &mut dst)
            } else {
                c.decrypt_to(0, &src, &mut dst)
            }
            .expect("sectorcrypt");
        }),
    }
}

fn xts_sectors(b: Backend, key_len: usize, sector: usize, encrypt: bool) -> Result<Built, String> {
    let k = key(key_len);
    let src = input(SECTOR_BUFFER);
    let cipher = if key_len == 32 {
        Cipher::aes_128_xts()
    } else {
        Cipher::aes_256_xts()
    };
    let step = (sector / 512) as u64;
    Ok(Built {
        ours: ours_sectors(
            sector_cipher(b, "aes-xts-plain64", &k, sector)?,
            encrypt,
            src.clone(),
        ),
        peer: Some(openssl_per_sector(
            cipher,
            &k,
            sector,
            step,
            None,
            encrypt,
            src.clone(),
        )?),
        job: Some(Job {
            cipher: if key_len == 32 {
                "aes-128-xts"
            } else {
                "aes-256-xts"
            },
            key: k,
            encrypt,
            src,
            shape: Shape::Units { unit: sector, step },
        }),
    })
}

fn cbc_sectors(b: Backend, sector: usize, count: usize) -> Result<Built, String> {
    let k = key(32);
    let src = input(sector * count);
    Ok(Built {
        ours: ours_sectors(
            sector_cipher(b, "aes-cbc-plain64", &k, sector)?,
            true,
            src.clone(),
        ),
        peer: Some(openssl_per_sector(
            Cipher::aes_256_cbc(),
            &k,
            sector,
            (sector / 512) as u64,
            None,
            true,
            src.clone(),
        )?),
        job: Some(Job {
            cipher: "aes-256-cbc",
            key: k,
            encrypt: true,
            src,
            shape: Shape::Units {
                unit: sector,
                step: (sector / 512) as u64,
            },
        }),
    })
}

/// One message per call (IV set included) of `len` bytes, with a key of `key_len` bytes
/// (16 or 32 for ECB, 32 for the other modes).
fn message(b: Backend, what: &'static str, key_len: usize, len: usize) -> Result<Built, String> {
    let k = key(key_len);
    let src = input(len);
    let iv = [0x5au8; 16];
    let out = output(len);
    let dst = out.clone();
    let s = src.clone();
    let ours: Box<dyn FnMut()> = match what {
        "ctr" => {
            let c = Ctr::with_backend(&k, b).map_err(e)?;
            Box::new(move || {
                c.apply_keystream_to(&iv, 0, &s, &mut dst.borrow_mut())
                    .expect("ctr")
            })
        }
        "ecb" => {
            let c = Ecb::with_backend(&k, b).map_err(e)?;
            Box::new(move || c.encrypt_to(&s, &mut dst.borrow_mut()).expect("ecb"))
        }
        "cbc-dec" => {
            let c = Cbc::with_backend(&k, b).map_err(e)?;
            Box::new(move || c.decrypt_to(&iv, &s, &mut dst.borrow_mut()).expect("cbc"))
        }
        _ => {
            let c = Cbc::with_backend(&k, b).map_err(e)?;
            Box::new(move || c.encrypt_to(&iv, &s, &mut dst.borrow_mut()).expect("cbc"))
        }
    };
    let (cipher, name, encrypt) = match what {
        "ctr" => (Cipher::aes_256_ctr(), "aes-256-ctr", true),
        "ecb" if key_len == 16 => (Cipher::aes_128_ecb(), "aes-128-ecb", true),
        "ecb" => (Cipher::aes_256_ecb(), "aes-256-ecb", true),
        "cbc-dec" => (Cipher::aes_256_cbc(), "aes-256-cbc", false),
        _ => (Cipher::aes_256_cbc(), "aes-256-cbc", true),
    };
    // One "sector" = the whole message: one IV set and one update per call.
    let peer = openssl_per_sector(cipher, &k, len, 0, Some(iv), encrypt, src.clone())?;
    Ok(Built {
        ours: Side {
            version: None,
            output: Some((out, len)),
            name: "sectorcrypt".into(),
            bytes: len,
            call: ours,
        },
        peer: Some(peer),
        job: Some(Job {
            cipher: name,
            key: k,
            encrypt,
            src,
            shape: Shape::Message { iv: iv.to_vec() },
        }),
    })
}

/// Prefix of our side's name in the engine cases: the engine's sector map makes its
/// ciphers on the selected backend (`SECTORCRYPT_BACKEND`), named after the prefix.
pub(crate) const ENGINE_SIDE: &str = "sectorcrypt-engine-";

/// A GELI AES-XTS-256 provider (metadata version 7) through the engine's sector map: keys
/// per zone of 2^20 sectors from the GELI key source, byte-offset tweaks. The peer is a
/// LUKS2 aes-xts-plain64 volume (one key, 512-byte IV units) on the same path, so the ratio
/// is what GELI's zone keys and tweaks cost. Both encrypt the same 256 KiB per call
/// starting in the second zone (sector 2^20 + 8), as the engine does for a write.
fn geli_xts(sector: usize) -> Result<Built, String> {
    use sectorcrypt_volume::geli::keys::{ZoneKeys, KEY_LEN, ZONE_SHIFT};
    use sectorcrypt_volume::{Geometry, IvRule, Layout};
    let first = (1u64 << ZONE_SHIFT) + 8;
    let geometry = |iv| Geometry {
        sector_size: sector,
        data_offset: 0,
        size: 4 * (1u64 << ZONE_SHIFT) * sector as u64,
        iv,
        metadata: None,
    };
    let spec: CipherSpec = "aes-xts-plain64".parse().map_err(e)?;
    let zones = ZoneKeys::new(7, &key(2 * KEY_LEN), 64, false);
    let geli = Layout::zoned(
        geometry(IvRule::ByteOffset),
        spec,
        1 << ZONE_SHIFT,
        Box::new(zones),
    )
    .map_err(e)?;
    let luks2 =
        Layout::single(geometry(IvRule::Units512 { first: 0 }), spec, &key(64)).map_err(e)?;
    let backend = Backend::selected().map_err(e)?;
    let side = |name: String, layout: Layout| {
        let src = input(SECTOR_BUFFER);
        let mut dst = vec![0u8; SECTOR_BUFFER];
        Side {
            name,
            version: None,
            output: None,
            bytes: SECTOR_BUFFER,
            call: Box::new(move || layout.encrypt_to(first, &src, &mut dst).expect("engine")),
        }
    };
    Ok(Built {
        ours: side(format!("{ENGINE_SIDE}{}", backend.name()), geli),
        peer: Some(side("sectorcrypt-luks2-xts-engine".into(), luks2)),
        job: None,
    })
}

/// All threads, each encrypting its own 256 KiB buffer `REPEAT` times per call, against
/// the same work done by the calling thread alone (our one-core figure, measured
/// interleaved in the same run). The calling thread takes one share; the other threads are
/// started once per case and woken per call through channels, as a storage engine's worker
/// pool would be. Each wake-up costs tens of microseconds on this VM (futex wake and
/// reschedule): with 8 MiB per thread per call the case lost ~5% to it (1.82x), with 32 MiB
/// per call 1.93x; the case measures the cipher's scaling, so the unit of work is large.
fn xts_multithreaded(b: Backend, _quick: bool, threads: usize) -> Result<Built, String> {
    const REPEAT: usize = 128;
    let k = key(64);
    let cipher = Arc::new(sector_cipher(b, "aes-xts-plain64", &k, 4096)?);
    let src: Arc<Vec<u8>> = Arc::new(input(SECTOR_BUFFER).to_vec());
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut go = vec![];
    for _ in 1..threads {
        let (tx, rx) = mpsc::channel::<()>();
        let (c, s, done) = (cipher.clone(), src.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let mut d = vec![0u8; SECTOR_BUFFER];
            // Ends when the case is over and the sender is dropped.
            while rx.recv().is_ok() {
                for _ in 0..REPEAT {
                    c.encrypt_to(0, &s, &mut d).expect("xts");
                }
                if done.send(()).is_err() {
                    break;
                }
            }
        });
        go.push(tx);
    }
    let (own_cipher, own_src) = (cipher.clone(), src.clone());
    let mut own_dst = vec![0u8; SECTOR_BUFFER];
    let ours = Side {
        version: None,
        output: None,
        name: "sectorcrypt".into(),
        bytes: SECTOR_BUFFER * REPEAT * threads,
        call: Box::new(move || {
            for tx in &go {
                tx.send(()).expect("worker alive");
            }
            for _ in 0..REPEAT {
                own_cipher
                    .encrypt_to(0, &own_src, &mut own_dst)
                    .expect("xts");
            }
            for _ in 0..go.len() {
                done_rx.recv().expect("worker alive");
            }
        }),
    };
    let mut dst = vec![0u8; SECTOR_BUFFER];
    let peer = Side {
        version: None,
        output: None,
        name: "sectorcrypt-1core".into(),
        bytes: SECTOR_BUFFER * REPEAT,
        call: Box::new(move || {
            for _ in 0..REPEAT {
                cipher.encrypt_to(0, &src, &mut dst).expect("xts");
            }
        }),
    };
    Ok(Built {
        ours,
        peer: Some(peer),
        job: None,
    })
}

/// AES-GCM, one whole message per call (IV set, update, final and tag included on both
/// sides), 12-byte IV, no AAD.
fn gcm(b: Backend, key_len: usize, len: usize, encrypt: bool) -> Result<Built, String> {
    let k = key(key_len);
    let iv = [0x24u8; 12];
    let g = Gcm::with_backend(&k, b).map_err(e)?;
    let plain = input(len);
    let mut ct = vec![0u8; len];
    let tag = g.seal_to(&iv, &[], &plain, &mut ct).map_err(e)?;
    let src = if encrypt { plain } else { Rc::new(ct) };
    // The output, and the tag behind it when encrypting (on both sides).
    let ours_out = output(len + 16);
    let dst = ours_out.clone();
    let s = src.clone();
    let ours: Box<dyn FnMut()> = if encrypt {
        Box::new(move || {
            let mut d = dst.borrow_mut();
            let t = g.seal_to(&iv, &[], &s, &mut d[..len]).expect("seal");
            d[len..].copy_from_slice(&t);
        })
    } else {
        Box::new(move || {
            g.open_to(&iv, &[], &s, &mut dst.borrow_mut()[..len], &tag)
                .expect("open")
        })
    };
    let cipher = if key_len == 16 {
        Cipher::aes_128_gcm()
    } else {
        Cipher::aes_256_gcm()
    };
    let mut ctx = CipherCtx::new().map_err(e)?;
    if encrypt {
        ctx.encrypt_init(Some(cipher), Some(&k), None).map_err(e)?;
    } else {
        ctx.decrypt_init(Some(cipher), Some(&k), None).map_err(e)?;
    }
    let peer_out = output(len + 16);
    let out = peer_out.clone();
    let job_src = src.clone();
    let peer: Box<dyn FnMut()> = Box::new(move || {
        let mut t = [0u8; 16];
        let mut out = out.borrow_mut();
        if encrypt {
            ctx.encrypt_init(None, None, Some(&iv)).expect("init");
            ctx.cipher_update(&src, Some(&mut out)).expect("update");
            ctx.cipher_final(&mut out[len..]).expect("final");
            ctx.tag(&mut t).expect("tag");
            // GCM's final step writes nothing: the tag goes where ours puts it.
            out[len..].copy_from_slice(&t);
        } else {
            ctx.decrypt_init(None, None, Some(&iv)).expect("init");
            ctx.set_tag(&tag).expect("tag");
            ctx.cipher_update(&src, Some(&mut out)).expect("update");
            ctx.cipher_final(&mut out[len..])
                .expect("final: tag must verify");
        }
    });
    // Encrypting, the tag is compared too.
    let compared = if encrypt { len + 16 } else { len };
    Ok(Built {
        ours: Side {
            version: None,
            output: Some((ours_out, compared)),
            name: "sectorcrypt".into(),
            bytes: len,
            call: ours,
        },
        peer: Some(Side {
            version: system_openssl(),
            output: Some((peer_out, compared)),
            name: "openssl".into(),
            bytes: len,
            call: peer,
        }),
        job: Some(Job {
            cipher: if key_len == 16 {
                "aes-128-gcm"
            } else {
                "aes-256-gcm"
            },
            key: k,
            encrypt,
            src: job_src,
            shape: Shape::Aead {
                iv: iv.to_vec(),
                tag: (!encrypt).then_some(tag),
            },
        }),
    })
}

/// The GOST backend of a run: on the AES backend the selection gives (none named, or the
/// same), the GOST selection (so `SECTORCRYPT_BACKEND=avx2` runs GOST on avx2 while AES
/// runs on soft); on another named one, GOST's backend of that name (`soft`, `avx512`),
/// else the GOST selection.
fn gost_backend(b: Backend) -> Result<GostBackend, String> {
    if Backend::selected().is_ok_and(|s| s == b) {
        return GostBackend::selected().map_err(e);
    }
    GostBackend::from_name(b.name()).or_else(|_| GostBackend::selected().map_err(e))
}

/// OpenSSL's gost provider (gostprov), loaded once beside the default provider; `None`
/// when it is not installed.
fn gost_provider_cipher(name: &str) -> Option<&'static CipherRef> {
    use std::sync::OnceLock;
    static PROVIDER: OnceLock<Option<openssl::provider::Provider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| openssl::provider::Provider::try_load(None, "gostprov", true).ok())
        .as_ref()?;
    let c = Cipher::fetch(None, name, None).ok()?;
    Some(Box::leak(Box::new(c)))
}

/// One GOST message per call of `len` bytes: GOST 28147-89 with key meshing and the S-box
/// OpenSSL's gost provider uses (CryptoPro-A for CNT and the MAC, param-Z for CFB), Magma
/// per RFC 8891. The peer is
/// OpenSSL's gost provider where it has the mode (no ECB and no EVP_MAC in this crate).
fn gost(b: Backend, what: &'static str, len: usize) -> Result<Built, String> {
    let gb = gost_backend(b)?;
    let k = key(32);
    let src = input(len);
    let s = src.clone();
    let mut dst = vec![0u8; len];
    let iv = [0x5au8; 8];
    let sb = Sbox::CryptoProA;
    let ours: Box<dyn FnMut()> = match what {
        "gost89-cnt" => {
            let c = gost89::Cnt::with_backend(&k, sb, true, gb).map_err(e)?;
            Box::new(move || c.encrypt_to(&iv, &s, &mut dst).expect("cnt"))
        }
        "magma-ctr" => {
            let c = magma::Ctr::with_backend(&k, gb).map_err(e)?;
            Box::new(move || c.encrypt_to(&[0x5a; 4], &s, &mut dst).expect("ctr"))
        }
        "gost89-ecb" => {
            let c = gost89::Ecb::with_backend(&k, sb, true, gb).map_err(e)?;
            Box::new(move || c.encrypt_to(&s, &mut dst).expect("ecb"))
        }
        "gost89-cfb" => {
            // OpenSSL's gost89 (CFB) uses param-Z with key meshing: the same here.
            let c = gost89::Cfb::with_backend(&k, Sbox::Tc26Z, true, gb).map_err(e)?;
            Box::new(move || c.encrypt_to(&iv, &s, &mut dst).expect("cfb"))
        }
        _ => {
            let c = gost89::Mac::with_backend(&k, sb, true, gb).map_err(e)?;
            Box::new(move || {
                std::hint::black_box(c.mac(&s));
            })
        }
    };
    let peer_name = match what {
        "gost89-cnt" => Some(("gost89-cnt", 8)),
        "magma-ctr" => Some(("magma-ctr", 4)),
        "gost89-cfb" => Some(("gost89", 8)),
        _ => None,
    };
    let peer = match peer_name.and_then(|(n, ivl)| Some((gost_provider_cipher(n)?, ivl))) {
        Some((cipher, ivl)) => {
            let mut ctx = CipherCtx::new().map_err(e)?;
            ctx.encrypt_init(Some(cipher), Some(&k), None).map_err(e)?;
            ctx.set_padding(false);
            let mut out = vec![0u8; len + 16];
            let src = src.clone();
            let iv = vec![0x5au8; ivl];
            Some(Side {
                version: system_openssl(),
                output: None,
                name: "openssl-gostprov".into(),
                bytes: len,
                call: Box::new(move || {
                    ctx.encrypt_init(None, None, Some(&iv))
                        .and_then(|()| ctx.cipher_update(&src, Some(&mut out)))
                        .expect("openssl gost");
                }),
            })
        }
        None => None,
    };
    Ok(Built {
        ours: Side {
            version: None,
            output: None,
            name: format!("sectorcrypt-gost-{gb}"),
            bytes: len,
            call: ours,
        },
        peer,
        job: None,
    })
}

/// GELI's authenticated-sector tags alone (`sectorcrypt_crypto::mac`): HMAC-SHA256 unit
/// tags of `sector`-byte sectors cut into 512-byte units (32-byte tag, 480 message bytes;
/// the last unit of a sector takes the rest), signed then verified, 256 KiB of sectors
/// per call; the bytes counted are the sectors'. Ours runs on the selected sector-tag
/// backend, or on `SECTORCRYPT_BENCH_MAC` = `soft`, `avx512` or `shaniN` (`N` = 1, 2, 4
/// interleaved units). The peer is OpenSSL per unit: SHA-256 for the unit key, then an
/// HMAC (`PKey::hmac` + `Signer`), then the same again to verify.
fn mac_sha256_units(sector: usize) -> Result<Built, String> {
    use openssl::{hash::MessageDigest, pkey::PKey, sign::Signer};
    use sectorcrypt_crypto::mac::{MacAlgorithm, MacBackend, SectorMac, UnitShape};
    const UNIT: usize = 512;
    const TAG: usize = 32;
    let per = sector.div_ceil(UNIT - TAG);
    let shape = UnitShape {
        unit_len: UNIT,
        units_per_group: per,
        msg_len: UNIT - TAG,
        last_msg_len: sector - (per - 1) * (UNIT - TAG),
    };
    let sectors = SECTOR_BUFFER / sector;
    let first = 5u64 << 32;
    let alg = MacAlgorithm::HmacSha256;
    let akey = key(64);
    let mac = match std::env::var("SECTORCRYPT_BENCH_MAC").ok().as_deref() {
        None | Some("") => SectorMac::new(alg, &akey),
        Some(lanes) if lanes.starts_with("shani") => {
            SectorMac::with_shani_lanes(alg, &akey, lanes[5..].parse().map_err(e)?)
        }
        Some(name) => SectorMac::with_backend(alg, &akey, MacBackend::from_name(name).map_err(e)?),
    }
    .map_err(e)?;
    let name = match std::env::var("SECTORCRYPT_BENCH_MAC") {
        Ok(v) if v.starts_with("shani") => v,
        _ => mac.backend().name().to_string(),
    };
    let mut ours = input(sectors * per * UNIT).to_vec();
    let mut theirs = ours.clone();
    // OpenSSL's tag of unit `i` over `msg`: its SHA-256 for the unit key, then an HMAC.
    let tag = move |i: usize, msg: &[u8]| {
        let mut h = openssl::sha::Sha256::new();
        h.update(&akey);
        h.update(&(first + (i * UNIT) as u64).to_le_bytes());
        let pkey = PKey::hmac(&h.finish()).expect("hmac key");
        let mut signer = Signer::new(MessageDigest::sha256(), &pkey).expect("signer");
        signer.update(msg).expect("hmac");
        signer.sign_to_vec().expect("hmac")
    };
    let openssl = move || {
        for (i, unit) in theirs.chunks_exact_mut(UNIT).enumerate() {
            let (t, msg) = unit.split_at_mut(TAG);
            t.copy_from_slice(&tag(i, &msg[..shape.msg_len_of(i)]));
        }
        for (i, unit) in theirs.chunks_exact(UNIT).enumerate() {
            let want = tag(i, &unit[TAG..TAG + shape.msg_len_of(i)]);
            assert!(openssl::memcmp::eq(&want, &unit[..TAG]), "openssl tag");
        }
    };
    Ok(Built {
        ours: Side {
            version: None,
            output: None,
            name: format!("sectorcrypt-mac-{name}"),
            bytes: sectors * sector,
            call: Box::new(move || {
                mac.sign(&mut ours, shape, first).expect("sign");
                assert_eq!(mac.verify(&ours, shape, first).expect("verify"), None);
            }),
        },
        peer: Some(Side {
            version: system_openssl(),
            output: None,
            name: "openssl-hmac-per-unit".into(),
            bytes: sectors * sector,
            call: Box::new(openssl),
        }),
        job: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Serpent case's peer is libgcrypt, named with its version, and its bytes equal
    /// ours (the case refuses to build otherwise), so the cascade's Serpent-XTS on the
    /// selected backend agrees with a second implementation on 64 units of 4096 bytes.
    #[test]
    fn serpent_case_has_the_libgcrypt_peer_and_agrees_with_it() {
        let built = gcrypt_xts::case(Layer::Serpent).unwrap();
        let peer = built.peer.expect("libgcrypt.so.20 is installed");
        assert_eq!(peer.name, "libgcrypt");
        let version = peer.version.unwrap();
        assert!(version.starts_with("libgcrypt 1."), "{version}");
    }

    /// Every Serpent backend this CPU runs (the portable one always) gives libgcrypt's
    /// bytes, not only the one the case selects.
    #[test]
    fn every_serpent_backend_agrees_with_libgcrypt() {
        let compared = gcrypt_xts::every_backend_agrees_with_libgcrypt(Layer::Serpent).unwrap();
        assert!(compared.contains(&"soft"), "{compared:?}");
    }

    /// The Camellia case's peer is libgcrypt, named with its version, and its bytes equal
    /// ours (the case refuses to build otherwise): the cascade's Camellia-XTS on the
    /// selected backend agrees with a second implementation on 64 units of 4096 bytes.
    #[test]
    fn camellia_case_has_the_libgcrypt_peer_and_agrees_with_it() {
        let built = gcrypt_xts::case(Layer::Camellia).unwrap();
        let peer = built.peer.expect("libgcrypt.so.20 is installed");
        assert_eq!(peer.name, "libgcrypt");
        let version = peer.version.unwrap();
        assert!(version.starts_with("libgcrypt 1."), "{version}");
    }

    /// Every Camellia backend this CPU runs (the portable one always) gives libgcrypt's
    /// bytes, not only the one the case selects.
    #[test]
    fn every_camellia_backend_agrees_with_libgcrypt() {
        let compared = gcrypt_xts::every_backend_agrees_with_libgcrypt(Layer::Camellia).unwrap();
        assert!(compared.contains(&"soft"), "{compared:?}");
    }

    /// The Twofish case's peer is libgcrypt, named with its version, and its bytes equal
    /// ours (the case refuses to build otherwise): the cascade's Twofish-XTS on the
    /// selected backend agrees with a second implementation on 64 units of 4096 bytes.
    #[test]
    fn twofish_case_has_the_libgcrypt_peer_and_agrees_with_it() {
        let built = gcrypt_xts::case(Layer::Twofish).unwrap();
        let peer = built.peer.expect("libgcrypt.so.20 is installed");
        assert_eq!(peer.name, "libgcrypt");
        let version = peer.version.unwrap();
        assert!(version.starts_with("libgcrypt 1."), "{version}");
    }

    /// Every Twofish backend this CPU runs (the portable one always) gives libgcrypt's
    /// bytes, not only the one the case selects.
    #[test]
    fn every_twofish_backend_agrees_with_libgcrypt() {
        let compared = gcrypt_xts::every_backend_agrees_with_libgcrypt(Layer::Twofish).unwrap();
        assert!(compared.contains(&"soft"), "{compared:?}");
    }

    /// The Kuznyechik case's peer is OpenSSL's gost provider, named with the versions, and
    /// its bytes equal ours (the case refuses to build otherwise).
    #[test]
    fn kuznyechik_case_has_the_gost_provider_peer_and_agrees_with_it() {
        let built = kuznyechik_xts::kuznyechik_xts().unwrap();
        let Some(peer) = built.peer else {
            sectorcrypt_testkit::skipped!("skipped: OpenSSL's gost provider is not installed");
            return;
        };
        assert_eq!(peer.name, "openssl-gostprov");
        let version = peer.version.unwrap();
        assert!(version.contains("gost-engine"), "{version}");
    }

    /// Every Kuznyechik backend this CPU runs (the portable one always) gives the gost
    /// provider's bytes, not only the one the case selects.
    #[test]
    fn every_kuznyechik_backend_agrees_with_the_gost_provider() {
        if gost_provider_cipher("kuznyechik-ecb").is_none() {
            sectorcrypt_testkit::skipped!("skipped: OpenSSL's gost provider is not installed");
            return;
        }
        let compared = kuznyechik_xts::every_backend_agrees_with_the_gost_provider().unwrap();
        assert!(compared.contains(&"soft"), "{compared:?}");
    }

    #[test]
    fn every_aes_case_has_an_aes_bound_and_each_ratio_its_pair() {
        let all = all();
        let bound = |name: &str| all.iter().find(|c| c.name == name).map(|c| c.bound);
        // The same-run ratios the speed goals are stated in: each case and its ECB.
        for name in [
            "aes-256-xts/4096",
            "aes-256-xts-dec/4096",
            "aes-128-xts/4096",
            "aes-256-ctr/16384",
            "aes-256-cbc-enc-sectors/4096x64",
            "aes-256-ecb/16384",
            "aes-128-ecb/16384",
        ] {
            assert!(bound(name).is_some(), "no case {name}");
        }
        for c in &all {
            let rounds = match c.bound {
                Bound::Aes { rounds, .. } => Some(rounds),
                Bound::None => None,
            };
            let aes = c.name.starts_with("aes-") || c.name == "geli-xts/4096";
            let want = aes.then(|| {
                if c.name.starts_with("aes-128") {
                    10
                } else {
                    14
                }
            });
            assert_eq!(rounds, want, "{}", c.name);
        }
    }
}

//! GELI providers end to end, held to an independent model: every key and IV is derived
//! here from FreeBSD's formulas (`sys/geom/eli/g_eli.h`, `g_eli_key.c`,
//! `g_eli_key_cache.c`, `g_eli_crypto.c`, `lib/geom/eli/geom_eli.c`) with OpenSSL alone
//! (PBKDF2-HMAC-SHA512, HMAC-SHA512, SHA-256, MD5, AES-CBC and AES-XTS through EVP),
//! never with sectorcrypt's code. Then hostile metadata: each refusal exits 2 and writes
//! nothing; a wrong passphrase exits 3.

#[path = "support/served.rs"]
mod served;
mod support;
#[path = "support/volumes.rs"]
mod volumes;

use openssl::hash::{hash, MessageDigest};
use openssl::pkey::PKey;
use openssl::sign::Signer;
use openssl::symm::Mode;
use sectorcrypt_testkit::reference::{aes, evp};
use sectorcrypt_testkit::{pattern, require, run_stdout};
use std::path::{Path, PathBuf};
use support::{code, ok, s, sc};

fn hmac512(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // OpenSSL refuses an empty HMAC key; HMAC pads keys with zero bytes to the block size,
    // so one zero byte is the same key.
    let key = if key.is_empty() { &[0u8][..] } else { key };
    let k = PKey::hmac(key).unwrap();
    let mut m = Signer::new(MessageDigest::sha512(), &k).unwrap();
    for p in parts {
        m.update(p).unwrap();
    }
    m.sign_to_vec().unwrap()
}

/// The metadata fields the model needs, read at the offsets of `struct g_eli_metadata`.
struct Md {
    version: u32,
    ealgo: u16,
    keylen: usize,
    provsize: u64,
    sectorsize: usize,
    keys: u8,
    iterations: i32,
    salt: Vec<u8>,
    mkeys: Vec<u8>,
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |a, &x| (a << 8) | u64::from(x))
}

fn parse(sector: &[u8]) -> Md {
    assert_eq!(&sector[..10], b"GEOM::ELI\0");
    let md5 = hash(MessageDigest::md5(), &sector[..495]).unwrap();
    assert_eq!(&md5[..], &sector[495..511], "the stored MD5");
    Md {
        version: le(&sector[16..20]) as u32,
        ealgo: le(&sector[24..26]) as u16,
        keylen: le(&sector[26..28]) as usize,
        provsize: le(&sector[30..38]),
        sectorsize: le(&sector[38..42]) as usize,
        keys: sector[42],
        iterations: le(&sector[43..47]) as u32 as i32,
        salt: sector[47..111].to_vec(),
        mkeys: sector[111..495].to_vec(),
    }
}

/// The master key (IV key || data key) of slot 0, as `g_eli_mkey_decrypt` finds it.
fn master_key(md: &Md, keyfiles: &[&[u8]], pass: &[u8]) -> Vec<u8> {
    let mut parts: Vec<Vec<u8>> = keyfiles.iter().map(|k| k.to_vec()).collect();
    match md.iterations {
        -1 => {}
        0 => {
            parts.push(md.salt.clone());
            parts.push(pass.to_vec());
        }
        n => {
            let mut dk = [0u8; 64];
            openssl::pkcs5::pbkdf2_hmac(
                pass,
                &md.salt,
                n as usize,
                MessageDigest::sha512(),
                &mut dk,
            )
            .unwrap();
            parts.push(dk.to_vec());
        }
    }
    let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
    let user = hmac512(&[], &refs);
    let enc = hmac512(&user, &[&[1]]);
    let slot = &md.mkeys[..192];
    let plain = evp(
        aes("cbc", md.keylen / 8),
        Mode::Decrypt,
        &enc[..md.keylen / 8],
        Some(&[0u8; 16]),
        slot,
    );
    let check = hmac512(&hmac512(&user, &[&[0]]), &[&plain[..128]]);
    assert_eq!(check, &plain[128..], "the slot's HMAC");
    plain[..128].to_vec()
}

/// Decrypts GELI sector `n` (`ct`) with the model's keys and IV.
fn decrypt_sector(md: &Md, mkey: &[u8], n: u64, ct: &[u8]) -> Vec<u8> {
    let (iv_key, data_key) = mkey.split_at(64);
    let offset = n * md.sectorsize as u64;
    let zone = n >> 20;
    let key = if md.version < 5 {
        data_key.to_vec()
    } else {
        let base = if md.version < 7 { iv_key } else { data_key };
        hmac512(base, &[b"ekey", &zone.to_le_bytes()])
    };
    match md.ealgo {
        22 => {
            let k = &key[..md.keylen / 4];
            let mut tweak = [0u8; 16];
            tweak[..8].copy_from_slice(&offset.to_le_bytes());
            evp(aes("xts", k.len()), Mode::Decrypt, k, Some(&tweak), ct)
        }
        11 => {
            let k = &key[..md.keylen / 8];
            let mut h = openssl::sha::Sha256::new();
            h.update(iv_key);
            h.update(&offset.to_le_bytes());
            let iv = h.finish();
            evp(aes("cbc", k.len()), Mode::Decrypt, k, Some(&iv[..16]), ct)
        }
        a => panic!("the model knows no algorithm {a}"),
    }
}

fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn last_sector(img: &Path) -> Vec<u8> {
    let b = std::fs::read(img).unwrap();
    b[b.len() - 512..].to_vec()
}

/// Formats `img` (`size`), writes `data` at GELI sector `at`, and checks the model
/// decrypts every written sector to `data`. Returns the metadata.
fn round_trip(img: &Path, size: &str, fmt: &[&str], key: &[&str], at: u64, data: &[u8]) -> Md {
    let args = [
        &["format", s(img), "--type", "geli", "--size", size, "-q"][..],
        fmt,
        key,
    ]
    .concat();
    ok(sc(&args, b""));
    let md = parse(&last_sector(img));
    let off = (at * md.sectorsize as u64).to_string();
    let input = file(img.parent().unwrap(), "in", data);
    ok(sc(
        &[
            &["write", s(img), "--offset", &off, "--input", s(&input)][..],
            key,
        ]
        .concat(),
        b"",
    ));
    let back = img.parent().unwrap().join("back");
    let len = data.len().to_string();
    ok(sc(
        &[
            &[
                "read",
                s(img),
                "--offset",
                &off,
                "--length",
                &len,
                "--output",
                s(&back),
            ][..],
            key,
        ]
        .concat(),
        b"",
    ));
    assert_eq!(
        std::fs::read(&back).unwrap(),
        data,
        "read gives back what was written"
    );
    (md, at).0
}

fn check_model(img: &Path, md: &Md, mkey: &[u8], at: u64, data: &[u8]) {
    let raw = std::fs::read(img).unwrap();
    let ss = md.sectorsize;
    for (i, want) in data.chunks(ss).enumerate() {
        let n = at + i as u64;
        let ct = &raw[n as usize * ss..(n as usize + 1) * ss];
        assert_eq!(decrypt_sector(md, mkey, n, ct), want, "sector {n}");
    }
}

#[test]
fn the_model_decrypts_every_cipher_key_length_and_sector_size() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"hunter2\n");
    for (cipher, keylen, ss, iter) in [
        ("aes-xts", "128", "512", "0"),
        ("AES-XTS", "256", "4096", "1000"),
        ("aes", "128", "4096", "1"),
        ("aes-cbc", "128", "512", "1000"),
        ("aes-cbc", "192", "4096", "0"),
        ("aes-cbc", "256", "512", "7"),
    ] {
        let img = dir
            .path()
            .join(format!("{cipher}-{keylen}-{ss}-{iter}.img"));
        let fmt = [
            "--cipher",
            cipher,
            "--key-size",
            keylen,
            "--sector-size",
            ss,
            "--pbkdf-force-iterations",
            iter,
        ];
        let key = ["--key-file", s(&pass)];
        let data = pattern(3 * 4096, 7);
        let md = round_trip(&img, "1M", &fmt, &key, 2, &data);
        assert_eq!(md.version, 7);
        assert_eq!(md.keylen.to_string(), keylen);
        assert_eq!(md.sectorsize.to_string(), ss);
        assert_eq!(md.iterations.to_string(), iter);
        assert_eq!(md.provsize, 1 << 20);
        assert_eq!(md.keys, 1);
        // geli -J reads the passphrase up to its first newline.
        let mkey = master_key(&md, &[], b"hunter2");
        check_model(&img, &md, &mkey, 2, &data);
    }
}

#[test]
fn older_metadata_versions_take_their_keys_where_geli_did() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"old");
    // 6: zone keys from the IV key; 4: one data key; 1: the first version with md_aalgo.
    for (version, cipher) in [
        ("6", "aes-xts"),
        ("5", "aes-cbc"),
        ("4", "aes-cbc"),
        ("1", "aes-cbc"),
    ] {
        let img = dir.path().join(format!("v{version}.img"));
        let fmt = [
            "--cipher",
            cipher,
            "--geli-version",
            version,
            "--pbkdf-force-iterations",
            "0",
        ];
        let key = ["--key-file", s(&pass)];
        let data = pattern(2048, 3);
        let md = round_trip(&img, "256K", &fmt, &key, 5, &data);
        assert_eq!(md.version.to_string(), version);
        let mkey = master_key(&md, &[], b"old");
        check_model(&img, &md, &mkey, 5, &data);
    }
}

#[test]
fn keyfiles_are_hashed_in_order_before_the_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let k1 = file(dir.path(), "k1", &pattern(3000, 1));
    let k2 = file(dir.path(), "k2", b"second keyfile");
    let pass = file(dir.path(), "pass", b"with keyfiles");
    let data = pattern(1024, 9);
    let img = dir.path().join("kf.img");
    let key = [
        "--keyfile-component",
        s(&k1),
        "--keyfile-component",
        s(&k2),
        "--key-file",
        s(&pass),
    ];
    let md = round_trip(
        &img,
        "128K",
        &["--pbkdf-force-iterations", "3"],
        &key,
        0,
        &data,
    );
    let mkey = master_key(
        &md,
        &[&pattern(3000, 1), b"second keyfile"],
        b"with keyfiles",
    );
    check_model(&img, &md, &mkey, 0, &data);
    // The keyfiles in the other order are another key.
    let swapped = [
        "test-key",
        s(&img),
        "--keyfile-component",
        s(&k2),
        "--keyfile-component",
        s(&k1),
        "--key-file",
        s(&pass),
    ];
    assert_eq!(code(&sc(&swapped, b"")), 3);

    // Keyfiles only: iterations -1, no passphrase read.
    let img = dir.path().join("kf-only.img");
    let key = ["--keyfile-component", s(&k1), "--no-passphrase"];
    let md = round_trip(&img, "128K", &[], &key, 1, &data);
    assert_eq!(md.iterations, -1);
    let mkey = master_key(&md, &[&pattern(3000, 1)], b"");
    check_model(&img, &md, &mkey, 1, &data);
}

#[test]
fn a_provider_larger_than_one_key_zone_changes_keys_at_sector_2_pow_20() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"zones");
    let img = dir.path().join("big.img");
    let key = ["--key-file", s(&pass)];
    // 2^20 + 64 sectors of 512 bytes and the metadata sector, sparse.
    let size = ((1u64 << 20) + 65) * 512;
    let data = pattern(8 * 512, 11);
    let md = round_trip(
        &img,
        &size.to_string(),
        &["--pbkdf-force-iterations", "0"],
        &key,
        (1 << 20) - 4,
        &data,
    );
    let mkey = master_key(&md, &[], b"zones");
    check_model(&img, &md, &mkey, (1 << 20) - 4, &data);
}

/// `format IMG --type geli --size SIZE --key-file PASS --pbkdf-force-iterations 0 EXTRA`.
fn format_geli(img: &Path, size: &str, pass: &Path, extra: &[&str]) {
    let args = [
        "format",
        s(img),
        "--type",
        "geli",
        "--size",
        size,
        "--key-file",
        s(pass),
        "--pbkdf-force-iterations",
        "0",
        "-q",
    ];
    ok(sc(&[&args[..], extra].concat(), b""));
}

/// Rewrites the metadata of `img` with `edit` applied, the MD5 recomputed when `fix_md5`.
fn tamper(img: &Path, fix_md5: bool, edit: impl FnOnce(&mut [u8])) {
    let mut b = std::fs::read(img).unwrap();
    let n = b.len();
    let sector = &mut b[n - 512..];
    edit(sector);
    if fix_md5 {
        let md5 = hash(MessageDigest::md5(), &sector[..495]).unwrap();
        sector[495..511].copy_from_slice(&md5);
    }
    std::fs::write(img, b).unwrap();
}

#[test]
fn hostile_metadata_exits_2_and_writes_nothing_a_wrong_passphrase_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"right");
    let wrong = file(dir.path(), "wrong", b"wrong");
    let input = file(dir.path(), "in", &pattern(512, 1));
    let fresh = dir.path().join("fresh.img");
    format_geli(&fresh, "64K", &pass, &[]);
    let out = sc(&["test-key", s(&fresh), "--key-file", s(&wrong)], b"");
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));

    // Each case: how the metadata (its sector in `m`) is mangled, the MD5 recomputed
    // except for "md5", and what the error says.
    type Edit = fn(&mut [u8]);
    let cases: [(&str, Edit, &str); 8] = [
        ("md5", |m| m[60] ^= 1, "MD5 mismatch"),
        ("version", |m| m[16] = 8, "version 8 is unknown"),
        ("ealgo", |m| m[24] = 99, "algorithm 99 is unknown"),
        ("blowfish", |m| m[24] = 3, "Blowfish-CBC is not supported"),
        ("keylen", |m| m[26] = 0x40, "key length"),
        (
            "auth",
            |m| (m[20], m[28]) = (m[20] | 0x10, 6),
            "HMAC/MD5 is not supported",
        ),
        ("provsize", |m| m[31] ^= 0x10, "provider size mismatch"),
        ("sectorsize", |m| m[39] = 3, "sector size"),
    ];
    let truncate: Edit = |_| {};
    let cases = cases
        .into_iter()
        .chain([("truncated", truncate, "none of luks1, luks2, geli")]);
    for (name, edit, why) in cases {
        let img = dir.path().join(format!("{name}.img"));
        std::fs::copy(&fresh, &img).unwrap();
        if name == "truncated" {
            let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
            f.set_len(64 * 1024 - 512).unwrap();
        } else {
            tamper(&img, name != "md5", edit);
        }
        let before = std::fs::read(&img).unwrap();
        for args in [
            vec!["test-key", s(&img), "--key-file", s(&pass)],
            vec![
                "write",
                s(&img),
                "--key-file",
                s(&pass),
                "--input",
                s(&input),
            ],
            vec![
                "read",
                s(&img),
                "--key-file",
                s(&pass),
                "--output",
                "/dev/null",
            ],
        ] {
            let out = sc(&args, b"");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(code(&out), 2, "{name} {}: {err}", args[0]);
            assert!(err.contains(why), "{name} {}: {err}", args[0]);
        }
        assert_eq!(
            std::fs::read(&img).unwrap(),
            before,
            "{name}: nothing written"
        );
    }
}

#[test]
fn setkey_delkey_backup_restore_and_kill() {
    let dir = tempfile::tempdir().unwrap();
    let p1 = file(dir.path(), "p1", b"one");
    let p2 = file(dir.path(), "p2", b"two");
    let img = dir.path().join("keys.img");
    format_geli(&img, "256K", &p1, &[]);
    let orig = std::fs::read(&img).unwrap();
    // geli setkey with the same passphrase and count: the same bytes.
    ok(sc(
        &["change-key", s(&img), s(&p1), "--key-file", s(&p1)],
        b"",
    ));
    assert_eq!(
        std::fs::read(&img).unwrap(),
        orig,
        "change-key to the same passphrase"
    );
    let out = ok(sc(
        &["add-key", s(&img), s(&p2), "--key-file", s(&p1), "-S", "1"],
        b"",
    ));
    assert!(out.contains("keyslot 1 added"), "{out}");
    // Both slots decrypt to the same master key in the model.
    let md = parse(&last_sector(&img));
    assert_eq!(md.keys, 0b11);
    let a = master_key(&md, &[], b"one");
    let slot1 = Md {
        mkeys: md.mkeys[192..].to_vec(),
        ..parse(&last_sector(&img))
    };
    assert_eq!(master_key(&slot1, &[], b"two"), a);
    // Both slots share the iteration count: changing it needs the other slot unused.
    let out = sc(
        &[
            "change-key",
            s(&img),
            s(&p1),
            "--key-file",
            s(&p2),
            "--pbkdf-force-iterations",
            "5",
        ],
        b"",
    );
    assert_eq!(code(&out), 2);
    let out = sc(&["add-key", s(&img), s(&p2), "--key-file", s(&p1)], b"");
    assert_eq!(code(&out), 2, "no free slot");
    ok(sc(
        &["remove-key", s(&img), "--key-file", s(&p2), "-q"],
        b"",
    ));
    assert_eq!(
        code(&sc(&["test-key", s(&img), "--key-file", s(&p2)], b"")),
        3
    );
    assert_eq!(
        code(&sc(&["test-key", s(&img), "--key-file", s(&p1)], b"")),
        0
    );

    // A backup is exactly the last sector; a restore after zeroing it gives it back.
    let bk = dir.path().join("bk");
    ok(sc(&["header", "backup", s(&img), s(&bk)], b""));
    let before = std::fs::read(&img).unwrap();
    assert_eq!(std::fs::read(&bk).unwrap(), &before[before.len() - 512..]);
    tamper(&img, false, |m| m.fill(0));
    ok(sc(&["header", "restore", s(&img), s(&bk), "-q"], b""));
    assert_eq!(std::fs::read(&img).unwrap(), before);
    // A backup of another provider size is refused.
    let small = dir.path().join("small.img");
    std::fs::write(&small, vec![0u8; 128 * 1024]).unwrap();
    let out = sc(&["header", "restore", s(&small), s(&bk), "-q"], b"");
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&small).unwrap(), vec![0u8; 128 * 1024]);

    // geli kill: the metadata sector overwritten, the data left.
    ok(sc(&["erase", s(&img), "-q"], b""));
    let after = std::fs::read(&img).unwrap();
    assert_eq!(after[..after.len() - 512], before[..before.len() - 512]);
    assert_ne!(after[after.len() - 512..], before[before.len() - 512..]);
    assert_eq!(
        code(&sc(&["test-key", s(&img), "--key-file", s(&p1)], b"")),
        2
    );
}

#[test]
fn served_over_nbd_what_nbdcopy_writes_is_what_the_model_decrypts() {
    require!("nbdcopy", "nbdinfo");
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"nbd");
    let img = dir.path().join("served.img");
    format_geli(
        &img,
        "2M",
        &pass,
        &[
            "--cipher",
            "aes-cbc",
            "--key-size",
            "256",
            "--sector-size",
            "4096",
        ],
    );
    let md = parse(&last_sector(&img));
    let size = (2 << 20) - 4096;
    let plain = pattern(size, 21);
    let input = file(dir.path(), "in.bin", &plain);
    let sock = dir.path().join("s.sock");
    let srv = served::Served::start(&[s(&img), "--key-file", s(&pass)], &sock);
    let info = run_stdout(
        std::process::Command::new("nbdinfo")
            .arg("--size")
            .arg(srv.uri()),
    );
    assert_eq!(info.trim(), size.to_string());
    run_stdout(
        std::process::Command::new("nbdcopy")
            .args(["--flush"])
            .arg(&input)
            .arg(srv.uri()),
    );
    let (status, log) = srv.stop("TERM");
    assert!(status.success(), "exit {status}: {log}");
    let mkey = master_key(&md, &[], b"nbd");
    check_model(&img, &md, &mkey, 0, &plain);
}

#[test]
fn init_flags_are_stored_as_geli_stores_them_and_an_empty_keyfile_is_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"flags");
    let flags = |img: &Path| le(&last_sector(img)[20..24]);
    // geli init sets AUTORESIZE (0x200) unless -R.
    let plain = dir.path().join("plain.img");
    format_geli(&plain, "64K", &pass, &[]);
    assert_eq!(flags(&plain), 0x200);
    let all = dir.path().join("all.img");
    let every = [
        "--geli-boot",
        "--geli-boot-loader",
        "--geli-display-pass",
        "--geli-no-trim",
    ];
    format_geli(&all, "64K", &pass, &every);
    assert_eq!(flags(&all), 0x200 | 0x2 | 0x80 | 0x100 | 0x40);
    let no_resize = dir.path().join("no-resize.img");
    format_geli(
        &no_resize,
        "64K",
        &pass,
        &["--geli-no-autoresize", "--geli-boot"],
    );
    assert_eq!(flags(&no_resize), 0x2);

    // geli init -P -K /dev/null: an empty keyfile, keyfiles only.
    let empty = file(dir.path(), "empty", b"");
    let img = dir.path().join("empty-key.img");
    let key = ["--keyfile-component", s(&empty), "--no-passphrase"];
    let data = pattern(512, 4);
    let md = round_trip(&img, "64K", &[], &key, 3, &data);
    assert_eq!(md.iterations, -1);
    let mkey = master_key(&md, &[b""], b"");
    check_model(&img, &md, &mkey, 3, &data);
}

#[test]
fn a_metadata_backup_opens_a_killed_provider_through_header() {
    let dir = tempfile::tempdir().unwrap();
    let pass = file(dir.path(), "pass", b"backup");
    let img = dir.path().join("killed.img");
    format_geli(&img, "256K", &pass, &[]);
    let data = pattern(8192, 5);
    let input = file(dir.path(), "in", &data);
    ok(sc(
        &[
            "write",
            s(&img),
            "--key-file",
            s(&pass),
            "--input",
            s(&input),
        ],
        b"",
    ));
    let bk = dir.path().join("meta.bak");
    ok(sc(&["header", "backup", s(&img), s(&bk)], b""));
    ok(sc(&["erase", s(&img), "-q"], b""));
    assert_eq!(
        code(&sc(&["test-key", s(&img), "--key-file", s(&pass)], b"")),
        2
    );
    let out = dir.path().join("out");
    let read = ["read", s(&img), "--header", s(&bk), "--key-file", s(&pass)];
    ok(sc(
        &[&read[..], &["--length", "8192", "--output", s(&out)]].concat(),
        b"",
    ));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // The backup names its provider's size: another data image is refused.
    let other = file(dir.path(), "other.img", &vec![0u8; 128 * 1024]);
    let read = [
        "read",
        s(&other),
        "--header",
        s(&bk),
        "--key-file",
        s(&pass),
    ];
    let o = sc(&[&read[..], &["--output", s(&out)]].concat(), b"");
    assert_eq!(code(&o), 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("provider size mismatch"));
}

#[test]
fn add_key_and_change_key_keep_the_keyfile_components() {
    let dir = tempfile::tempdir().unwrap();
    let k1 = file(dir.path(), "k1", &pattern(700, 4));
    let p1 = file(dir.path(), "p1", b"old");
    let p2 = file(dir.path(), "p2", b"new");
    let p3 = file(dir.path(), "p3", b"third");
    let img = dir.path().join("kf-keys.img");
    let kf = ["--keyfile-component", s(&k1)];
    format_geli(&img, "256K", &p1, &kf);
    let test_key = |pass: &Path, keyfiles: &[&str]| {
        let args = [&["test-key", s(&img), "--key-file", s(pass)][..], keyfiles].concat();
        code(&sc(&args, b""))
    };
    // The old key (keyfile + passphrase) opens slot 0; add-key writes slot 1 with the
    // same keyfile and the new passphrase, as geli setkey -n 1 -k K -K K does.
    ok(sc(
        &[&["add-key", s(&img), s(&p2), "--key-file", s(&p1)][..], &kf].concat(),
        b"",
    ));
    assert_eq!(test_key(&p2, &kf), 0, "the added key, with the keyfile");
    assert_eq!(test_key(&p2, &[]), 3, "the added key needs the keyfile");
    ok(sc(
        &[
            &["change-key", s(&img), s(&p3), "--key-file", s(&p2)][..],
            &kf,
        ]
        .concat(),
        b"",
    ));
    assert_eq!(test_key(&p3, &kf), 0, "the changed key, with the keyfile");
    assert_eq!(test_key(&p3, &[]), 3);
    assert_eq!(test_key(&p2, &kf), 3, "the key before the change");
    // remove-key finds the slot the passphrase and keyfile open.
    ok(sc(
        &[&["remove-key", s(&img), "--key-file", s(&p1)][..], &kf].concat(),
        b"",
    ));
    assert_eq!(test_key(&p1, &kf), 3, "slot removed");
    assert_eq!(test_key(&p3, &kf), 0, "the other slot is left");
}

//! What the GELI tests share: the independent Python model (`tests/geli_ref.py`), the
//! public FreeBSD-made images in `tests/data/geli/`, FAT filesystems holding a known file,
//! MBR partition tables, and the check whether the binary under test formats GELI yet.
// Each test binary that includes this file uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{bin, s};

/// The reference model's script.
pub fn model_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/geli_ref.py")
}

/// The folder of the GELI test data.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/geli")
}

/// Why the model cannot run here (no python3, or no `cryptography` module), if it cannot.
pub fn model_missing() -> Option<String> {
    let out = Command::new("python3")
        .args(["-c", "import cryptography.hazmat.primitives.ciphers"])
        .output();
    match out {
        Err(e) => Some(format!("python3 does not run: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "python3 has no cryptography module: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// Returns from the calling test with `skipped: REASON` unless the model can run (a failure
/// under `SECTORCRYPT_STRICT=1`, see `sectorcrypt_testkit::skip`).
#[macro_export]
macro_rules! require_model {
    () => {
        if let Some(why) = $crate::geli::model_missing() {
            sectorcrypt_testkit::skipped!("skipped: {why}");
            return;
        }
    };
}

/// Runs the model with `args` (no bytecode cache written beside it).
pub fn model(args: &[&str]) -> Output {
    Command::new("python3")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(model_script())
        .args(args)
        .output()
        .expect("run python3 geli_ref.py")
}

/// Runs the model with `args`; panics with its stderr unless it succeeds; its JSON output.
pub fn model_ok(args: &[&str]) -> serde_json::Value {
    let out = model(args);
    assert!(
        out.status.success(),
        "geli_ref.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("geli_ref.py prints JSON")
}

/// The model's decryption of `img`'s whole data area with the passphrase in `passfile`.
pub fn model_decrypt(img: &Path, passfile: &Path, dir: &Path) -> Vec<u8> {
    let out = dir.join("model.plain");
    model_ok(&[
        "decrypt",
        s(img),
        "--passfile",
        s(passfile),
        "--out",
        s(&out),
    ]);
    std::fs::read(&out).expect("read the model's plaintext")
}

/// A GELI image made by the model: `size` bytes, holding `puts` (offset, file) in its data
/// area and nothing elsewhere (holes), version `version`, one passphrase.
pub struct ModelImage<'a> {
    pub cipher: &'a str,
    pub keylen: u32,
    pub sector: u32,
    pub iterations: u32,
    pub version: u32,
}

/// The parameters of an image: cipher, key length, sector size, iterations, version.
pub const fn image(
    cipher: &str,
    keylen: u32,
    sector: u32,
    iterations: u32,
    version: u32,
) -> ModelImage<'_> {
    ModelImage {
        cipher,
        keylen,
        sector,
        iterations,
        version,
    }
}

/// Returns from the calling test with the printed reason unless the binary formats GELI (a
/// failure under `SECTORCRYPT_STRICT=1`).
#[macro_export]
macro_rules! require_sectorcrypt_geli {
    () => {
        if let Err(why) = $crate::geli::sectorcrypt_geli() {
            sectorcrypt_testkit::skip(why);
            return;
        }
    };
}

/// A temporary folder with a passphrase file `pass` and a data file `data`.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub pass: PathBuf,
    pub data: PathBuf,
}

/// A [`Scratch`] holding `pass` and `data`.
pub fn scratch(pass: &[u8], data: &[u8]) -> Scratch {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (p, d) = (dir.path().join("pass"), dir.path().join("data"));
    std::fs::write(&p, pass).expect("write the passphrase file");
    std::fs::write(&d, data).expect("write the data file");
    Scratch {
        dir,
        pass: p,
        data: d,
    }
}

impl ModelImage<'_> {
    pub fn create(&self, img: &Path, size: u64, puts: &[(u64, &Path)], passfile: &Path) {
        let (keylen, sector, iterations, version, size) = (
            self.keylen.to_string(),
            self.sector.to_string(),
            self.iterations.to_string(),
            self.version.to_string(),
            size.to_string(),
        );
        let puts: Vec<String> = puts.iter().map(|(o, f)| format!("{o}:{}", s(f))).collect();
        let mut args = vec![
            "create",
            s(img),
            "--size",
            &size,
            "--passfile",
            s(passfile),
            "--cipher",
            self.cipher,
            "--keylen",
            &keylen,
            "--sectorsize",
            &sector,
            "--iterations",
            &iterations,
            "--version",
            &version,
        ];
        for p in &puts {
            args.extend(["--put", p]);
        }
        model_ok(&args);
    }
}

/// A copy of the public image `name` (`tests/data/geli/NAME.img.xz`) in `dir`.
pub fn fixture(name: &str, dir: &Path) -> PathBuf {
    let xz = data_dir().join(format!("{name}.img.xz"));
    let out = Command::new("xz")
        .args(["-dc", s(&xz)])
        .output()
        .expect("run xz");
    assert!(out.status.success(), "xz -dc {xz:?} failed");
    let img = dir.join(format!("{name}.img"));
    std::fs::write(&img, out.stdout).expect("write the fixture");
    img
}

/// A FAT filesystem image of `mib` MiB at `path` holding `files` (name, bytes) in its root.
pub fn fat_image(path: &Path, mib: u64, files: &[(&str, &[u8])]) {
    let f = std::fs::File::create(path).expect("create the filesystem image");
    f.set_len(mib << 20).expect("size the filesystem image");
    drop(f);
    sectorcrypt_testkit::run(Command::new("mkfs.fat").arg(path));
    let dir = path.parent().expect("a parent folder");
    for (name, bytes) in files {
        let local = dir.join(format!("{name}.local"));
        std::fs::write(&local, bytes).expect("write the file to copy");
        let target = format!("::/{name}");
        sectorcrypt_testkit::run(Command::new("mcopy").args(["-i", s(path), s(&local), &target]));
    }
}

/// The bytes of file `name` in the root of the FAT filesystem at `offset` in `image`.
pub fn fat_file(image: &Path, offset: u64, name: &str) -> Vec<u8> {
    let spec = format!("{}@@{offset}", s(image));
    sectorcrypt_testkit::run(Command::new("mtype").args(["-i", &spec, &format!("::/{name}")]))
        .stdout
}

/// A master boot record with one FAT32-LBA partition of `sectors` 512-byte sectors from
/// sector `start`.
pub fn mbr(start: u32, sectors: u32) -> Vec<u8> {
    let mut m = vec![0u8; 512];
    m[446 + 4] = 0x0c;
    m[446 + 8..446 + 12].copy_from_slice(&start.to_le_bytes());
    m[446 + 12..446 + 16].copy_from_slice(&sectors.to_le_bytes());
    m[510] = 0x55;
    m[511] = 0xaa;
    m
}

/// `Ok` when the binary under test formats GELI (`format --help` lists the type),
/// otherwise the line the skipped cases print.
pub fn sectorcrypt_geli() -> Result<(), String> {
    let out = Command::new(bin())
        .args(["format", "--help"])
        .output()
        .expect("run sectorcrypt format --help");
    let help = String::from_utf8_lossy(&out.stdout).to_lowercase();
    if help.contains("geli") {
        Ok(())
    } else {
        Err("skipped: sectorcrypt has no GELI support yet".to_string())
    }
}

/// A GELI image made by the binary under test: `sectorcrypt format IMG --type geli ...`
/// on a sparse file of `size` bytes, then each (offset, file) of `puts` stored with
/// `sectorcrypt write`.
pub fn sectorcrypt_image(
    c: &ModelImage,
    img: &Path,
    size: u64,
    puts: &[(u64, &Path)],
    passfile: &Path,
) {
    let f = std::fs::File::create(img).expect("create the image");
    f.set_len(size).expect("size the image");
    drop(f);
    let (keylen, sector, iterations) = (
        c.keylen.to_string(),
        c.sector.to_string(),
        c.iterations.to_string(),
    );
    let mut args = vec![
        "format",
        s(img),
        "--type",
        "geli",
        "--cipher",
        c.cipher,
        "--key-size",
        &keylen,
        "--sector-size",
        &sector,
        "--pbkdf-force-iterations",
        &iterations,
        "--key-file",
        s(passfile),
        "--batch",
    ];
    let version = c.version.to_string();
    if c.version != 7 {
        args.extend(["--geli-version", &version]);
    }
    crate::support::ok(crate::support::sc(&args, b""));
    for (off, file) in puts {
        let off = off.to_string();
        crate::support::ok(crate::support::sc(
            &[
                "write",
                s(img),
                "--key-file",
                s(passfile),
                "--input",
                s(file),
                "--offset",
                &off,
            ],
            b"",
        ));
    }
}

/// A deterministic file body of `len` bytes for `seed` (no zero runs to hide behind).
pub fn body(len: usize, seed: u8) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32 ^ u32::from(seed);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 8) as u8
        })
        .collect()
}

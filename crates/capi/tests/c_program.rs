//! The C test program (`tests/c/sectorcrypt_test.c`) compiled with `cc` against the
//! committed header and the libraries this build made, three ways: linked to
//! `libsectorcrypt.so`, to `libsectorcrypt.a`, and with `pkg-config --cflags --libs` after
//! `scripts/install-lib.sh` into a temporary prefix. Each build runs on fresh volumes that
//! cryptsetup made with a known volume key; what the program wrote, to the volume and
//! through the sector cipher, is then checked against dm-crypt's formula computed with
//! OpenSSL. The program itself checks the round trip and every error path.
//!
//! The shared library's names are checked with binutils' `readelf -d` and with `ldd`: the
//! library's SONAME is `libsectorcrypt.so.N` (N the ABI major), a program linked to it needs
//! that name, and the loader finds it through the installed links (`libsectorcrypt.so.N ->
//! libsectorcrypt.so.N.M.P`, `libsectorcrypt.so -> libsectorcrypt.so.N`), also when the
//! install replaces an older one.

use openssl::symm::Mode as Direction;
use sectorcrypt_testkit::reference::dm_crypt;
use sectorcrypt_testkit::{pattern, require, run};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

const MIB: u64 = 1 << 20;
/// Where the attached volume's data starts (cryptsetup `--offset`, in 512-byte sectors).
const DATA_AT: u64 = 16 * MIB;
/// Where the harness writes ciphertext, and the program writes plaintext (as in the C file).
const PLAIN_AT: u64 = 12288;
const NEW_AT: u64 = MIB + 77;
/// The ABI major of the shared library (the N of its SONAME `libsectorcrypt.so.N`), as
/// `build.rs` sets it.
const ABI_MAJOR: &str = env!("SECTORCRYPT_ABI_MAJOR");

/// The inputs of one run of the program.
struct Fixture {
    dir: TempDir,
    key: Vec<u8>,
    expected: Vec<u8>,
    fresh: Vec<u8>,
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Two LUKS2 volumes of one volume key (header attached; header detached), a file
    /// with no header, and the program's inputs; OpenSSL's ciphertext of `expected` at
    /// [`PLAIN_AT`] of both volumes.
    fn new() -> Fixture {
        let f = Fixture {
            dir: tempfile::Builder::new().prefix("capi-").tempdir().unwrap(),
            key: pattern(64, 21),
            expected: pattern(64 * 1024, 22),
            fresh: pattern(5000, 23),
        };
        std::fs::write(f.path("pass"), b"correct horse battery").unwrap();
        std::fs::write(f.path("key"), &f.key).unwrap();
        std::fs::write(f.path("expected.bin"), &f.expected).unwrap();
        std::fs::write(f.path("new.bin"), &f.fresh).unwrap();
        // A VeraCrypt volume with a hidden volume (cryptsetup's TCRYPT fixtures, committed
        // for the volume crate's tests).
        let fixtures = crate_dir().join("../volume/tests/data/tcrypt/tcrypt-images.tar.xz");
        run(Command::new("tar")
            .arg("xJf")
            .arg(&fixtures)
            .arg("-C")
            .arg(f.dir.path())
            .arg("tcrypt-images/vc_1-sha512-xts-aes-hidden"));
        std::fs::rename(
            f.path("tcrypt-images/vc_1-sha512-xts-aes-hidden"),
            f.path("vc-hidden.img"),
        )
        .unwrap();
        File::create(f.path("plain.img"))
            .unwrap()
            .set_len(4 * MIB)
            .unwrap();
        f.luks_format("attached.img", &["--offset", &(DATA_AT / 512).to_string()]);
        let hdr = f.path("detached.hdr").display().to_string();
        f.luks_format("detached.img", &["--offset", "0", "--header", &hdr]);
        let cipher = f.model("aes-xts-plain64", 512, 1, PLAIN_AT / 512, &f.expected);
        for (image, data_at) in [("attached.img", DATA_AT), ("detached.img", 0)] {
            let file = File::options().write(true).open(f.path(image)).unwrap();
            file.write_all_at(&cipher, data_at + PLAIN_AT).unwrap();
        }
        f
    }

    /// `cryptsetup luksFormat` of a new 20 MiB `image` with the fixture's volume key and
    /// passphrase, plus `extra` options.
    fn luks_format(&self, image: &str, extra: &[&str]) {
        File::create(self.path(image))
            .unwrap()
            .set_len(20 * MIB)
            .unwrap();
        let mut cmd = Command::new("cryptsetup");
        cmd.args(["luksFormat", "-q", "--type", "luks2"])
            .args(["--cipher", "aes-xts-plain64", "--key-size", "512"])
            .args(["--sector-size", "512", "--pbkdf", "pbkdf2"])
            .args(["--pbkdf-force-iterations", "1000", "--volume-key-file"])
            .arg(self.path("key"))
            .arg("--key-file")
            .arg(self.path("pass"))
            .args(extra);
        run(cmd.arg(self.path(image)));
    }

    /// dm-crypt's sectors by OpenSSL (the key of `spec`'s length taken from the front).
    fn model(&self, spec: &str, size: usize, step: u64, first: u64, data: &[u8]) -> Vec<u8> {
        let key = if spec.starts_with("aes-xts") {
            &self.key[..]
        } else {
            &self.key[..32]
        };
        dm_crypt(spec, key, size, step, first, data, Direction::Encrypt)
    }

    /// Runs the program `exe` on the fixture, then checks what it wrote. `shared` is the
    /// folder whose `libsectorcrypt.so.N` (the [`soname`]) the program must need and load,
    /// or `None` for a program that must need none. (Cargo's `LD_LIBRARY_PATH`, which names
    /// `target/debug` and its possibly older copies first, is removed: the program's run
    /// path decides.)
    fn run_and_check(&self, exe: &Path, shared: Option<&Path>) {
        let needed = dynamic(exe, "NEEDED");
        let ours: Vec<_> = needed
            .iter()
            .filter(|n| n.contains("sectorcrypt"))
            .collect();
        let ldd = run(Command::new("ldd").arg(exe).env_remove("LD_LIBRARY_PATH")).stdout;
        let ldd = String::from_utf8_lossy(&ldd);
        let loaded = ldd.lines().find(|l| l.contains("libsectorcrypt"));
        match shared {
            Some(dir) => {
                assert_eq!(ours, [&soname()], "the program's NEEDED entries");
                let want = format!("{} => {}/{} ", soname(), dir.display(), soname());
                assert!(
                    loaded.is_some_and(|l| l.contains(&want)),
                    "{want:?} in {ldd}"
                );
            }
            None => {
                assert!(ours.is_empty(), "the static build needs {ours:?}");
                assert!(
                    loaded.is_none(),
                    "the static build needs a shared one: {ldd}"
                );
            }
        }
        let out = Command::new(exe)
            .arg(self.dir.path())
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} failed ({}):\n{}{}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprint!("{}", String::from_utf8_lossy(&out.stdout));
        // The plaintext written at an odd offset is there as dm-crypt's formula says.
        let (first, end) = (NEW_AT / 512 * 512, (NEW_AT + 5000).div_ceil(512) * 512);
        let mut raw = vec![0u8; (end - first) as usize];
        File::open(self.path("attached.img"))
            .unwrap()
            .read_exact_at(&mut raw, DATA_AT + first)
            .unwrap();
        let key = &self.key;
        let plain = dm_crypt(
            "aes-xts-plain64",
            key,
            512,
            1,
            first / 512,
            &raw,
            Direction::Decrypt,
        );
        let skip = (NEW_AT - first) as usize;
        assert!(plain[skip..skip + 5000] == self.fresh[..], "the write");
        // The LUKS1 volume `sectorcrypt_format` made opens with cryptsetup.
        run(Command::new("cryptsetup")
            .args(["open", "--test-passphrase", "--key-file"])
            .arg(self.path("pass"))
            .arg(self.path("made-luks1.img")));
        // The sector cipher's outputs.
        for (file, spec, size, step, first) in [
            ("xts-512.bin", "aes-xts-plain64", 512, 1, 24),
            ("xts-4096.bin", "aes-xts-plain64", 4096, 8, 24),
            ("xts-large-4096.bin", "aes-xts-plain64", 4096, 1, 3),
            ("essiv-512.bin", "aes-cbc-essiv:sha256", 512, 1, 5),
        ] {
            let got = std::fs::read(self.path(file)).unwrap();
            let want = self.model(spec, size, step, first, &self.expected);
            assert!(got == want, "{file} differs from OpenSSL's {spec}");
        }
    }
}

/// Where cargo put the libraries this test was built with: beside the test binary
/// (`target/debug/deps`). `cargo test` does not copy them up to `target/debug`, which may
/// hold older ones from a `cargo build`.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().to_path_buf();
    for lib in ["libsectorcrypt.so", "libsectorcrypt.a"] {
        assert!(dir.join(lib).is_file(), "{} has no {lib}", dir.display());
    }
    dir
}

/// The shared library's SONAME: `libsectorcrypt.so.N`, N the ABI major.
fn soname() -> String {
    format!("libsectorcrypt.so.{ABI_MAJOR}")
}

/// The installed file's name: the SONAME, then the minor and patch of the version.
fn real_name() -> String {
    let (minor, patch) = (
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
    );
    format!("{}.{minor}.{patch}", soname())
}

/// The values of the `tag` entries (`SONAME`, `NEEDED`) of `elf`'s dynamic section, as
/// binutils' `readelf -d` prints them (`0x...01 (NEEDED)  Shared library: [libc.so.6]`).
fn dynamic(elf: &Path, tag: &str) -> Vec<String> {
    let out = run(Command::new("readelf").arg("-d").arg(elf)).stdout;
    let tag = format!("({tag})");
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(tag.as_str()))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_string()))
        .collect()
}

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles the C program into `out` with `cc`, warnings as errors, then `link` options.
fn compile(out: &Path, cflags: &[String], link: &[String]) {
    let mut cmd = Command::new("cc");
    cmd.args(["-std=c11", "-pthread", "-Wall", "-Wextra", "-Werror"])
        .arg("-pedantic")
        .args(cflags)
        .arg(crate_dir().join("tests/c/sectorcrypt_test.c"))
        .arg("-o")
        .arg(out)
        .args(link);
    run(&mut cmd);
}

fn include_flag() -> String {
    format!("-I{}", crate_dir().join("include").display())
}

/// The system libraries a Rust static library needs here, as rustc prints them for an
/// empty one (this crate's dependencies link none of their own). Cargo cannot be asked
/// from inside `cargo test`, which holds the build directory's lock.
fn native_static_libs(scratch: &Path) -> Vec<String> {
    let src = scratch.join("probe.rs");
    std::fs::write(&src, "").unwrap();
    let out = run(Command::new("rustc")
        .args(["--crate-type", "staticlib", "--crate-name", "probe"])
        .args(["--print", "native-static-libs", "-o"])
        .arg(scratch.join("libprobe.a"))
        .arg(&src));
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.split_once("native-static-libs: ").map(|(_, libs)| libs))
        .unwrap_or_else(|| panic!("no native-static-libs in rustc's output:\n{text}"));
    line.split_whitespace().map(String::from).collect()
}

#[test]
fn c_program_linked_to_the_shared_library() {
    require!("cc", "cryptsetup", "readelf");
    let f = Fixture::new();
    let lib = lib_dir();
    let built = lib.join("libsectorcrypt.so");
    assert_eq!(
        dynamic(&built, "SONAME"),
        [soname()],
        "the library's SONAME"
    );
    // The program is linked to the build's file and finds it at run time by the SONAME,
    // as an installed library is found: through a link of that name in its run path.
    let run_dir = f.path("run");
    std::fs::create_dir(&run_dir).unwrap();
    std::os::unix::fs::symlink(&built, run_dir.join(soname())).unwrap();
    let exe = f.path("sectorcrypt_test");
    let link = [
        format!("-L{}", lib.display()),
        "-lsectorcrypt".into(),
        format!("-Wl,-rpath,{}", run_dir.display()),
    ];
    compile(&exe, &[include_flag()], &link);
    f.run_and_check(&exe, Some(&run_dir));
}

#[test]
fn c_program_linked_to_the_static_library() {
    require!("cc", "cryptsetup", "rustc");
    let f = Fixture::new();
    let exe = f.path("sectorcrypt_test_static");
    let archive = lib_dir().join("libsectorcrypt.a");
    let mut link = vec![archive.display().to_string()];
    link.extend(static_libs(f.dir.path()));
    compile(&exe, &[include_flag()], &link);
    f.run_and_check(&exe, None);
}

/// The libraries a static link of this build's `libsectorcrypt.a` needs: the system ones
/// rustc names ([`native_static_libs`]) and, for a build with RBD (the workspace's `rbd`
/// feature reaches the library through sectorcrypt-image), librbd and librados, which the
/// archive then calls.
fn static_libs(scratch: &Path) -> Vec<String> {
    let mut libs = native_static_libs(scratch);
    let bytes = std::fs::read(lib_dir().join("libsectorcrypt.a")).unwrap();
    if bytes.windows(9).any(|w| w == b"rbd_close") {
        libs.extend(["-lrbd".to_string(), "-lrados".to_string()]);
    }
    libs
}

/// Runs `scripts/install-lib.sh prefix` on the libraries of this build, with `libs` as
/// the pc file's Libs.private.
fn install(prefix: &Path, libs: &str) {
    run(Command::new("bash")
        .arg(crate_dir().join("../../scripts/install-lib.sh"))
        .arg(prefix)
        .env("SECTORCRYPT_PREBUILT", lib_dir())
        .env("SECTORCRYPT_LIBS_PRIVATE", libs));
}

/// Checks the shared library's names under `prefix/lib`: the real file
/// `libsectorcrypt.so.N.M.P` (this build's library, SONAME `libsectorcrypt.so.N`), the
/// link of the SONAME to it and the development link `libsectorcrypt.so` to the SONAME's.
fn check_installed_names(prefix: &Path) {
    let dir = prefix.join("lib");
    let real = dir.join(real_name());
    let meta = std::fs::symlink_metadata(&real);
    assert!(
        meta.is_ok_and(|m| m.is_file()),
        "{} is no file",
        real.display()
    );
    let built = std::fs::read(lib_dir().join("libsectorcrypt.so")).unwrap();
    assert!(
        std::fs::read(&real).unwrap() == built,
        "{real:?} is not this build's"
    );
    assert_eq!(dynamic(&real, "SONAME"), [soname()], "the installed SONAME");
    for (link, to) in [
        (soname(), real_name()),
        ("libsectorcrypt.so".into(), soname()),
    ] {
        let target = std::fs::read_link(dir.join(&link));
        assert_eq!(
            target.ok(),
            Some(PathBuf::from(&to)),
            "{link} is no link to {to}"
        );
    }
}

#[test]
fn c_program_built_with_pkg_config_after_install() {
    require!("cc", "cryptsetup", "rustc", "pkg-config", "readelf");
    let f = Fixture::new();
    let prefix = f.path("prefix");
    let libs = static_libs(f.dir.path()).join(" ");
    install(&prefix, &libs);
    let header = std::fs::read(prefix.join("include/sectorcrypt.h")).unwrap();
    assert!(header == std::fs::read(crate_dir().join("include/sectorcrypt.h")).unwrap());
    assert!(
        prefix.join("lib/libsectorcrypt.a").is_file(),
        "no .a installed"
    );
    check_installed_names(&prefix);
    let pkg_config = |args: &[&str]| {
        let out = run(Command::new("pkg-config")
            .args(args)
            .arg("sectorcrypt")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")));
        let text = String::from_utf8(out.stdout).unwrap();
        text.split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(pkg_config(&["--modversion"]), [env!("CARGO_PKG_VERSION")]);
    let statically = pkg_config(&["--static", "--libs"]).join(" ");
    assert!(statically.contains(&libs), "Libs.private: {statically}");
    // A static build from what pkg-config says alone (the archive named instead of the
    // shared library): Libs.private must hold every library the archive needs.
    let mut flags = pkg_config(&["--cflags"]);
    flags.extend(pkg_config(&["--static", "--libs"]).into_iter().map(|l| {
        if l == "-lsectorcrypt" {
            "-l:libsectorcrypt.a".to_string()
        } else {
            l
        }
    }));
    let exe = f.path("sectorcrypt_test_pc_static");
    compile(&exe, &[], &flags);
    f.run_and_check(&exe, None);
    let mut flags = pkg_config(&["--cflags", "--libs"]);
    flags.push(format!("-Wl,-rpath,{}", prefix.join("lib").display()));
    let exe = f.path("sectorcrypt_test_pc");
    compile(&exe, &[], &flags);
    f.run_and_check(&exe, Some(&prefix.join("lib")));
    // The loader's path is the SONAME's link, which leads to the installed file.
    let ldd = run(Command::new("ldd").arg(&exe).env_remove("LD_LIBRARY_PATH")).stdout;
    let ldd = String::from_utf8_lossy(&ldd).into_owned();
    let path = ldd
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(&format!("{} => ", soname()))?
                .split(' ')
                .next()
        })
        .unwrap_or_else(|| panic!("no {} in {ldd}", soname()));
    let real = prefix.join("lib").join(real_name());
    assert_eq!(
        std::fs::canonicalize(path).unwrap(),
        real.canonicalize().unwrap()
    );
}

#[test]
fn install_replaces_an_older_install() {
    require!("readelf");
    let scratch = tempfile::Builder::new().prefix("capi-").tempdir().unwrap();
    let (prefix, lib) = (
        scratch.path().join("prefix"),
        scratch.path().join("prefix/lib"),
    );
    std::fs::create_dir_all(&lib).unwrap();
    // An install from before the SONAME (a plain file where the development link goes),
    // a file of this version that a running program may still map (held by a second name
    // to see that it is replaced, not overwritten), another release of this ABI and a
    // library of another ABI, which programs linked to it still need.
    let other_abi = format!(
        "libsectorcrypt.so.{}.0.0",
        ABI_MAJOR.parse::<u32>().unwrap() + 1
    );
    let other_release = format!("{}.999.0", soname());
    for name in [
        "libsectorcrypt.so",
        &real_name(),
        &other_release,
        &other_abi,
    ] {
        std::fs::write(lib.join(name), format!("old {name}")).unwrap();
    }
    let mapped = scratch.path().join("mapped");
    std::fs::hard_link(lib.join(real_name()), &mapped).unwrap();
    for round in 0..2 {
        install(&prefix, "-lpthread");
        check_installed_names(&prefix);
        assert!(
            !lib.join(&other_release).exists(),
            "round {round}: {other_release} left"
        );
        let kept = std::fs::read_to_string(lib.join(&other_abi));
        assert_eq!(kept.ok(), Some(format!("old {other_abi}")), "round {round}");
        let old = format!("old {}", real_name()).into_bytes();
        let held = std::fs::read(&mapped).unwrap();
        assert!(held == old, "round {round}: overwritten in place");
    }
}

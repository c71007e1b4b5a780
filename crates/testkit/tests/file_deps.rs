//! scripts/file-deps.sh on small made-up crates: two files of one module that import each
//! other are a circle (as luks2's copies.rs and validate.rs were), also through a `pub use`
//! re-export or a grouped import; a file and the modules around it are the module tree,
//! not a circle; the repository's own crates pass.

use std::path::Path;
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn check(src: &Path) -> Output {
    Command::new("bash")
        .arg(repo().join("scripts/file-deps.sh"))
        .arg(src)
        .output()
        .unwrap()
}

/// A crate of `files` (path under src, text).
fn crate_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn two_sibling_files_that_import_each_other_are_a_circle() {
    let c = crate_of(&[
        ("lib.rs", "mod luks2;\n"),
        (
            "luks2/mod.rs",
            "mod copies;\nmod validate;\npub use copies::{Binary, BIN_SIZE};\n",
        ),
        (
            "luks2/copies.rs",
            "use super::validate::validate;\npub const BIN_SIZE: usize = 4096;\npub struct Binary;\n",
        ),
        (
            "luks2/validate.rs",
            "use super::copies::{BIN_SIZE, Binary as B};\npub fn validate() {}\n",
        ),
    ]);
    let o = check(c.path());
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("CIRCLE among: luks2/copies.rs, luks2/validate.rs"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_circle_through_a_re_export_is_found() {
    let c = crate_of(&[
        ("lib.rs", "pub mod format;\nmod restore_user;\n"),
        (
            "format/mod.rs",
            "mod header;\nmod restore;\npub use header::Header;\n",
        ),
        (
            "format/header.rs",
            "pub struct Header;\nfn f() { super::restore::write(); }\n",
        ),
        (
            "format/restore.rs",
            "pub fn write() { let _h: Option<super::Header> = None; }\n",
        ),
        ("restore_user.rs", "use crate::format::Header;\n"),
    ]);
    let o = check(c.path());
    assert!(
        stderr(&o).contains("CIRCLE among: format/header.rs, format/restore.rs"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_module_and_its_own_files_are_no_circle() {
    let c = crate_of(&[
        ("lib.rs", "mod luks2;\nmod sizes;\n"),
        (
            "luks2/mod.rs",
            "mod copies;\nmod validate;\nuse copies::Binary;\npub struct Luks2;\n",
        ),
        (
            "luks2/copies.rs",
            "use super::validate::validate;\nuse super::Luks2;\nuse crate::sizes::BIN_SIZE;\npub struct Binary;\n",
        ),
        (
            "luks2/validate.rs",
            "use crate::sizes::BIN_SIZE;\n// super::copies::Binary in a comment\npub fn validate() { let _ = \"super::copies\"; }\n",
        ),
        ("sizes.rs", "pub const BIN_SIZE: usize = 4096;\n"),
    ]);
    let o = check(c.path());
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn the_repository_has_no_file_circle_but_its_named_exceptions() {
    let o = Command::new("bash")
        .arg(repo().join("scripts/file-deps.sh"))
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

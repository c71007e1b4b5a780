//! The committed header `include/sectorcrypt.h` is what cbindgen makes of the sources
//! today: regenerated here and compared. `SECTORCRYPT_BLESS=1` rewrites it instead.

use std::path::Path;

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen")
        .write(&mut generated);
    let path = dir.join("include/sectorcrypt.h");
    if std::env::var_os("SECTORCRYPT_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from what cbindgen generates from the sources; regenerate it with \
         `SECTORCRYPT_BLESS=1 cargo test -p sectorcrypt-capi --test header` and commit it. \
         Generated:\n{}",
        path.display(),
        String::from_utf8_lossy(&generated)
    );
}

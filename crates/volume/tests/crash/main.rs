//! Crash consistency by injection: every header-changing operation ([`ops::OPERATIONS`]) on
//! every format ([`ops::FORMATS`]) is stopped after each of its writes and syncs in turn by
//! a store that loses power there ([`cut`]), and every image the cut may leave is judged
//! ([`check`]): the header reads and validates, it opens with the passphrases of the state
//! before or of the state after (for `erase`: before, or nothing; for a header restore
//! that has no room to move the current keyslots, its documented exception: a valid
//! header that running the restore again completes), and the data area is untouched.
//!
//! Each test prints, per operation and format, how many cuts (values of k) and images it
//! judged (`--nocapture` shows them). One test runs the harness on a restore that copies
//! the backup in piece order, the order that is not crash-safe, and requires failures:
//! the harness must be able to tell.
//!
//! LUKS2 re-encryption changes the data area, so it has a judge of its own
//! ([`reencrypt`]): every image a cut may leave is recovered (by sectorcrypt, and a
//! sample by cryptsetup) and must then open with the passphrase and read the plaintext.

mod check;
mod cut;
mod ops;
mod reencrypt;

use ops::{FORMATS, OPERATIONS};

/// The groups of operations, one test each; every operation belongs to one.
const GROUPS: &[&str] = &[
    "format",
    "add-key",
    "change-key",
    "remove-key",
    "erase",
    "header restore",
    "repair",
    "resize",
    "convert",
];

/// Runs every operation whose name starts with `group`, on every format, at every cut.
fn every_cut(group: &str) {
    let mut failures = Vec::new();
    let (mut cuts, mut images) = (0, 0);
    for op in OPERATIONS.iter().filter(|o| o.name.starts_with(group)) {
        for kind in FORMATS {
            let Some(p) = (op.prepare)(kind) else {
                continue;
            };
            let what = format!("{} ({})", op.name, kind.name);
            let start = std::time::Instant::now();
            let t = check::run_every_cut(&what, &p);
            eprintln!(
                "crash: {what}: {} cuts, {} images, {} failures ({:.1} s)",
                t.cuts,
                t.images,
                t.failures.len(),
                start.elapsed().as_secs_f64()
            );
            cuts += t.cuts;
            images += t.images;
            failures.extend(t.failures);
        }
    }
    eprintln!("crash: {group}: {cuts} (operation, format, cut) cases, {images} images");
    assert!(cuts > 0, "no operation of the group {group}");
    assert!(
        failures.is_empty(),
        "{} images break the rules:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_operation_belongs_to_a_tested_group() {
    for op in OPERATIONS {
        assert!(
            GROUPS.iter().any(|g| op.name.starts_with(g)),
            "{} is in no group",
            op.name
        );
    }
}

#[test]
fn format_at_every_cut() {
    every_cut("format");
}

#[test]
fn add_key_at_every_cut() {
    every_cut("add-key");
}

#[test]
fn change_key_at_every_cut() {
    every_cut("change-key");
}

#[test]
fn remove_key_at_every_cut() {
    every_cut("remove-key");
}

#[test]
fn erase_at_every_cut() {
    every_cut("erase");
}

#[test]
fn header_restore_at_every_cut() {
    every_cut("header restore");
}

#[test]
fn repair_at_every_cut() {
    every_cut("repair");
}

#[test]
fn resize_at_every_cut() {
    every_cut("resize");
}

#[test]
fn convert_at_every_cut() {
    every_cut("convert");
}

#[test]
fn a_restore_in_piece_order_is_caught() {
    // GELI's backup is one sector: every order of its pieces is the same.
    for kind in FORMATS.iter().filter(|k| k.name != "geli") {
        let p = ops::restore_after_change_key(kind, ops::restore_in_piece_order);
        let what = format!("header restore in piece order ({})", kind.name);
        let t = check::run_every_cut(&what, &p);
        eprintln!(
            "crash: {what}: {} cuts, {} images, {} failures (expected some)",
            t.cuts,
            t.images,
            t.failures.len()
        );
        if let Some(first) = t.failures.first() {
            eprintln!("crash: first: {first}");
        }
        assert!(
            t.failures.iter().any(|f| f.contains("cut after")),
            "{what}: no cut leaves an image that breaks the rules"
        );
    }
}

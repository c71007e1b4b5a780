//! `sectorcrypt backends`: what the CPU offers and what each algorithm runs on.

use crate::failure::Failure;
use sectorcrypt_crypto::mac::MacBackend;
use sectorcrypt_crypto::{cpu, Backend, GostBackend};

pub fn run() -> Result<(), Failure> {
    println!("cpu features: {}", cpu::features().names().join(" "));
    list("", Backend::ALL.map(|b| (b.name(), b.ensure_usable())));
    let chosen = Backend::selected()?;
    let forced = std::env::var("SECTORCRYPT_BACKEND")
        .ok()
        .filter(|v| !v.is_empty());
    let why = if forced.is_some() {
        "forced by SECTORCRYPT_BACKEND"
    } else {
        "fastest usable"
    };
    println!("aes: {chosen} ({why})");
    println!("aes-gcm: {chosen} (ghash with the same backend)");
    list(
        "gost ",
        GostBackend::ALL.map(|b| (b.name(), b.ensure_usable())),
    );
    let gost = GostBackend::selected()?;
    println!("gost28147-89/magma: {gost} ({why})");
    list(
        "mac ",
        MacBackend::ALL.map(|b| (b.name(), b.ensure_usable())),
    );
    let mac = MacBackend::selected()?;
    println!("geli sector tags (hmac-sha256, hmac-sha1): {mac} ({why})");
    Ok(())
}

/// One line per backend: `PREFIXbackend NAME usable ...` or `... not usable: WHY`.
fn list<E: std::fmt::Display>(
    prefix: &str,
    rows: impl IntoIterator<Item = (&'static str, Result<(), E>)>,
) {
    for (name, usable) in rows {
        match usable {
            Ok(()) => println!("{prefix}backend {name:<6} usable (self-test passed)"),
            Err(e) => println!("{prefix}backend {name:<6} not usable: {e}"),
        }
    }
}

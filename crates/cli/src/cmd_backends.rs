//! `sectorcrypt backends`: what the CPU offers and what each algorithm runs on.

use crate::failure::Failure;
use sectorcrypt_crypto::mac::MacBackend;
use sectorcrypt_crypto::{cpu, Backend, GostBackend};

pub fn run() -> Result<(), Failure> {
    println!("cpu features: {}", cpu::features().names().join(" "));
    for b in Backend::ALL {
        match b.ensure_usable() {
            Ok(()) => println!("backend {:<6} usable (self-test passed)", b.name()),
            Err(e) => println!("backend {:<6} not usable: {e}", b.name()),
        }
    }
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
    for g in GostBackend::ALL {
        match g.ensure_usable() {
            Ok(()) => println!("gost backend {:<6} usable (self-test passed)", g.name()),
            Err(e) => println!("gost backend {:<6} not usable: {e}", g.name()),
        }
    }
    let gost = GostBackend::selected()?;
    println!("gost28147-89/magma: {gost} ({why})");
    for m in MacBackend::ALL {
        match m.ensure_usable() {
            Ok(()) => println!("mac backend {:<6} usable (self-test passed)", m.name()),
            Err(e) => println!("mac backend {:<6} not usable: {e}", m.name()),
        }
    }
    let mac = MacBackend::selected()?;
    println!("geli sector tags (hmac-sha256, hmac-sha1): {mac} ({why})");
    Ok(())
}

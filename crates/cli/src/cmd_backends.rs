//! `sectorcrypt backends`: what the CPU offers, what each algorithm runs on, and, where
//! more than one backend was usable, the measurement that chose it.

use crate::failure::Failure;
use sectorcrypt_crypto::aes::Gcm;
use sectorcrypt_crypto::mac::MacBackend;
use sectorcrypt_crypto::{cpu, Backend, GostBackend, Measurement};
use std::time::Duration;

pub fn run() -> Result<(), Failure> {
    println!("cpu features: {}", cpu::features().names().join(" "));
    let forced = std::env::var("SECTORCRYPT_BACKEND")
        .ok()
        .filter(|v| !v.is_empty())
        .is_some();
    let mut took = Duration::ZERO;
    let mut choice = |what: &str, chosen: &dyn std::fmt::Display, m: Option<Measurement>| {
        let why = match (&m, forced) {
            (_, true) => "forced by SECTORCRYPT_BACKEND",
            (Some(_), false) => "chosen by measurement",
            (None, false) => "one candidate, not measured",
        };
        println!("{what}: {chosen} ({why})");
        if let Some(m) = m {
            println!("  {}", figures(&m));
            took += m.took;
        }
    };
    list("", Backend::ALL.map(|b| (b.name(), b.ensure_usable())));
    let (aes, m) = Backend::selection()?;
    choice("aes", &aes, m);
    let (gcm, m) = Gcm::selection()?;
    choice("aes-gcm (ghash with the same backend)", &gcm, m);
    list(
        "gost ",
        GostBackend::ALL.map(|b| (b.name(), b.ensure_usable())),
    );
    let (gost, m) = GostBackend::selection()?;
    choice("gost28147-89/magma", &gost, m);
    list(
        "mac ",
        MacBackend::ALL.map(|b| (b.name(), b.ensure_usable())),
    );
    let (mac, m) = MacBackend::selection()?;
    choice("geli sector tags (hmac-sha256, hmac-sha1)", &mac, m);
    if !forced {
        println!(
            "measuring took {:.2} ms in all (once per process, at the first key of each)",
            took.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

/// `measured on WORK: NAME GB/s, ... (T ms)`, the candidates in the static order.
fn figures(m: &Measurement) -> String {
    let each: Vec<String> = m
        .figures
        .iter()
        .map(|(name, bps)| format!("{name} {:.2} GB/s", bps / 1e9))
        .collect();
    format!(
        "measured on {}: {} ({:.2} ms)",
        m.work,
        each.join(", "),
        m.took.as_secs_f64() * 1e3
    )
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

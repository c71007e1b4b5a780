//! `sectorcrypt backends`: what the CPU offers, what each algorithm runs on, and, where
//! more than one backend was usable, the measurement that chose it. The same report is
//! printed for people or, with `--json`, as one JSON object (docs/JSON.md).

use crate::failure::Failure;
use sectorcrypt_crypto::aes::Gcm;
use sectorcrypt_crypto::mac::MacBackend;
use sectorcrypt_crypto::{cpu, Backend, GostBackend, Measurement};
use serde_json::{json, Value};
use std::time::Duration;

/// One backend of a family: its name and whether it can run here (why not, if not).
type Row = (&'static str, Result<(), String>);

/// One algorithm's part of the report.
struct Family {
    /// The algorithm as the text report names it.
    what: &'static str,
    /// The short name in JSON.
    name: &'static str,
    /// The prefix of its backend lines in the text report (`None`: no list printed, as
    /// GCM runs on the AES list).
    prefix: Option<&'static str>,
    backends: Vec<Row>,
    chosen: String,
    measured: Option<Measurement>,
}

fn rows<E: std::fmt::Display>(
    all: impl IntoIterator<Item = (&'static str, Result<(), E>)>,
) -> Vec<Row> {
    all.into_iter()
        .map(|(n, r)| (n, r.map_err(|e| e.to_string())))
        .collect()
}

pub fn run(json: bool) -> Result<(), Failure> {
    let forced = std::env::var("SECTORCRYPT_BACKEND")
        .ok()
        .filter(|v| !v.is_empty());
    let aes_rows = || rows(Backend::ALL.map(|b| (b.name(), b.ensure_usable())));
    let (aes, m_aes) = Backend::selection()?;
    let (gcm, m_gcm) = Gcm::selection()?;
    let (gost, m_gost) = GostBackend::selection()?;
    let (mac, m_mac) = MacBackend::selection()?;
    let families = vec![
        Family {
            what: "aes",
            name: "aes",
            prefix: Some(""),
            backends: aes_rows(),
            chosen: aes.to_string(),
            measured: m_aes,
        },
        Family {
            what: "aes-gcm (ghash with the same backend)",
            name: "aes-gcm",
            prefix: None,
            backends: aes_rows(),
            chosen: gcm.to_string(),
            measured: m_gcm,
        },
        Family {
            what: "gost28147-89/magma",
            name: "gost",
            prefix: Some("gost "),
            backends: rows(GostBackend::ALL.map(|b| (b.name(), b.ensure_usable()))),
            chosen: gost.to_string(),
            measured: m_gost,
        },
        Family {
            what: "geli sector tags (hmac-sha256, hmac-sha1)",
            name: "mac",
            prefix: Some("mac "),
            backends: rows(MacBackend::ALL.map(|b| (b.name(), b.ensure_usable()))),
            chosen: mac.to_string(),
            measured: m_mac,
        },
    ];
    let forced = forced.as_deref();
    if json {
        let text = serde_json::to_string_pretty(&to_json(&families, forced))
            .map_err(|e| Failure::runtime(e.to_string()))?;
        println!("{text}");
    } else {
        print_text(&families, forced.is_some());
    }
    Ok(())
}

/// Why `f`'s backend was chosen.
fn reason(f: &Family, forced: bool) -> &'static str {
    match (&f.measured, forced) {
        (_, true) => "forced by SECTORCRYPT_BACKEND",
        (Some(_), false) => "chosen by measurement",
        (None, false) => "one candidate, not measured",
    }
}

/// The time all measurements took.
fn took(families: &[Family]) -> Duration {
    families
        .iter()
        .filter_map(|f| f.measured.as_ref().map(|m| m.took))
        .sum()
}

fn print_text(families: &[Family], forced: bool) {
    println!("cpu features: {}", cpu::features().names().join(" "));
    for f in families {
        if let Some(prefix) = f.prefix {
            list(prefix, &f.backends);
        }
        println!("{}: {} ({})", f.what, f.chosen, reason(f, forced));
        if let Some(m) = &f.measured {
            println!("  {}", figures(m));
        }
    }
    if !forced {
        println!(
            "measuring took {:.2} ms in all (once per process, at the first key of each)",
            took(families).as_secs_f64() * 1e3
        );
    }
}

fn to_json(families: &[Family], forced: Option<&str>) -> Value {
    let algorithms: Vec<Value> = families
        .iter()
        .map(|f| {
            let backends: Vec<Value> = f
                .backends
                .iter()
                .map(|(name, r)| {
                    json!({
                        "name": name,
                        "usable": r.is_ok(),
                        "reason": r.as_ref().err(),
                    })
                })
                .collect();
            let measurement = f.measured.as_ref().map(|m| {
                let each: Vec<Value> = m
                    .figures
                    .iter()
                    .map(|(name, bps)| json!({ "backend": name, "bytes_per_sec": bps }))
                    .collect();
                json!({
                    "work": m.work,
                    "figures": each,
                    "took_ms": m.took.as_secs_f64() * 1e3,
                })
            });
            json!({
                "name": f.name,
                "description": f.what,
                "backends": backends,
                "chosen": f.chosen,
                "reason": reason(f, forced.is_some()),
                "measurement": measurement,
            })
        })
        .collect();
    json!({
        "cpu_features": cpu::features().names(),
        "forced": forced,
        "algorithms": algorithms,
        "measuring_ms": forced.is_none().then(|| took(families).as_secs_f64() * 1e3),
    })
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
fn list(prefix: &str, rows: &[Row]) {
    for (name, usable) in rows {
        match usable {
            Ok(()) => println!("{prefix}backend {name:<6} usable (self-test passed)"),
            Err(e) => println!("{prefix}backend {name:<6} not usable: {e}"),
        }
    }
}

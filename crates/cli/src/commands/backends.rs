//! `sectorcrypt backends`: what the CPU offers, what each algorithm runs on, and, where
//! more than one backend was usable, the measurement that chose it; the AES units' rates
//! from the unit probe (`bench --probe`) and the core's physical AES limit that follows
//! (the best width's, in cycles per byte for AES-128/192/256: what `bench`'s `limit`
//! column divides by); and the register width each AES mode runs on with the avx512
//! backend. The same report is printed for people or, with `--json`, as one JSON object
//! (docs/JSON.md).

use crate::failure::Failure;
use sectorcrypt_bench::limit::{AesRate, Width};
use sectorcrypt_crypto::aes::{self, Gcm, WidthChoice};
use sectorcrypt_crypto::cascade::{
    CamelliaBackend, KuznyechikBackend, SerpentBackend, TwofishBackend,
};
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
    let (serpent, m_serpent) = SerpentBackend::selection()?;
    let (camellia, m_camellia) = CamelliaBackend::selection()?;
    let (twofish, m_twofish) = TwofishBackend::selection()?;
    let (kuznyechik, m_kuznyechik) = KuznyechikBackend::selection()?;
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
        Family {
            what: "serpent (the serpent layer of veracrypt cascades)",
            name: "serpent",
            prefix: Some("serpent "),
            backends: rows(SerpentBackend::ALL.map(|b| (b.name(), b.ensure_usable()))),
            chosen: serpent.to_string(),
            measured: m_serpent,
        },
        Family {
            what: "camellia (the camellia layer of veracrypt cascades and camellia-xts)",
            name: "camellia",
            prefix: Some("camellia "),
            backends: rows(CamelliaBackend::ALL.map(|b| (b.name(), b.ensure_usable()))),
            chosen: camellia.to_string(),
            measured: m_camellia,
        },
        Family {
            what: "twofish (the twofish layer of veracrypt cascades and twofish-xts)",
            name: "twofish",
            prefix: Some("twofish "),
            backends: rows(TwofishBackend::ALL.map(|b| (b.name(), b.ensure_usable()))),
            chosen: twofish.to_string(),
            measured: m_twofish,
        },
        Family {
            what: "kuznyechik (the kuznyechik layer of veracrypt cascades and kuznyechik-xts)",
            name: "kuznyechik",
            prefix: Some("kuznyechik "),
            backends: rows(KuznyechikBackend::ALL.map(|b| (b.name(), b.ensure_usable()))),
            chosen: kuznyechik.to_string(),
            measured: m_kuznyechik,
        },
    ];
    let forced = forced.as_deref();
    let units = Units::probe();
    // (Asked for on every backend, so that a wrong SECTORCRYPT_AES_WIDTH is reported;
    // shown only where the AES modes run on the avx512 backend.)
    let widths = aes::width_choice()
        .transpose()?
        .filter(|_| aes == Backend::Avx512);
    if json {
        let mut v = to_json(&families, forced);
        v["aes_units"] = units.to_json();
        v["aes_widths"] = widths.as_ref().map_or(Value::Null, widths_json);
        let text = serde_json::to_string_pretty(&v).map_err(|e| Failure::runtime(e.to_string()))?;
        println!("{text}");
    } else {
        print_text(&families, forced.is_some());
        units.print();
        if let Some(w) = &widths {
            print_widths(w);
        }
    }
    Ok(())
}

/// The AES rounds of AES-128, AES-192 and AES-256.
const KEYS: [(&str, usize); 3] = [("aes-128", 10), ("aes-192", 12), ("aes-256", 14)];

/// The unit probe's AES steps and the limit that follows, at the clock measured here.
struct Units {
    ghz: f64,
    /// The probe's AES steps: name, seconds per step.
    steps: Vec<(&'static str, f64)>,
    rate: AesRate,
}

impl Units {
    /// Runs the probe (a few tens of milliseconds; nothing on a CPU without AES units).
    fn probe() -> Units {
        let steps: Vec<(&'static str, f64)> = sectorcrypt_bench::probe_units()
            .into_iter()
            .filter(|(n, _)| n.contains("AESENC") && !n.contains('+'))
            .collect();
        let ghz = if steps.is_empty() {
            0.0
        } else {
            sectorcrypt_bench::clock::measure_ghz(true)
        };
        let rate = AesRate::from_probe(&steps);
        Units { ghz, steps, rate }
    }

    fn width_name(w: Width) -> &'static str {
        match w {
            Width::Xmm => "xmm",
            Width::Ymm => "ymm",
            Width::Zmm => "zmm",
        }
    }

    fn print(&self) {
        let Some((best, _)) = self.rate.best() else {
            println!("aes units: not probed (no AES-NI)");
            return;
        };
        let each: Vec<String> = self
            .steps
            .iter()
            .map(|(n, s)| format!("{n} {:.2}", s * self.ghz * 1e9))
            .collect();
        println!(
            "aes units (probe, cycles per step at {:.2} GHz): {}",
            self.ghz,
            each.join(", ")
        );
        let each: Vec<String> = KEYS
            .iter()
            .filter_map(|(name, rounds)| {
                let cpb = self.rate.limit_cpb(*rounds, self.ghz)?;
                let gbs = self.rate.limit(*rounds)? / 1e9;
                Some(format!("{name} {cpb:.3} c/B ({gbs:.1} GB/s)"))
            })
            .collect();
        println!(
            "aes physical limit of one core (on {}): {}",
            Self::width_name(best),
            each.join(", ")
        );
    }

    fn to_json(&self) -> Value {
        let Some((best, _)) = self.rate.best() else {
            return Value::Null;
        };
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|(n, s)| json!({ "step": n, "seconds": s, "cycles": s * self.ghz * 1e9 }))
            .collect();
        let limit: Vec<Value> = KEYS
            .iter()
            .map(|(name, rounds)| {
                json!({
                    "cipher": name,
                    "rounds": rounds,
                    "cycles_per_byte": self.rate.limit_cpb(*rounds, self.ghz),
                    "bytes_per_sec": self.rate.limit(*rounds),
                })
            })
            .collect();
        let rate = |r: Option<f64>| r.map(|r| r / self.ghz / 1e9);
        json!({
            "clock_ghz": self.ghz,
            "steps": steps,
            "block_rounds_per_cycle": {
                "xmm": rate(self.rate.xmm),
                "ymm": rate(self.rate.ymm),
                "zmm": rate(self.rate.zmm),
            },
            "best_width": Self::width_name(best),
            "limit": limit,
        })
    }
}

/// The avx512 backend's widths, one line.
fn print_widths(w: &WidthChoice) {
    let each: Vec<String> = aes::WidthMode::ALL
        .iter()
        .map(|m| format!("{} {}", m.name(), w.widths.get(*m)))
        .collect();
    let how = match w.forced {
        Some(_) => "forced by SECTORCRYPT_AES_WIDTH".to_string(),
        None => format!(
            "chosen by measurement, {:.2} ms",
            w.took.as_secs_f64() * 1e3
        ),
    };
    println!("aes widths on avx512 ({how}): {}", each.join(", "));
    if !w.figures.is_empty() {
        let each: Vec<String> = w
            .figures
            .iter()
            .map(|(m, y, z)| format!("{} {:.2}/{:.2}", m.name(), y / 1e9, z / 1e9))
            .collect();
        println!("  measured ymm/zmm GB/s: {}", each.join(", "));
    }
}

fn widths_json(w: &WidthChoice) -> Value {
    let modes: Vec<Value> = aes::WidthMode::ALL
        .iter()
        .map(|m| {
            let f = w.figures.iter().find(|f| f.0 == *m);
            json!({
                "mode": m.name(),
                "width": w.widths.get(*m).name(),
                "ymm_bytes_per_sec": f.map(|f| f.1),
                "zmm_bytes_per_sec": f.map(|f| f.2),
            })
        })
        .collect();
    json!({
        "forced": w.forced.map(|f| f.name()),
        "modes": modes,
        "took_ms": w.took.as_secs_f64() * 1e3,
    })
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

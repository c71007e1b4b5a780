//! `sectorcrypt backends` and the `SECTORCRYPT_BACKEND` override: what the report shows,
//! a forced backend for every algorithm that has it (the portable one for the others),
//! and a name that does not exist or cannot run here refused with exit 2.

#[path = "support/backends.rs"]
mod backends;
mod support;

use backends::{report, status};
use support::{code, ok, sc_on};

#[test]
fn backends_and_the_override() {
    let text = report();
    assert!(text.contains("backend soft   usable"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("aes: ")), "{text}");
    assert!(text.contains("gost28147-89/magma: "), "{text}");
    assert!(text.contains("mac backend soft   usable"), "{text}");
    assert!(
        text.contains("geli sector tags (hmac-sha256, hmac-sha1): "),
        "{text}"
    );
    let forced = ok(sc_on(&["backends"], b"", Some("soft")));
    assert!(
        forced.contains("aes: soft (forced by SECTORCRYPT_BACKEND)"),
        "{forced}"
    );
    let bad = sc_on(&["backends"], b"", Some("nonsense"));
    assert_eq!(code(&bad), 2);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown backend \"nonsense\""));
    let key = "00".repeat(16);
    let args = ["cipher", "encrypt", "--cipher", "aes-ecb", "--key", &key];
    let bad = sc_on(&args, &[0; 16], Some("nonsense"));
    assert_eq!(code(&bad), 2);
    assert!(bad.stdout.is_empty());
}

/// `SECTORCRYPT_BACKEND=avx2` forces GOST's avx2 and AES's portable backend; `vaes` gives
/// GOST the portable backend; the choice shows in `backends`.
#[test]
fn backend_override_across_algorithms() {
    let forced = ok(sc_on(&["backends"], b"", Some("soft")));
    assert!(
        forced.contains("gost28147-89/magma: soft (forced"),
        "{forced}"
    );
    assert!(forced.contains("sector tags (hmac-sha256, hmac-sha1): soft (forced"));
    let text = report();
    let forced = sc_on(&["backends"], b"", Some("avx2"));
    match status(&text, "gost backend ", "avx2") {
        Ok(()) => {
            let t = ok(forced);
            assert!(t.contains("aes: soft (forced"), "{t}");
            assert!(t.contains("gost28147-89/magma: avx2 (forced"), "{t}");
        }
        Err(why) => {
            eprintln!("SKIPPED the avx2 half: the gost avx2 backend cannot run here ({why})");
            assert_eq!(code(&forced), 2);
        }
    }
    match status(&text, "backend ", "vaes") {
        Ok(()) => {
            let t = ok(sc_on(&["backends"], b"", Some("vaes")));
            assert!(t.contains("aes: vaes (forced"), "{t}");
            assert!(t.contains("gost28147-89/magma: soft (forced"), "{t}");
        }
        Err(why) => eprintln!("SKIPPED the vaes half: vaes cannot run here ({why})"),
    }
}

/// The bench's GOST cases run on the GOST backend `SECTORCRYPT_BACKEND` gives (`avx2`:
/// GOST avx2 while AES runs on soft), and report their round limit.
#[test]
fn bench_gost_cases_follow_the_override() {
    let text = report();
    let args = ["bench", "--quick", "--json", "--filter", "gost89-ecb/"];
    for name in ["avx2", "avx512", "soft"] {
        if let Err(why) = status(&text, "gost backend ", name) {
            eprintln!("SKIPPED bench on gost {name}: it cannot run here ({why})");
            continue;
        }
        if name == "avx512" && status(&text, "backend ", name).is_err() {
            eprintln!("SKIPPED bench on gost avx512: aes avx512 cannot run here");
            continue;
        }
        let json = ok(sc_on(&args, b"", Some(name)));
        let want = format!("\"name\":\"gost89-ecb/16384\",\"backend\":\"{name}\"");
        assert!(json.contains(&want), "{name}: {json}");
        assert!(json.contains("\"round_limit_cpb\":"), "{json}");
        assert!(!json.contains("\"round_limit_cpb\":null"), "{json}");
    }
}

/// The report's two forms of line, as the backend lists of the other tests read them.
#[test]
fn a_backend_line_says_usable_or_why_not() {
    let report =
        "backend avx512 not usable: missing avx512f\nbackend soft   usable (self-test passed)\n";
    assert_eq!(
        status(report, "backend ", "avx512"),
        Err("missing avx512f".to_string())
    );
    assert_eq!(status(report, "backend ", "soft"), Ok(()));
}

/// Where more than one non-portable AES backend is usable, the AES and AES-GCM choices are
/// measured: the line under each names every such backend with its figure, and the
/// chosen one is among them; otherwise the only usable one is taken, unmeasured.
#[test]
fn a_measured_choice_shows_its_figures() {
    let text = report();
    let usable: Vec<&str> = sectorcrypt_crypto::Backend::ALL
        .map(|b| b.name())
        .into_iter()
        .filter(|n| *n != "soft" && status(&text, "backend ", n).is_ok())
        .collect();
    let lines: Vec<&str> = text.lines().collect();
    for what in ["aes: ", "aes-gcm (ghash with the same backend): "] {
        let at = lines.iter().position(|l| l.starts_with(what));
        let at = at.unwrap_or_else(|| panic!("no {what} line in:\n{text}"));
        let chosen = lines[at][what.len()..].split_whitespace().next().unwrap();
        if usable.len() < 2 {
            assert!(
                lines[at].ends_with("(one candidate, not measured)"),
                "{text}"
            );
            continue;
        }
        assert!(lines[at].ends_with("(chosen by measurement)"), "{text}");
        assert!(
            usable.contains(&chosen),
            "{chosen} not in {usable:?}:\n{text}"
        );
        let figures = lines[at + 1];
        assert!(figures.starts_with("  measured on "), "{text}");
        for n in &usable {
            assert!(figures.contains(&format!(" {n} ")), "{n} missing:\n{text}");
        }
        assert!(!figures.contains(" soft "), "{text}");
    }
    assert!(text.contains("\nmeasuring took "), "{text}");
    let forced = ok(sc_on(&["backends"], b"", Some("soft")));
    assert!(!forced.contains("measured"), "{forced}");
}

/// The Serpent family in the report, and `SECTORCRYPT_BACKEND` over it: its own name gives
/// its own backend (exit 2 when this CPU cannot run it; another family that cannot run a
/// name refuses it too, so that case is only printed), a name only AES has gives it the
/// portable one.
#[test]
fn serpent_backends_and_the_override() {
    let text = report();
    assert!(text.contains("serpent backend soft   usable"), "{text}");
    assert!(
        text.contains("serpent (the serpent layer of veracrypt cascades): "),
        "{text}"
    );
    let line = "serpent (the serpent layer of veracrypt cascades)";
    let forced = ok(sc_on(&["backends"], b"", Some("soft")));
    assert!(
        forced.contains(&format!("{line}: soft (forced")),
        "{forced}"
    );
    for name in ["avx2", "avx512"] {
        let forced = sc_on(&["backends"], b"", Some(name));
        match status(&text, "serpent backend ", name) {
            Ok(()) if code(&forced) != 0 => {
                let err = String::from_utf8_lossy(&forced.stderr);
                eprintln!("SKIPPED serpent {name}: another family refuses the name ({err})");
            }
            Ok(()) => {
                let t = ok(forced);
                assert!(t.contains(&format!("{line}: {name} (forced")), "{t}");
            }
            Err(why) => {
                eprintln!("SKIPPED serpent {name}: the backend cannot run here ({why})");
                assert_eq!(code(&forced), 2);
            }
        }
    }
    if status(&text, "backend ", "aesni").is_ok() {
        let t = ok(sc_on(&["backends"], b"", Some("aesni")));
        assert!(t.contains(&format!("{line}: soft (forced")), "{t}");
    }
}

/// A family with an `avx512` and a `soft` backend (Camellia, Twofish, Kuznyechik) in the
/// report, and `SECTORCRYPT_BACKEND` over it: `avx512` is its own backend (exit 2 when
/// this CPU cannot run it), `avx2` and `aesni` (names only other families have) give it
/// the portable one. `line` is the family's line in the report.
fn avx512_family_and_the_override(family: &str, line: &str) {
    let text = report();
    assert!(
        text.contains(&format!("{family} backend soft   usable")),
        "{text}"
    );
    assert!(text.contains(&format!("{line}: ")), "{text}");
    let forced = ok(sc_on(&["backends"], b"", Some("soft")));
    assert!(
        forced.contains(&format!("{line}: soft (forced")),
        "{forced}"
    );
    let forced = sc_on(&["backends"], b"", Some("avx512"));
    match status(&text, &format!("{family} backend "), "avx512") {
        Ok(()) if code(&forced) != 0 => {
            let err = String::from_utf8_lossy(&forced.stderr);
            eprintln!("SKIPPED {family} avx512: another family refuses the name ({err})");
        }
        Ok(()) => {
            let t = ok(forced);
            assert!(t.contains(&format!("{line}: avx512 (forced")), "{t}");
        }
        Err(why) => {
            eprintln!("SKIPPED {family} avx512: the backend cannot run here ({why})");
            assert_eq!(code(&forced), 2);
        }
    }
    for other in ["aesni", "avx2"] {
        let forced = sc_on(&["backends"], b"", Some(other));
        if code(&forced) == 0 {
            let t = ok(forced);
            assert!(t.contains(&format!("{line}: soft (forced")), "{other}: {t}");
        } else {
            eprintln!("SKIPPED {family} under {other}: this CPU runs no family's {other}");
        }
    }
}

#[test]
fn camellia_backends_and_the_override() {
    avx512_family_and_the_override(
        "camellia",
        "camellia (the camellia layer of veracrypt cascades and camellia-xts)",
    );
}

#[test]
fn twofish_backends_and_the_override() {
    avx512_family_and_the_override(
        "twofish",
        "twofish (the twofish layer of veracrypt cascades and twofish-xts)",
    );
}

#[test]
fn kuznyechik_backends_and_the_override() {
    avx512_family_and_the_override(
        "kuznyechik",
        "kuznyechik (the kuznyechik layer of veracrypt cascades and kuznyechik-xts)",
    );
}

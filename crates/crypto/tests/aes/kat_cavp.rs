//! NIST CAVP: AESAVS ECB and CBC (KAT, MMT, MCT) and XTSGenAES.

use crate::harness::{backends, block, field, read, records, unhex, Report};
use sectorcrypt_crypto::{
    aes::{Cbc, Ecb, Xts},
    Backend,
};

fn aesavs_files(mode: &str) -> Vec<String> {
    let dir = crate::harness::vectors()
        .join("aes/nist-cavp/aesavs")
        .join(mode);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".rsp"))
        .collect();
    names.sort();
    names
}

/// KAT and MMT records: one encryption or decryption each, compared with the file.
fn known_answer(mode: &str, file: &str, b: Backend, report: &mut Report) {
    for (section, rec) in records(&read(&format!("aes/nist-cavp/aesavs/{mode}/{file}"))) {
        let (Some(key), Some(pt), Some(ct)) = (
            field(&rec, "KEY"),
            field(&rec, "PLAINTEXT"),
            field(&rec, "CIPHERTEXT"),
        ) else {
            continue;
        };
        let (key, pt, ct) = (unhex(key), unhex(pt), unhex(ct));
        let encrypt = section == "ENCRYPT";
        let (input, want) = if encrypt { (&pt, &ct) } else { (&ct, &pt) };
        let mut out = vec![0u8; input.len()];
        match mode {
            "ECB" => {
                let c = Ecb::with_backend(&key, b).expect("ecb key");
                if encrypt {
                    c.encrypt_to(input, &mut out).expect("ecb encrypt");
                } else {
                    c.decrypt_to(input, &mut out).expect("ecb decrypt");
                }
            }
            _ => {
                let iv = block(field(&rec, "IV").expect("IV"));
                let c = Cbc::with_backend(&key, b).expect("cbc key");
                if encrypt {
                    c.encrypt_to(&iv, input, &mut out).expect("cbc encrypt");
                } else {
                    c.decrypt_to(&iv, input, &mut out).expect("cbc decrypt");
                }
            }
        }
        assert_eq!(
            &out,
            want,
            "{file} [{section}] {:?} on {b}",
            field(&rec, "COUNT")
        );
        report.passed += 1;
    }
}

/// AESAVS (2002) section 6.4.2, the CBC Monte Carlo Test, run as NIST runs it: 100 outer
/// iterations of 1000 chained single-block operations each, the key, IV and first input of
/// each outer iteration derived from the previous one (not read from the file). Every
/// record's KEY, IV, input and output are compared with the chain, so a wrong key update
/// or chaining rule fails at the record where it first shows.
///
/// Encrypt, outer iteration i (decrypt swaps PT and CT and uses the inverse cipher):
///   CT[0] = E(Key[i], PT[0] ^ IV[i]);       PT[1] = IV[i]
///   CT[j] = E(Key[i], PT[j] ^ CT[j-1]);     PT[j+1] = CT[j-1]   (j = 1..999)
///   Key[i+1] = Key[i] ^ (CT[999]            for 128-bit keys,
///                        low 64 bits of CT[998] || CT[999]   for 192,
///                        CT[998] || CT[999]                  for 256)
///   IV[i+1] = CT[999];   PT[0] of i+1 = CT[998]
fn monte_carlo_cbc(file: &str, b: Backend, report: &mut Report) {
    let recs = records(&read(&format!("aes/nist-cavp/aesavs/CBC/{file}")));
    for section in ["ENCRYPT", "DECRYPT"] {
        let chain: Vec<&Vec<(String, String)>> = recs
            .iter()
            .filter(|(s, r)| s == section && field(r, "KEY").is_some())
            .map(|(_, r)| r)
            .collect();
        assert_eq!(chain.len(), 100, "{file} [{section}]: 100 outer iterations");
        let encrypt = section == "ENCRYPT";
        let (in_name, out_name) = if encrypt {
            ("PLAINTEXT", "CIPHERTEXT")
        } else {
            ("CIPHERTEXT", "PLAINTEXT")
        };
        let first = chain[0];
        let mut key = unhex(field(first, "KEY").expect("KEY"));
        let mut iv = block(field(first, "IV").expect("IV"));
        let mut input = block(field(first, in_name).expect("input"));
        for (i, rec) in chain.iter().enumerate() {
            let count: usize = field(rec, "COUNT").expect("COUNT").parse().expect("number");
            let at = format!("{file} [{section}] COUNT {count} on {b}");
            assert_eq!(count, i, "{at}: records out of order");
            assert_eq!(key, unhex(field(rec, "KEY").expect("KEY")), "{at}: KEY");
            assert_eq!(iv, block(field(rec, "IV").expect("IV")), "{at}: IV");
            assert_eq!(
                input,
                block(field(rec, in_name).expect("input")),
                "{at}: input"
            );
            let c = Cbc::with_backend(&key, b).expect("cbc key");
            // out[j] and out[j-1]; `chain_iv` is the CBC chaining value of the inner loop.
            let (mut out, mut prev) = ([0u8; 16], [0u8; 16]);
            let mut chain_iv = iv;
            for j in 0..1000 {
                let mut x = input;
                if encrypt {
                    c.encrypt(&chain_iv, &mut x).expect("encrypt");
                    chain_iv = x;
                } else {
                    c.decrypt(&chain_iv, &mut x).expect("decrypt");
                    chain_iv = input;
                }
                input = if j == 0 { iv } else { out };
                prev = out;
                out = x;
            }
            assert_eq!(
                out,
                block(field(rec, out_name).expect("output")),
                "{at}: output"
            );
            report.passed += 1;
            // The next outer iteration's key, IV and input.
            let tail: Vec<u8> = [prev, out].concat();
            let mix = &tail[tail.len() - key.len()..];
            key.iter_mut().zip(mix).for_each(|(k, m)| *k ^= m);
            iv = out;
            input = prev;
        }
    }
}

#[test]
fn aesavs_ecb_and_cbc() {
    crate::harness::each_width(aesavs_ecb_and_cbc_under_each_width);
}

fn aesavs_ecb_and_cbc_under_each_width() {
    for mode in ["ECB", "CBC"] {
        for file in aesavs_files(mode) {
            let mut report = Report::new(&format!("nist-cavp/aesavs/{mode}/{file}"));
            for b in backends() {
                if file.contains("MCT") {
                    monte_carlo_cbc(&file, b, &mut report);
                } else {
                    known_answer(mode, &file, b, &mut report);
                }
            }
            report.finish();
        }
    }
}

#[test]
fn cavp_xts_both_tweak_formats() {
    crate::harness::each_width(cavp_xts_both_tweak_formats_under_each_width);
}

fn cavp_xts_both_tweak_formats_under_each_width() {
    // The repository's copy holds the data-unit-sequence-number format; the 128-bit
    // hex tweak format is read too when present.
    for dir in ["tweak-dataunitseqno", "tweak-128hexstr"] {
        if dir == "tweak-128hexstr"
            && !crate::harness::vectors()
                .join("aes/nist-cavp/xts")
                .join(dir)
                .is_dir()
        {
            // SOURCES.md lists this folder; if a copy lacks it, say so
            // loudly rather than pass in silence.
            eprintln!(
                "nist-cavp/xts/{dir}: MISSING from {} (listed in SOURCES.md): 0 cases run",
                crate::harness::vectors().display()
            );
            continue;
        }
        for file in ["XTSGenAES128.rsp", "XTSGenAES256.rsp"] {
            let name = format!("aes/nist-cavp/xts/{dir}/{file}");
            let mut report = Report::new(name.trim_start_matches("aes/"));
            let recs = records(&read(&name));
            for b in backends() {
                for (section, rec) in &recs {
                    let Some(key) = field(rec, "Key") else {
                        continue;
                    };
                    let bits: usize = field(rec, "DataUnitLen")
                        .expect("len")
                        .parse()
                        .expect("number");
                    if !bits.is_multiple_of(8) {
                        report.skip("data unit length is not a whole number of bytes");
                        continue;
                    }
                    let tweak: [u8; 16] = match field(rec, "i") {
                        Some(hex) => block(hex),
                        None => {
                            let n: u128 = field(rec, "DataUnitSeqNumber")
                                .expect("seqno")
                                .parse()
                                .expect("number");
                            n.to_le_bytes()
                        }
                    };
                    let (pt, ct) = (
                        unhex(field(rec, "PT").expect("PT")),
                        unhex(field(rec, "CT").expect("CT")),
                    );
                    assert_eq!(pt.len(), bits / 8);
                    let x = Xts::with_backend(&unhex(key), b).expect("xts key");
                    let mut out = vec![0u8; pt.len()];
                    if section == "ENCRYPT" {
                        x.encrypt_to(&tweak, &pt, &mut out).expect("encrypt");
                        assert_eq!(out, ct, "{name} {:?} on {b}", field(rec, "COUNT"));
                    } else {
                        x.decrypt_to(&tweak, &ct, &mut out).expect("decrypt");
                        assert_eq!(out, pt, "{name} {:?} on {b}", field(rec, "COUNT"));
                    }
                    report.passed += 1;
                }
            }
            report.finish();
        }
    }
}

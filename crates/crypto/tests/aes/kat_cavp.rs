//! NIST CAVP: AESAVS ECB and CBC (KAT, MMT, MCT) and XTSGenAES.

use crate::harness::{backends, block, field, read, records, unhex, Report};
use sectorcrypt_crypto::{Backend, Cbc, Ecb, Xts};

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

/// AESAVS section 6.4.2 (CBC Monte Carlo), one outer iteration per record: 1000 chained
/// single-block operations from the record's KEY, IV and input, compared with its output.
fn monte_carlo_cbc(file: &str, b: Backend, report: &mut Report) {
    for (section, rec) in records(&read(&format!("aes/nist-cavp/aesavs/CBC/{file}"))) {
        let Some(key) = field(&rec, "KEY") else {
            continue;
        };
        let c = Cbc::with_backend(&unhex(key), b).expect("cbc key");
        let iv0 = block(field(&rec, "IV").expect("IV"));
        let (pt0, ct0) = (
            block(field(&rec, "PLAINTEXT").expect("PT")),
            block(field(&rec, "CIPHERTEXT").expect("CT")),
        );
        let (mut iv, mut prev) = (iv0, [0u8; 16]);
        if section == "ENCRYPT" {
            // CT[j] = E(PT[j] ^ CT[j-1]); PT[j+1] = IV for j = 0, else CT[j-1].
            let (mut pt, mut ct) = (pt0, [0u8; 16]);
            for j in 0..1000 {
                ct = pt;
                c.encrypt(&iv, &mut ct).expect("encrypt");
                pt = if j == 0 { iv0 } else { prev };
                prev = ct;
                iv = ct;
            }
            assert_eq!(ct, ct0, "{file} encrypt {:?} on {b}", field(&rec, "COUNT"));
        } else {
            // PT[j] = D(CT[j]) ^ CT[j-1]; CT[j+1] = IV for j = 0, else PT[j-1].
            let (mut ct, mut pt) = (ct0, [0u8; 16]);
            for j in 0..1000 {
                pt = ct;
                c.decrypt(&iv, &mut pt).expect("decrypt");
                let next = if j == 0 { iv0 } else { prev };
                iv = ct;
                prev = pt;
                ct = next;
            }
            assert_eq!(pt, pt0, "{file} decrypt {:?} on {b}", field(&rec, "COUNT"));
        }
        report.passed += 1;
    }
}

#[test]
fn aesavs_ecb_and_cbc() {
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
    // The copy in shared/vectors holds the data-unit-sequence-number format; the 128-bit
    // hex tweak format is read too when present.
    for dir in ["tweak-dataunitseqno", "tweak-128hexstr"] {
        if dir == "tweak-128hexstr"
            && !crate::harness::vectors()
                .join("aes/nist-cavp/xts")
                .join(dir)
                .is_dir()
        {
            eprintln!("nist-cavp/xts/{dir}: not in this copy of the vectors");
            continue;
        }
        for file in ["XTSGenAES128.rsp", "XTSGenAES256.rsp"] {
            let name = format!("aes/nist-cavp/xts/{dir}/{file}");
            let mut report = Report::new(&name);
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

//! `sectorcrypt cipher encrypt|decrypt`: the whole input is read and transformed in memory,
//! every check happens before the first byte is written, and `--output` is replaced
//! atomically, so bad input never leaves a partial or truncated output behind.

use crate::args::{CipherArgs, Direction};
use crate::failure::Failure;
use sectorcrypt_crypto::{
    aes::{Cbc, Ctr, Gcm, Xts},
    dmcrypt::{CipherSpec, SectorCipher, SectorLayout},
};
use std::io::{Read, Write};
use std::path::Path;
use zeroize::Zeroizing;

/// The raw modes: one message (one data unit) with an explicit IV.
const RAW: [&str; 4] = ["aes-ecb", "aes-cbc", "aes-ctr", "aes-xts"];

pub fn run(a: CipherArgs) -> Result<(), Failure> {
    if a.cipher.starts_with("gost89-") || a.cipher.starts_with("magma-") {
        return gost(&a);
    }
    if a.direction == Direction::Mac {
        return Err(Failure::usage(format!(
            "cipher mac takes --cipher gost89-mac or magma-mac, not {}",
            a.cipher
        )));
    }
    if a.sbox.is_some() || a.key_meshing {
        return Err(Failure::usage(
            "--sbox and --key-meshing go with the gost89-* ciphers",
        ));
    }
    let key = read_key(&a)?;
    if a.cipher == "aes-gcm" {
        return gcm(&a, &key);
    }
    if a.aad.is_some() || a.tag_len.is_some() {
        return Err(Failure::usage(
            "--aad and --tag-len go with --cipher aes-gcm",
        ));
    }
    let raw = RAW.contains(&a.cipher.as_str());
    let spec = if raw && a.cipher != "aes-ecb" {
        None
    } else {
        Some(a.cipher.parse::<CipherSpec>().map_err(|_| {
            Failure::usage(format!(
                "unknown cipher {:?}; use a dm-crypt string ({}) or a raw mode ({})",
                a.cipher,
                CipherSpec::ALL.join(", "),
                RAW.join(", ")
            ))
        })?)
    };
    let sector_opts = a.sector.is_some() || a.sector_size.is_some() || a.iv_large_sectors;
    if spec.is_none() && sector_opts {
        return Err(Failure::usage(format!(
            "--sector, --sector-size and --iv-large-sectors go with a dm-crypt cipher string, not the raw mode {}",
            a.cipher
        )));
    }
    if spec.is_some() && a.iv.is_some() {
        return Err(Failure::usage(format!(
            "--iv goes with the raw modes aes-cbc, aes-ctr and aes-xts; {} computes its ivs from --sector",
            a.cipher
        )));
    }
    let mut data = read_input(a.input.as_deref())?;
    let encrypt = a.direction == Direction::Encrypt;
    match spec {
        Some(spec) => {
            spec.check_key(&key)?;
            let layout = SectorLayout::new(a.sector_size.unwrap_or(512), a.iv_large_sectors)?;
            let c = SectorCipher::new(spec, &key, layout)?;
            let first = a.sector.unwrap_or(0);
            if encrypt {
                c.encrypt(first, &mut data)
            } else {
                c.decrypt(first, &mut data)
            }?;
        }
        None => {
            let iv = parse_iv(a.iv.as_deref(), &a.cipher)?;
            match a.cipher.as_str() {
                "aes-cbc" => {
                    let c = Cbc::new(&key)?;
                    if encrypt {
                        c.encrypt(&iv, &mut data)
                    } else {
                        c.decrypt(&iv, &mut data)
                    }?;
                }
                "aes-ctr" => Ctr::new(&key)?.apply_keystream(&iv, 0, &mut data),
                _ => {
                    let c = Xts::new(&key)?;
                    if encrypt {
                        c.encrypt(&iv, &mut data)
                    } else {
                        c.decrypt(&iv, &mut data)
                    }?;
                }
            }
        }
    }
    write_output(a.output.as_deref(), &data)
}

/// AES-GCM: ciphertext || tag out on encryption; on decryption the plaintext is written
/// only when the tag verifies.
fn gcm(a: &CipherArgs, key: &[u8]) -> Result<(), Failure> {
    if a.sector.is_some() || a.sector_size.is_some() || a.iv_large_sectors {
        return Err(Failure::usage(
            "--sector, --sector-size and --iv-large-sectors do not apply to aes-gcm",
        ));
    }
    let iv = decode_hex(
        a.iv.as_deref()
            .ok_or_else(|| Failure::usage("aes-gcm needs --iv (hex; 12 bytes is standard)"))?,
        "--iv",
    )?;
    let aad = match &a.aad {
        Some(h) => decode_hex(h, "--aad")?,
        None => vec![],
    };
    let tag_len = a.tag_len.unwrap_or(16);
    let short = matches!(tag_len, 4 | 8);
    if !short && !(12..=16).contains(&tag_len) {
        return Err(Failure::usage(format!(
            "--tag-len {tag_len}: use 16, 15, 14, 13 or 12 (or 8 or 4)"
        )));
    }
    let g = Gcm::new(key)?;
    let mut data = read_input(a.input.as_deref())?;
    if a.direction == Direction::Encrypt {
        let mut tag = [0u8; 16];
        if short {
            g.seal_short_tag(&iv, &aad, &mut data, &mut tag[..tag_len])?;
        } else {
            tag = g.seal(&iv, &aad, &mut data)?;
        }
        data.extend_from_slice(&tag[..tag_len]);
        return write_output(a.output.as_deref(), &data);
    }
    if data.len() < tag_len {
        return Err(Failure::usage(format!(
            "input is {} bytes, shorter than the {tag_len}-byte tag",
            data.len()
        )));
    }
    let tag = data.split_off(data.len() - tag_len);
    let opened = if short {
        g.open_short_tag(&iv, &aad, &mut data, &tag)
    } else {
        g.open(&iv, &aad, &mut data, &tag)
    };
    match opened {
        Ok(()) => write_output(a.output.as_deref(), &data),
        Err(sectorcrypt_crypto::Error::AuthenticationFailed) => {
            Err(Failure::runtime("authentication failed"))
        }
        Err(e) => Err(e.into()),
    }
}

/// The GOST 28147-89 and Magma ciphers of `cipher encrypt|decrypt|mac`.
const GOST_CIPHERS: [&str; 11] = [
    "gost89-ecb",
    "gost89-cnt",
    "gost89-cfb",
    "gost89-cbc",
    "magma-ecb",
    "magma-ctr",
    "magma-ofb",
    "magma-cbc",
    "magma-cfb",
    "magma-ctr-acpkm",
    "magma-mgm",
];
const GOST_MACS: [&str; 2] = ["gost89-mac", "magma-mac"];

/// The CTR-ACPKM section size (RFC 8645): 1 KiB, as OpenSSL's gost provider uses.
const ACPKM_SECTION: usize = 1024;

/// `cipher encrypt|decrypt|mac` for GOST 28147-89 and Magma: every check (names, key,
/// IV, S-box) happens before the input is read; nothing is written on failure.
fn gost(a: &CipherArgs) -> Result<(), Failure> {
    use sectorcrypt_crypto::{gost89, gost89::Sbox, magma};
    let c = a.cipher.as_str();
    let mac = a.direction == Direction::Mac;
    if mac && !GOST_MACS.contains(&c) {
        return Err(Failure::usage(format!(
            "cipher mac takes --cipher {}, not {c}",
            GOST_MACS.join(" or ")
        )));
    }
    if !mac && !GOST_CIPHERS.contains(&c) {
        let hint = if GOST_MACS.contains(&c) {
            format!("; use `sectorcrypt cipher mac --cipher {c}`")
        } else {
            String::new()
        };
        return Err(Failure::usage(format!(
            "unknown cipher {c:?} for encrypt/decrypt; gost ciphers: {}{hint}",
            GOST_CIPHERS.join(", ")
        )));
    }
    if a.sector.is_some() || a.sector_size.is_some() || a.iv_large_sectors {
        return Err(Failure::usage(format!(
            "--sector, --sector-size and --iv-large-sectors do not apply to {c}"
        )));
    }
    let gost89 = c.starts_with("gost89-");
    let sbox = if gost89 {
        let names: Vec<&str> = Sbox::ALL.iter().map(|s| s.name()).collect();
        let name = a.sbox.as_deref().ok_or_else(|| {
            Failure::usage(format!(
                "{c} needs --sbox NAME (no default; libraries disagree): {}",
                names.join(", ")
            ))
        })?;
        Sbox::from_name(name).map_err(|_| {
            Failure::usage(format!(
                "unknown --sbox {name:?}; use one of: {}",
                names.join(", ")
            ))
        })?
    } else {
        if a.sbox.is_some() {
            return Err(Failure::usage(format!(
                "--sbox goes with gost89-*; {c} always uses id-tc26-gost-28147-param-Z"
            )));
        }
        if a.key_meshing {
            return Err(Failure::usage(format!(
                "--key-meshing goes with gost89-* (CryptoPro key meshing), not {c}"
            )));
        }
        Sbox::Tc26Z
    };
    if c != "magma-mgm" && (a.aad.is_some() || (a.tag_len.is_some() && !mac)) {
        return Err(Failure::usage(format!(
            "--aad and --tag-len go with magma-mgm (and --tag-len with mac), not {c}"
        )));
    }
    let key = read_key(a)?;
    let mesh = a.key_meshing;
    let iv_len: Option<&str> = match c {
        "gost89-ecb" | "magma-ecb" | "gost89-mac" | "magma-mac" => None,
        "gost89-cnt" | "gost89-cfb" | "gost89-cbc" | "magma-mgm" => Some("8"),
        "magma-ctr" | "magma-ctr-acpkm" => Some("4"),
        _ => Some("a multiple of 8"),
    };
    let iv = match (iv_len, a.iv.as_deref()) {
        (None, None) => vec![],
        (None, Some(_)) => return Err(Failure::usage(format!("{c} takes no --iv"))),
        (Some(n), None) => return Err(Failure::usage(format!("{c} needs --iv ({n} bytes, hex)"))),
        (Some(n), Some(h)) => {
            let v = decode_hex(h, "--iv")?;
            let ok = match n {
                "8" => v.len() == 8,
                "4" => v.len() == 4,
                _ => !v.is_empty() && v.len() % 8 == 0,
            };
            if !ok {
                return Err(Failure::usage(format!(
                    "--iv for {c} must be {n} bytes, got {} bytes",
                    v.len()
                )));
            }
            v
        }
    };
    let iv8 = |v: &[u8]| -> [u8; 8] { v.try_into().unwrap_or([0; 8]) };
    let iv4 = |v: &[u8]| -> [u8; 4] { v.try_into().unwrap_or([0; 4]) };
    if mac {
        let n = a.tag_len.unwrap_or(if c == "gost89-mac" { 4 } else { 8 });
        if !(1..=8).contains(&n) {
            return Err(Failure::usage(format!(
                "--tag-len {n}: a mac is 1 to 8 bytes"
            )));
        }
        let data = read_input(a.input.as_deref())?;
        let mut out = vec![0u8; n];
        if c == "gost89-mac" {
            gost89::Mac::new(&key, sbox, mesh)?.mac_to(&data, &mut out)?;
        } else {
            magma::Mac::new(&key)?.mac_to(&data, &mut out)?;
        }
        let mut line = hex::encode(&out);
        line.push('\n');
        return write_output(a.output.as_deref(), line.as_bytes());
    }
    let enc = a.direction == Direction::Encrypt;
    if c == "magma-mgm" {
        let tag_len = a.tag_len.unwrap_or(8);
        if !(4..=8).contains(&tag_len) {
            return Err(Failure::usage(format!(
                "--tag-len {tag_len}: magma-mgm tags are 4 to 8 bytes"
            )));
        }
        let aad = match &a.aad {
            Some(h) => decode_hex(h, "--aad")?,
            None => vec![],
        };
        let m = magma::Mgm::new(&key)?;
        let nonce = iv8(&iv);
        let mut data = read_input(a.input.as_deref())?;
        if enc {
            let mut tag = vec![0u8; tag_len];
            m.seal(&nonce, &aad, &mut data, &mut tag)?;
            data.extend_from_slice(&tag);
            return write_output(a.output.as_deref(), &data);
        }
        if data.len() < tag_len {
            return Err(Failure::usage(format!(
                "input is {} bytes, shorter than the {tag_len}-byte tag",
                data.len()
            )));
        }
        let tag = data.split_off(data.len() - tag_len);
        return match m.open(&nonce, &aad, &mut data, &tag) {
            Ok(()) => write_output(a.output.as_deref(), &data),
            Err(sectorcrypt_crypto::Error::AuthenticationFailed) => {
                Err(Failure::runtime("authentication failed"))
            }
            Err(e) => Err(e.into()),
        };
    }
    let mut data = read_input(a.input.as_deref())?;
    let d = &mut data;
    match c {
        "gost89-ecb" => {
            let x = gost89::Ecb::new(&key, sbox, mesh)?;
            if enc { x.encrypt(d) } else { x.decrypt(d) }?
        }
        "gost89-cnt" => gost89::Cnt::new(&key, sbox, mesh)?.encrypt(&iv8(&iv), d)?,
        "gost89-cfb" => {
            let x = gost89::Cfb::new(&key, sbox, mesh)?;
            if enc {
                x.encrypt(&iv8(&iv), d)
            } else {
                x.decrypt(&iv8(&iv), d)
            }?
        }
        "gost89-cbc" => {
            let x = gost89::Cbc::new(&key, sbox, mesh)?;
            if enc {
                x.encrypt(&iv8(&iv), d)
            } else {
                x.decrypt(&iv8(&iv), d)
            }?
        }
        "magma-ecb" => {
            let x = magma::Ecb::new(&key)?;
            if enc { x.encrypt(d) } else { x.decrypt(d) }?
        }
        "magma-ctr" => magma::Ctr::new(&key)?.encrypt(&iv4(&iv), d)?,
        "magma-ctr-acpkm" => magma::CtrAcpkm::new(&key, ACPKM_SECTION)?.encrypt(&iv4(&iv), d)?,
        "magma-ofb" => magma::Ofb::new(&key)?.encrypt(&iv, d)?,
        "magma-cbc" => {
            let x = magma::Cbc::new(&key)?;
            if enc {
                x.encrypt(&iv, d)
            } else {
                x.decrypt(&iv, d)
            }?
        }
        _ => {
            let x = magma::Cfb::new(&key)?;
            if enc {
                x.encrypt(&iv, d)
            } else {
                x.decrypt(&iv, d)
            }?
        }
    }
    write_output(a.output.as_deref(), &data)
}

/// Raw ECB goes through the dm-crypt path above (it has no IV); this is for the others.
fn parse_iv(iv: Option<&str>, cipher: &str) -> Result<[u8; 16], Failure> {
    let iv = iv.ok_or_else(|| {
        Failure::usage(format!("{cipher} needs --iv (16 bytes as 32 hex digits)"))
    })?;
    let bytes = decode_hex(iv, "--iv")?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        Failure::usage(format!(
            "--iv must be 16 bytes (32 hex digits), got {} bytes",
            b.len()
        ))
    })
}

fn decode_hex(s: &str, what: &str) -> Result<Vec<u8>, Failure> {
    // Also used for keys: the copy without spaces is wiped when dropped.
    let clean: Zeroizing<String> =
        Zeroizing::new(s.chars().filter(|c| !c.is_whitespace()).collect());
    hex::decode(clean.as_bytes())
        .map_err(|e| Failure::usage(format!("{what}: not valid hex ({e})")))
}

fn read_key(a: &CipherArgs) -> Result<Zeroizing<Vec<u8>>, Failure> {
    match (&a.key, &a.key_file) {
        (Some(hex), None) => Ok(Zeroizing::new(decode_hex(hex, "--key")?)),
        (None, Some(path)) => std::fs::read(path)
            .map(Zeroizing::new)
            .map_err(|e| Failure::usage(format!("cannot read key file {}: {e}", path.display()))),
        _ => Err(Failure::usage("give exactly one of --key and --key-file")),
    }
}

fn read_input(path: Option<&Path>) -> Result<Vec<u8>, Failure> {
    let mut data = vec![];
    match path {
        Some(p) => {
            data = std::fs::read(p)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", p.display())))?
        }
        None => {
            std::io::stdin()
                .read_to_end(&mut data)
                .map_err(|e| Failure::runtime(format!("reading standard input: {e}")))?;
        }
    }
    Ok(data)
}

/// Writes all of `data`, to standard output or atomically to `path` (a temporary file in
/// the same directory, then a rename).
fn write_output(path: Option<&Path>, data: &[u8]) -> Result<(), Failure> {
    let Some(path) = path else {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(data)
            .and_then(|()| out.flush())
            .map_err(|e| Failure::runtime(format!("writing standard output: {e}")));
    };
    sectorcrypt_volume::atomic::AtomicFile::create(path)
        .and_then(|mut f| {
            f.write_all(data)?;
            f.commit()
        })
        .map_err(|e| Failure::runtime(format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_spaces_is_accepted_and_junk_is_not() {
        assert_eq!(decode_hex("00 ff\n10", "x").unwrap(), vec![0, 0xff, 0x10]);
        assert!(matches!(decode_hex("0g", "x"), Err(Failure::Usage(_))));
        assert!(matches!(
            parse_iv(Some("00"), "aes-cbc"),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(parse_iv(None, "aes-cbc"), Err(Failure::Usage(_))));
    }
}

//! `sectorcrypt cipher encrypt|decrypt`: the whole input is read and transformed in memory,
//! every check happens before the first byte is written, and `--output` is replaced
//! atomically, so bad input never leaves a partial or truncated output behind.

use crate::args::{CipherArgs, Direction};
use crate::failure::Failure;
use sectorcrypt_crypto::{Cbc, CipherSpec, Ctr, Gcm, SectorCipher, SectorLayout, Xts};
use std::io::{Read, Write};
use std::path::Path;
use zeroize::Zeroizing;

/// The raw modes: one message (one data unit) with an explicit IV.
const RAW: [&str; 4] = ["aes-ecb", "aes-cbc", "aes-ctr", "aes-xts"];

pub fn run(a: CipherArgs) -> Result<(), Failure> {
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
    let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(&clean).map_err(|e| Failure::usage(format!("{what}: not valid hex ({e})")))
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
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.sectorcrypt-{}", std::process::id()));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Failure::runtime(format!("writing {}: {e}", path.display()))
    })
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

//! The case `geli-auth-sha256/4096`: a GELI provider of AES-XTS-128 with HMAC/SHA256 tags
//! (`geli init -a hmac/sha256 -s 4096`, metadata version 7), 4096-byte sectors on 512-byte
//! units (nine units of `tag | 480 or 256 bytes of ciphertext | padding` per sector),
//! sealed through the volume crate's authenticated layout: per-unit XTS under the zone's
//! key, then the tags of the whole run in one call to the crypto core's `SectorMac`.
//!
//! The peer is the same work composed per unit through the openssl crate, as a program
//! without a sector engine would write it: EVP AES-128-XTS with the zone's key set when
//! the zone changes and the unit's tweak set per unit, SHA-256 of the authentication key
//! and the unit's offset for the unit key, and an HMAC-SHA256 (a new key per unit) over
//! the unit's ciphertext. Both produce the same bytes, checked when the case is built.
//! The run starts at sector 116500, so its units cross the zone boundary at unit 2^20.

use super::{Built, ENGINE_SIDE};
use crate::Side;
use openssl::cipher::Cipher;
use openssl::cipher_ctx::CipherCtx;
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;
use sectorcrypt_crypto::mac::MacAlgorithm;
use sectorcrypt_volume::geli::keys::{self, ZoneKeys, ZONE_SHIFT};
use sectorcrypt_volume::layout::KeySource;
use sectorcrypt_volume::{Geometry, IvRule, Layout, SectorMetadata, UnitKeys};

/// Plaintext bytes per call: 64 sectors.
const BYTES: usize = 64 * SECTOR;
const SECTOR: usize = 4096;
const UNIT: usize = 512;
const TAG: usize = 32;
/// Ciphertext bytes per unit: (512 - 32) rounded down to 16.
const DATA: usize = 480;
const UNITS: usize = 9;
const FIRST: u64 = 116_500;

fn e(err: impl std::fmt::Display) -> String {
    err.to_string()
}

/// The case: our sealing of 64 sectors against the per-unit OpenSSL composition.
pub(crate) fn geli_auth_sha256() -> Result<Built, String> {
    let mkey: Vec<u8> = (0..128u32).map(|i| (i * 151 + 7) as u8).collect();
    let geometry = Geometry {
        sector_size: SECTOR,
        data_offset: 0,
        size: 4 * (1u64 << ZONE_SHIFT) * SECTOR as u64,
        iv: IvRule::ByteOffset,
        metadata: Some(SectorMetadata {
            unit_len: UNIT,
            mac: MacAlgorithm::HmacSha256,
        }),
    };
    let akey = keys::auth_key(&mkey);
    let layout = Layout::authenticated(
        geometry,
        UnitKeys::Zoned {
            spec: "aes-xts-plain64".parse().map_err(e)?,
            zone_units: 1 << ZONE_SHIFT,
            source: Box::new(ZoneKeys::authenticated(7, &mkey, 32, false)),
        },
        &akey[..],
    )
    .map_err(e)?;
    let src: Vec<u8> = (0..BYTES)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let stored = BYTES / SECTOR * UNITS * UNIT;
    let mut ours_out = vec![0u8; stored];
    layout.seal(FIRST, &src, &mut ours_out).map_err(e)?;
    let zones = ZoneKeys::authenticated(7, &mkey, 32, false);
    let mut peer = Peer {
        ctx: CipherCtx::new().map_err(e)?,
        zone: None,
        zones,
        akey: akey[..].to_vec(),
        tmp: vec![0u8; DATA + 16],
    };
    let mut peer_out = vec![0u8; stored];
    peer.seal(&src, &mut peer_out).map_err(e)?;
    if peer_out != ours_out {
        return Err("geli-auth-sha256: the OpenSSL composition and the engine differ".into());
    }
    let peer_src = src.clone();
    Ok(Built {
        ours: Side {
            version: None,
            output: None,
            name: format!(
                "{}{}",
                ENGINE_SIDE,
                sectorcrypt_crypto::Backend::selected().map_err(e)?.name()
            ),
            bytes: BYTES,
            call: Box::new(move || layout.seal(FIRST, &src, &mut ours_out).expect("engine")),
        },
        peer: Some(Side {
            version: Some(openssl::version::version().to_string()),
            output: None,
            name: "openssl-per-unit".into(),
            bytes: BYTES,
            call: Box::new(move || peer.seal(&peer_src, &mut peer_out).expect("openssl")),
        }),
        job: None,
    })
}

/// The OpenSSL composition's state: the XTS context keyed for `zone`.
struct Peer {
    ctx: CipherCtx,
    zone: Option<u64>,
    zones: ZoneKeys,
    akey: Vec<u8>,
    tmp: Vec<u8>,
}

impl Peer {
    /// Seals the sectors of `src` from sector [`FIRST`] into `out`, unit by unit.
    fn seal(&mut self, src: &[u8], out: &mut [u8]) -> Result<(), String> {
        for (k, plain) in src.chunks_exact(SECTOR).enumerate() {
            for j in 0..UNITS {
                let i = k * UNITS + j;
                let off = (FIRST * (UNITS * UNIT) as u64) + (i * UNIT) as u64;
                let zone = (off / UNIT as u64) >> ZONE_SHIFT;
                if self.zone != Some(zone) {
                    let key = self.zones.zone_key(zone).map_err(e)?;
                    self.ctx
                        .encrypt_init(Some(Cipher::aes_128_xts()), Some(&key[..32]), None)
                        .map_err(e)?;
                    self.ctx.set_padding(false);
                    self.zone = Some(zone);
                }
                let len = if j + 1 == UNITS {
                    SECTOR - (UNITS - 1) * DATA
                } else {
                    DATA
                };
                let mut tweak = [0u8; 16];
                tweak[..8].copy_from_slice(&off.to_le_bytes());
                self.ctx.encrypt_init(None, None, Some(&tweak)).map_err(e)?;
                let msg = &plain[j * DATA..j * DATA + len];
                self.ctx
                    .cipher_update(msg, Some(&mut self.tmp[..len + 16]))
                    .map_err(e)?;
                let unit = &mut out[i * UNIT..(i + 1) * UNIT];
                unit[TAG..TAG + len].copy_from_slice(&self.tmp[..len]);
                unit[TAG + len..].fill(0);
                let mut h = openssl::sha::Sha256::new();
                h.update(&self.akey);
                h.update(&off.to_le_bytes());
                let unit_key = PKey::hmac(&h.finish()).map_err(e)?;
                let mut mac = Signer::new(MessageDigest::sha256(), &unit_key).map_err(e)?;
                mac.update(&unit[TAG..TAG + len]).map_err(e)?;
                mac.sign(&mut unit[..TAG]).map_err(e)?;
            }
        }
        Ok(())
    }
}

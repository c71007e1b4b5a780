//! Creation of a normal VeraCrypt volume on a store: the header at 0 and its backup 128 KiB
//! before the end, each under its own random salt, the master keys random, the data area
//! from 128 KiB to 128 KiB before the end. Both 128 KiB header areas (the header, the
//! hidden-volume header slot, the rest) are first filled with random bytes, as VeraCrypt
//! does, so an unused hidden header slot cannot be told from a used one. The data area is
//! left as it is (a quick format). Hidden volumes are not made here yet.

use super::header::{Fields, Made, Prf, CHAINS, HEADER_LEN, KDFS, SALT_LEN};
use crate::error::{Error, Result};
use crate::store::{self, Store};
use sectorcrypt_crypto::cascade::Cascade;
use zeroize::Zeroizing;

/// The bytes of each header area (the header, the hidden header slot) at either end.
pub const HEADER_AREA: u64 = 131_072;
/// VeraCrypt's sector size for volumes it makes.
const SECTOR: u64 = 512;

/// What [`create`] makes.
#[derive(Debug, Clone)]
pub struct Create {
    /// The chain, by the name the reading side uses (`aes`, `aes-twofish-serpent`, ...).
    pub chain: String,
    /// The PBKDF2 hash.
    pub prf: Prf,
    /// VeraCrypt's PIM (`None` or 0: the default iterations).
    pub pim: Option<u32>,
}

impl Default for Create {
    fn default() -> Create {
        Create {
            chain: "aes".to_string(),
            prf: Prf::Sha512,
            pim: None,
        }
    }
}

fn random(buf: &mut [u8]) -> Result<()> {
    getrandom::getrandom(buf).map_err(|e| Error::invalid(format!("no random bytes: {e}")))
}

/// Makes a normal VeraCrypt volume filling `store`, opened by `password` (the passphrase
/// already mixed with any keyfiles by [`super::header::password`]).
pub fn create(store: &dyn Store, password: &[u8], what: &Create) -> Result<()> {
    let chain = CHAINS
        .iter()
        .find(|c| c.name == what.chain)
        .ok_or_else(|| Error::invalid(format!("unknown VeraCrypt cipher {:?}", what.chain)))?;
    let kdf = KDFS
        .iter()
        .find(|k| k.prf == what.prf && k.made == Made::VeraCrypt)
        .ok_or_else(|| Error::invalid(format!("no VeraCrypt volume uses {:?}", what.prf)))?;
    let pim = what.pim.filter(|&p| p != 0);
    let size = store::size(store)?;
    let data_len = size.saturating_sub(2 * HEADER_AREA) / SECTOR * SECTOR;
    if data_len == 0 {
        return Err(Error::invalid(format!(
            "{} has {size} bytes; a VeraCrypt volume needs more than {} (two 128 KiB header areas)",
            store.name(),
            2 * HEADER_AREA
        )));
    }
    let fields = Fields {
        magic: *b"VERA",
        version: 5,
        min_program: 0x010b,
        hidden_size: 0,
        volume_size: data_len,
        mk_offset: HEADER_AREA,
        mk_size: data_len,
        flags: 0,
        sector_size: SECTOR as u32,
    };
    let mut keys = Zeroizing::new(vec![0u8; chain.key_len()]);
    random(&mut keys)?;
    let plain = fields
        .encode(&keys)
        .ok_or_else(|| Error::invalid("the chain's keys do not fit a header"))?;
    for area in [0, size - HEADER_AREA] {
        let mut filler = vec![0u8; HEADER_AREA as usize];
        random(&mut filler)?;
        let mut h = Zeroizing::new([0u8; HEADER_LEN]);
        h.copy_from_slice(&plain[..]);
        random(&mut h[..SALT_LEN])?;
        let dk = kdf.derive(password, &h[..SALT_LEN], pim);
        Cascade::new(chain.layers, &dk[..chain.key_len()])?.encrypt(
            0,
            HEADER_LEN - SALT_LEN,
            &mut h[SALT_LEN..],
        )?;
        filler[..HEADER_LEN].copy_from_slice(&h[..]);
        store
            .write_at(&filler, area)
            .map_err(|e| Error::io(format!("writing a VeraCrypt header to {}", store.name()), e))?;
    }
    store
        .sync()
        .map_err(|e| Error::io(format!("syncing {}", store.name()), e))?;
    Ok(())
}

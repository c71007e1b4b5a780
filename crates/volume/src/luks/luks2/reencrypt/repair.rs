//! `repair` of a volume whose re-encryption is in progress, as `cryptsetup repair` does it
//! (with the passphrase): the metadata written before cryptsetup 2.3.7 (the unversioned
//! `online-reencrypt` flag, no reencryption digest) gets its digest and the `-v2` flag;
//! any other is checked against its digest, so that metadata someone without the key
//! changed is refused; a crash inside a hotzone is recovered.

use super::super::json::{corrupt, obj};
use super::super::Luks2;
use super::{requirement_version, state, State};
use crate::error::{Error, Result};
use crate::store::{Placement, Store};
use serde_json::Value;

/// What [`Luks2::reencrypt_repair`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repaired {
    /// The metadata is sound and the state clean: nothing to do.
    Sound,
    /// Metadata of before cryptsetup 2.3.7 got its digest and the versioned flag.
    Upgraded,
    /// A crash inside a hotzone was recovered (the run may be resumed, or it ended).
    Recovered,
    /// A re-key whose data was all done and whose old keyslot was already wiped (an end
    /// interrupted) was ended with the new key alone.
    Ended,
}

impl Luks2 {
    /// Repairs the reencryption metadata with `passphrase` (see the module
    /// documentation). Refuses metadata whose digest does not match.
    pub fn reencrypt_repair(&mut self, at: Placement<'_>, passphrase: &[u8]) -> Result<Repaired> {
        let header = at.header();
        let version = requirement_version(&self.json)?
            .ok_or_else(|| Error::invalid("no re-encryption is in progress"))?;
        self.only_known_requirements()?;
        self.check_regular_segments()?;
        if self.reencrypt_finish_without_old_key(at, passphrase)? {
            return Ok(Repaired::Ended);
        }
        let (old, new) = self.bound_keys(header, passphrase)?;
        let (o, n) = (old.as_ref().map(|k| &k[..]), new.as_ref().map(|k| &k[..]));
        // Metadata without a digest (before cryptsetup 2.3.7, or one that was lost) is
        // signed again by the holder of the keys, as cryptsetup's repair does; a digest
        // that does not match is refused below.
        if version == 1 || !self.has_reencrypt_digest()? {
            self.upgrade(header, o, n)?;
            return Ok(Repaired::Upgraded);
        }
        super::verify_digest(&self.json, o, n)?;
        if state(&self.json)? != State::Crash {
            return Ok(Repaired::Sound);
        }
        let keys = super::Keys::from_parts(o, n);
        self.reencrypt_recover(at, &keys)?;
        Ok(Repaired::Recovered)
    }

    /// Whether a digest lists the reencrypt keyslot.
    fn has_reencrypt_digest(&self) -> Result<bool> {
        let slot = super::plan(&self.json)?.slot.to_string();
        Ok(obj(&self.json, "digests", "")?.values().any(|d| {
            d["keyslots"]
                .as_array()
                .is_some_and(|a| a.iter().any(|k| k.as_str() == Some(&slot)))
        }))
    }

    /// Gives metadata of before cryptsetup 2.3.7 its reencryption digest and the `-v2`
    /// flag (as `cryptsetup repair`); one header write.
    fn upgrade(
        &mut self,
        header: &dyn Store,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<()> {
        let saved = self.json.clone();
        let result = self.upgraded(old, new).and_then(|_| self.write(header));
        if result.is_err() {
            self.json = saved;
        }
        result
    }

    fn upgraded(&mut self, old: Option<&[u8]>, new: Option<&[u8]>) -> Result<()> {
        let p = super::plan(&self.json)?;
        if p.mode == "decrypt" && p.resilience.starts_with("datashift") {
            return Err(Error::unsupported(
                "upgrading the metadata of a decryption with a data shift: use `cryptsetup \
                 repair`",
            ));
        }
        let flags = self.json["config"]["requirements"]["mandatory"]
            .as_array_mut()
            .ok_or_else(|| corrupt("json: config.requirements.mandatory"))?;
        for f in flags.iter_mut() {
            if f.as_str() == Some("online-reencrypt") {
                *f = Value::String("online-reencrypt-v2".into());
            }
        }
        let first = obj(&self.json, "digests", "")?
            .keys()
            .next()
            .cloned()
            .ok_or_else(|| corrupt("json: no digest"))?;
        let (hash, iterations) = self.digest_cost(&first)?;
        self.seal_reencryption(p.slot, hash, iterations, old, new)
    }
}

//! The part of an [`Unlocked`] volume whose sectors are stored with tags: how they are
//! cut, the tags' key (held in secret memory like the volume key), and whether the units
//! are encrypted at all (GELI's NULL encryption keeps them in the clear, still tagged).

use super::Unlocked;
use crate::error::Result;
use crate::layout::{Layout, SectorMetadata, UnitKeys};
use sectorcrypt_crypto::secret::SecretBytes;
use std::sync::Arc;

/// Tags of an unlocked volume.
pub(super) struct UnitAuth {
    pub(super) metadata: SectorMetadata,
    key: SecretBytes,
    encrypted: bool,
}

impl UnitAuth {
    /// The authenticated layout of `u`: its zones (counted in units) or its single key,
    /// or no encryption.
    pub(super) fn layout(&self, u: &Unlocked) -> Result<Layout> {
        let keys = match (&u.zones, self.encrypted) {
            (_, false) => UnitKeys::Plaintext,
            (None, true) => UnitKeys::Single(u.spec, &u.volume_key),
            (Some((zone_units, source)), true) => UnitKeys::Zoned {
                spec: u.spec,
                zone_units: *zone_units,
                source: Box::new(Arc::clone(source)),
            },
        };
        Layout::authenticated(u.geometry(), keys, &self.key)
    }
}

impl Unlocked {
    /// The same volume with its sectors stored as `metadata` says, tagged under
    /// `auth_key`; `encrypted == false` for units kept in the clear (the cipher is then
    /// unused). Zones given by [`Unlocked::with_zones`] count units.
    pub fn with_auth(
        mut self,
        metadata: SectorMetadata,
        auth_key: &[u8],
        encrypted: bool,
    ) -> Unlocked {
        self.auth = Some(UnitAuth {
            metadata,
            key: SecretBytes::from_slice(auth_key),
            encrypted,
        });
        self
    }

    /// How sectors are stored with tags, for an authenticated volume.
    pub fn sector_metadata(&self) -> Option<SectorMetadata> {
        self.auth.as_ref().map(|a| a.metadata)
    }
}

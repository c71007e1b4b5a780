//! Converting a LUKS volume between LUKS1 and LUKS2 in place, as `cryptsetup convert`
//! (the rules, the refusals and the header made are `sectorcrypt_volume::luks::convert`'s):
//! the volume is claimed exclusively (one in use, served or open, is refused), its header
//! is checked before anything is asked or written, and converted under the exclusive
//! header lock after reading it again. No passphrase is needed.

use crate::error::{Error, Result};
use crate::image::{Access, Context, Image};
use sectorcrypt_volume::luks::{convert as luks, Version};
use sectorcrypt_volume::Header;
use std::path::Path;

/// A volume claimed for a conversion whose header passed every rule.
#[derive(Debug)]
pub struct Conversion {
    image: Image,
    to: Version,
}

impl Conversion {
    /// Opens the volume at `locator` (its header in `header` when detached, which is
    /// refused) with the exclusive use claim and checks that its header converts to `to`.
    pub fn prepare(
        locator: &Path,
        header: Option<&Path>,
        to: Version,
        cx: &Context,
    ) -> Result<Conversion> {
        let image = Image::open(locator, header, Access::Replace, cx)?;
        if image.files.placement().is_detached() {
            return Err(Error::unsupported(
                "convert works on attached headers only; a detached header converts with \
                 `cryptsetup convert --header`",
            ));
        }
        if let Some(e) = luks::refusal(&image.files.store, &image.header, to) {
            return Err(e.into());
        }
        Ok(Conversion { image, to })
    }

    /// The header as it is now.
    pub fn header(&self) -> &Header {
        &self.image.header
    }

    /// Where the header is, for messages.
    pub fn header_path(&self) -> &Path {
        &self.image.files.header_path
    }

    /// Converts (under the exclusive header lock, the header read again) and returns the
    /// new header, as read back.
    pub fn run(mut self) -> Result<Header> {
        let to = self.to;
        self.image.update(|h, store| {
            luks::convert(store, h, to)?;
            *h = Header::read(store)?;
            Ok::<_, Error>(())
        })?;
        Ok(self.image.header)
    }
}

/// Converts the LUKS volume at `locator` to `to` in one call ([`Conversion::prepare`],
/// then [`Conversion::run`]).
pub fn convert(locator: &Path, to: Version, cx: &Context) -> Result<Header> {
    Conversion::prepare(locator, None, to, cx)?.run()
}

//! `convert`: a LUKS volume to LUKS1 or LUKS2 in place (`cryptsetup convert`), through
//! `sectorcrypt_image::Conversion`: the header is checked (every refusal before the
//! question), the confirmation asked as cryptsetup asks it, then converted.

use crate::failure::Failure;
use crate::flags::convert::{ConvertArgs, ConvertType};
use crate::passphrase;
use crate::present::locator::redacted;
use crate::volumes::image;
use sectorcrypt_image::Conversion;
use sectorcrypt_volume::luks::Version;

pub fn run(a: ConvertArgs) -> Result<(), Failure> {
    let to = match a.luks_type {
        ConvertType::Luks1 => Version::Luks1,
        ConvertType::Luks2 => Version::Luks2,
    };
    let c = Conversion::prepare(&a.image, a.header.file.as_deref(), to, &image::context())?;
    let target = redacted(c.header_path());
    let from = c.header().name();
    passphrase::confirm(
        &format!(
            "This operation will convert {target} to {} format (from {from}). A crash in the \
             middle leaves the old or the new header; a header backup first is still wise.",
            to.name().to_uppercase()
        ),
        a.batch,
    )?;
    let h = c.run()?;
    println!(
        "{target} converted from {from} to {} (volume {})",
        h.name(),
        h.uuid().unwrap_or("-")
    );
    Ok(())
}

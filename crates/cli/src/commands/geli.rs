//! `resize`: geli's `resize -s oldsize`. A new GELI provider is made by `format --type
//! geli` (`commands/volume.rs`, on the library's creator), with geli's own names for ciphers
//! and key lengths: `--key-size` is geli's `-l` (the AES key, 128 or 256 bits for
//! AES-XTS, 128, 192 or 256 for AES-CBC), `--keyfile-component` its `-k`, `--key-file`
//! its `-J`, `--no-passphrase` its `-P`, `--geli-version` its `-V`; `--geli-boot`,
//! `--geli-boot-loader`, `--geli-display-pass`, `--geli-no-trim` and
//! `--geli-no-autoresize` its flags `-b -g -d -T -R`, `--integrity` its `-a` (with
//! `--cipher null`, its `-e NULL`). An authenticated provider is written whole (every
//! sector sealed, its progress shown) unless `--no-wipe`: an unwritten sector's
//! tags would fail when read.

use crate::failure::Failure;
use crate::flags::ResizeArgs;
use crate::volumes::image;
use sectorcrypt_cli::parse_size;
use sectorcrypt_volume::geli::resize as geli_resize;
use sectorcrypt_volume::lock::Mode;
use sectorcrypt_volume::Store as _;

/// `resize`: geli's `resize -s oldsize` on an image that already grew.
pub fn resize(a: ResizeArgs) -> Result<(), Failure> {
    let old_size = parse_size(&a.old_size)?;
    let store = image::open_store(&a.image, true)?;
    let _claim = image::claim(&store, &a.image, Mode::Exclusive)?;
    let _lock = image::lock_header(&store, &a.image, Mode::Exclusive)?;
    let mut start = [0u8; 6];
    if store.read_at(&mut start, 0).is_ok() && &start == b"LUKS\xba\xbe" {
        return Err(Failure::usage(format!(
            "{} is a LUKS volume: resize is for GELI providers",
            crate::present::locator::redacted(&a.image)
        )));
    }
    let geli = geli_resize::resize(&store, old_size)?;
    println!(
        "{}: GELI metadata moved to the last sector of {} bytes ({} bytes of data)",
        crate::present::locator::redacted(&a.image),
        geli.metadata().provsize,
        geli.data_size()
    );
    Ok(())
}

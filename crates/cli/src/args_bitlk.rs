//! What `--help` says of BitLocker volumes (kept apart from the clap definitions).

/// Shown after `dump --help`, `read --help` and `test-key --help`.
pub const BITLK_HELP: &str = "\
BitLocker (BITLK) volumes, including BitLocker To Go, made by Windows 7 and later: dump, \
test-key, read, write, serve, mount and open work on existing volumes. The passphrase is a \
password, or the 48-digit recovery password (told apart by its form, as cryptsetup does); \
--bitlk-startup-key FILE opens with a startup key (.BEK file); --no-passphrase opens a \
clear key. AES-XTS 128/256 volumes are read and written (a write into BitLocker's metadata \
ranges is refused); AES-CBC volumes (with or without the Elephant diffuser) open their keys \
(test-key, dump) and are read by the library (sectorcrypt_volume::bitlk), not yet by \
read/write/serve/mount/open.
Not supported: creating BitLocker volumes, adding, changing or removing protectors, \
writing AES-CBC volumes, Vista (version 1) volumes, \"used space only\" (encrypt-on-write) \
and partially converted volumes, TPM and smart-card protectors.";

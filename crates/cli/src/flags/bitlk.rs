//! What `--help` says of BitLocker volumes (kept apart from the clap definitions).

/// Shown after `dump --help`, `read --help` and `test-key --help`.
pub const BITLK_HELP: &str = "\
BitLocker (BITLK) volumes, including BitLocker To Go, made by Windows 7 and later: dump, \
test-key, read, write, serve, mount and open work on existing volumes. The passphrase is a \
password, or the 48-digit recovery password (told apart by its form, as cryptsetup does); \
--bitlk-startup-key FILE opens with a startup key (.BEK file); --no-passphrase opens a \
clear key. AES-XTS and AES-CBC (with or without the Elephant diffuser) volumes of 128 and \
256 bits, on 512- and 4096-byte sectors, are read and written; a write into BitLocker's \
metadata ranges is refused.
Not supported: creating BitLocker volumes, adding, changing or removing protectors, \
Vista (version 1) volumes, \"used space only\" (encrypt-on-write) \
and partially converted volumes, TPM and smart-card protectors.";

//! What `--help` says of FileVault 2 volumes (kept apart from the clap definitions).

/// Shown after `dump --help`, `read --help`, `test-key --help`, `write --help` and
/// `mount --help`.
pub const FVAULT2_HELP: &str = "\
FileVault 2 (FVAULT2) volumes on CoreStorage (HFS+, Mac OS X 10.7 and later; not APFS), read as \
cryptsetup 2.6 reads them: dump (the fields of cryptsetup's fvault2Dump), test-key, read, \
serve, mount and open, all read-only (write is refused). They are detected when the \
CoreStorage header's signature and checksum are intact; --type fvault2 names one whose \
header is damaged, to say what is wrong. The passphrase is the user's password (--key-file \
or the prompt); the data is AES-XTS-128 on 512-byte sectors.
Not supported: writing, changing the password, recovery and institutional keys, Fusion \
drives (several physical volumes), FileVault on APFS.";

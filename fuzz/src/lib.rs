//! Fuzz harnesses: one function per target, taking the fuzzer's bytes. The libFuzzer
//! binaries (`fuzz_targets/`, built by `scripts/fuzz.sh` through cargo-fuzz) call them, and
//! so does the stable test `tests/corpus.rs`, over every committed corpus and regression
//! input, in the workspace's ordinary tests.
//!
//! - [`luks1`], [`luks2`]: the bytes are the start of an image (zeros after them, up to a
//!   64 MiB image); the header is read, dumped, rendered as JSON, and every keyslot whose
//!   KDF is cheap is tried with the passphrase the seed images were made with. [`luks2`]
//!   first recomputes the checksum of every header copy it finds, so mutated metadata
//!   reaches the JSON parser and its validation instead of stopping at the checksum.
//! - [`nbd`]: the bytes are what a client sends, handshake and transmission phase alike,
//!   over a socket pair to [`sectorcrypt_nbd::serve_connection`] on a memory export that
//!   panics on any access outside its range.
//! - [`cipher_spec`]: a cipher string for `CipherSpec`, then a key, a sector layout and
//!   data: parsing round-trips, and every usable backend encrypts alike and decrypts back.
//! - [`cli_values`]: the command line's value parsers (`sectorcrypt_cli`): sizes, hex,
//!   key files, each against an independent statement of what it accepts.
//! - [`bitlk`]: the bytes are the start of a BitLocker volume (header, FVE metadata
//!   copies with their CRC-32 recomputed): the metadata parser, `dump`, and a clear key.
//! - [`fvault2`]: the bytes are the start of a FileVault 2 volume with its metadata
//!   blocks in plaintext (checksummed and encrypted by the harness): the metadata reader,
//!   the XML and base64 of its plist, `dump`, and a passphrase opening it at 1 iteration.
//! - [`tcrypt`]: the bytes are a decrypted VeraCrypt/TrueCrypt header (CRC-32s
//!   recomputed) with the options and chain it was found with: the field parser, the data
//!   range, the chain's store and the engine over it (the KDF search is too slow to fuzz).
//! - [`geli`]: the bytes are the end of a GELI provider, its metadata sector last: the
//!   decoder, what reads a provider, `dump`, and unlocking with a small iteration count.
//! - [`nbd_client`]: the bytes are what a server sends to the NBD client (handshake and
//!   replies, paced by what the client sent), over a Unix socket, to a fixed session of
//!   calls; the client's requests must stay inside what the server announced.
//! - [`nbd_uri`]: NBD URIs: parsing, and the canonical spelling parsing back.
//! - [`rbd_spec`]: `rbd:` specs: parsing, the name parsing back, option values never
//!   shown.
//! - [`pem`]: a TLS certificates directory's files, read by the server's and the
//!   clients' TLS setup; refusals name the file and never quote a private key.
//!
//! A harness panics only on a broken property; errors of the code under test are results.
#![forbid(unsafe_code)]

mod bitlk;
mod cipher;
mod cli;
mod fvault2;
mod geli;
mod luks;
mod nbd;
mod nbd_client;
mod nbd_uri;
mod pem;
mod rbd_spec;
mod store;
mod tcrypt;

pub use bitlk::{bitlk, fix_bitlk_crcs};
pub use cipher::cipher_spec;
pub use cli::cli_values;
pub use fvault2::{fix_fvault2, fvault2, FVAULT2_PASSPHRASE};
pub use geli::{geli, geli_reached, GELI_KEYFILE, GELI_PASSPHRASE};
pub use luks::{fix_luks2_checksums, luks1, luks2, reached, Reached, PASSPHRASE};
pub use nbd::nbd;
pub use nbd_client::{
    client_session_against, nbd_client, nbd_client_reached, ClientReached, FUZZ_IDLE, TLS_QUERY,
};
pub use nbd_uri::nbd_uri;
pub use pem::{pem, pem_input, pem_outcome, PemOutcome, PEM_FILES};
pub use rbd_spec::rbd_spec;
pub use tcrypt::{fix_tcrypt_crcs, tcrypt};

/// A harness: runs the code under test on the fuzzer's bytes, panics on a broken property.
pub type Harness = fn(&[u8]);

/// Every target by name (the names of the corpus folders and of the fuzz binaries).
pub const TARGETS: &[(&str, Harness)] = &[
    ("luks1", luks1),
    ("luks2", luks2),
    ("nbd", nbd),
    ("cipher_spec", cipher_spec),
    ("cli_values", cli_values),
    ("geli", geli),
    ("nbd_client", nbd_client),
    ("nbd_uri", nbd_uri),
    ("rbd_spec", rbd_spec),
    ("pem", pem),
    ("bitlk", bitlk),
    ("fvault2", fvault2),
    ("tcrypt", tcrypt),
];

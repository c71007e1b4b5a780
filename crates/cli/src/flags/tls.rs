//! The TLS options of the NBD server (`serve`, `geli attach`, `geli onetime`): nbdkit's
//! options of the same names.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// TLS on the NBD server (nbdkit's options of the same names; shared by `serve` and
/// `geli attach`/`onetime`).
#[derive(Debug, Clone, Default, Args)]
pub struct TlsArgs {
    /// TLS through NBD_OPT_STARTTLS: off, on (the client's choice) or require (clients
    /// that do not start TLS are refused) [default: require with --tls-certificates, off
    /// without].
    #[arg(long, value_name = "MODE", value_enum)]
    pub tls: Option<TlsMode>,
    /// The directory of the server's X.509 certificate, under nbdkit's names:
    /// server-cert.pem, server-key.pem (mode 0600 or 0400: a key its group or others may
    /// read or write is refused), and ca-cert.pem for --tls-verify-peer.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// Clients must present a certificate signed by DIR/ca-cert.pem.
    #[arg(long)]
    pub tls_verify_peer: bool,
}

/// The values of `--tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TlsMode {
    Off,
    On,
    Require,
}

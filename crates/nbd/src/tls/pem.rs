//! A directory of PEM files, under the names nbdkit, qemu and libnbd use: `ca-cert.pem`
//! (the certificate authorities a peer's certificate must chain to), `server-cert.pem` and
//! `server-key.pem` (the server's certificate chain and private key), `client-cert.pem`
//! and `client-key.pem` (a client's).
//!
//! Every failure names the file and says what is wrong with it ([`TlsError`]). A private
//! key is a secret: its file must be readable and writable by its owner alone (as ssh
//! insists for its keys: a key others can read is no longer the owner's, and one others
//! can write can be swapped for theirs), it is read into a buffer wiped when dropped, and
//! an error about it never quotes the file's content (the PEM parser's own messages can
//! hold a line of it, so they are replaced by a fixed text).

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// The certificate authorities' file.
pub(crate) const CA_CERT: &str = "ca-cert.pem";
/// The server's certificate chain (its own certificate first).
pub(crate) const SERVER_CERT: &str = "server-cert.pem";
/// The server's private key.
pub(crate) const SERVER_KEY: &str = "server-key.pem";
/// A client's certificate chain.
pub(crate) const CLIENT_CERT: &str = "client-cert.pem";
/// A client's private key.
pub(crate) const CLIENT_KEY: &str = "client-key.pem";

/// Why TLS could not be set up from a certificates directory.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// A file the configuration needs does not exist.
    Missing(PathBuf),
    /// A file could not be read.
    Read(PathBuf, io::Error),
    /// A file is not PEM, or holds no item of the kind expected there.
    BadPem(PathBuf, String),
    /// One of a pair of files (a certificate and its key) exists without the other.
    Unpaired {
        /// The file that exists.
        present: PathBuf,
        /// The file that does not.
        missing: PathBuf,
    },
    /// A private key's file is open to its group or to others (its mode): refused, as ssh
    /// refuses such a key.
    LoosePermissions(PathBuf, u32),
    /// The files were read but TLS refused them (a key that does not match its
    /// certificate, a key type the TLS library does not know, an unusable authority).
    Rejected(PathBuf, String),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Missing(p) => write!(f, "{}: no such file", p.display()),
            TlsError::Read(p, e) => write!(f, "{}: {e}", p.display()),
            TlsError::BadPem(p, why) => write!(f, "{}: {why}", p.display()),
            TlsError::Unpaired { present, missing } => write!(
                f,
                "{} exists but {} does not: give both or neither",
                present.display(),
                missing.display()
            ),
            TlsError::Rejected(p, why) => write!(f, "{}: {why}", p.display()),
            TlsError::LoosePermissions(p, mode) => write!(
                f,
                "{}: permissions {mode:04o} are too open: a private key must be readable and \
                 writable by its owner alone; refusing it (chmod 600 {0})",
                p.display()
            ),
        }
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsError::Read(_, e) => Some(e),
            _ => None,
        }
    }
}

/// Reads `path` whole; a missing file is [`TlsError::Missing`]. The buffer is wiped on
/// drop (it may hold a private key).
fn read(path: &Path) -> Result<Zeroizing<Vec<u8>>, TlsError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Zeroizing::new(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(TlsError::Missing(path.into())),
        Err(e) => Err(TlsError::Read(path.into(), e)),
    }
}

/// Whether `dir/name` exists (anything there: reading it then says what is wrong).
pub(crate) fn exists(dir: &Path, name: &str) -> bool {
    fs::symlink_metadata(dir.join(name)).is_ok()
}

/// The certificates in `dir/name`, in file order; at least one.
pub(crate) fn certificates(
    dir: &Path,
    name: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let path = dir.join(name);
    let bytes = read(&path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, pem::Error>>()
        .map_err(|e| TlsError::BadPem(path.clone(), format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::BadPem(
            path,
            "no CERTIFICATE in the file (expected PEM \"-----BEGIN CERTIFICATE-----\")".into(),
        ));
    }
    Ok(certs)
}

/// Reads the private key file `path` whole, once its mode (of the file opened, a link
/// followed) is known to give its group and others nothing; a missing file is
/// [`TlsError::Missing`]. The buffer is wiped on drop.
fn read_private(path: &Path) -> Result<Zeroizing<Vec<u8>>, TlsError> {
    let mut file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(TlsError::Missing(path.into()))
        }
        Err(e) => return Err(TlsError::Read(path.into(), e)),
    };
    let mode = file
        .metadata()
        .map_err(|e| TlsError::Read(path.into(), e))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(TlsError::LoosePermissions(path.into(), mode & 0o7777));
    }
    let mut bytes = Zeroizing::new(Vec::new());
    file.read_to_end(&mut bytes)
        .map_err(|e| TlsError::Read(path.into(), e))?;
    Ok(bytes)
}

/// The private key in `dir/name` (PKCS#8, PKCS#1 RSA or SEC1 EC; the first one). The
/// file must be open to its owner alone ([`TlsError::LoosePermissions`]).
pub(crate) fn private_key(dir: &Path, name: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    let path = dir.join(name);
    let bytes = read_private(&path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        // Never the parser's message: it may quote a line of the key.
        let why = match e {
            pem::Error::NoItemsFound => {
                "no private key in the file (expected PEM \"-----BEGIN PRIVATE KEY-----\", \
                 RSA or EC)"
            }
            _ => "not a valid PEM private key",
        };
        TlsError::BadPem(path, why.into())
    })
}

/// A certificate chain and its private key from `dir/cert` and `dir/key`, both present
/// or both absent (`None`).
pub(crate) fn optional_pair(
    dir: &Path,
    cert: &str,
    key: &str,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, TlsError> {
    match (exists(dir, cert), exists(dir, key)) {
        (false, false) => Ok(None),
        (true, false) => Err(TlsError::Unpaired {
            present: dir.join(cert),
            missing: dir.join(key),
        }),
        (false, true) => Err(TlsError::Unpaired {
            present: dir.join(key),
            missing: dir.join(cert),
        }),
        (true, true) => Ok(Some((certificates(dir, cert)?, private_key(dir, key)?))),
    }
}

/// The certificate authorities of `dir/ca-cert.pem` as a root store.
pub(crate) fn roots(dir: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(dir, CA_CERT)? {
        roots
            .add(cert)
            .map_err(|e| TlsError::Rejected(dir.join(CA_CERT), e.to_string()))?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_never_quote_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let e = certificates(d, CA_CERT).unwrap_err();
        assert!(matches!(e, TlsError::Missing(_)), "{e}");
        assert!(e.to_string().contains("ca-cert.pem: no such file"), "{e}");

        fs::write(d.join(CA_CERT), "hello\n").unwrap();
        let e = certificates(d, CA_CERT).unwrap_err().to_string();
        assert!(e.contains("no CERTIFICATE"), "{e}");

        let secret = "-----BEGIN PRIVATE KEY-----\nSECRETSECRET!!\n-----END PRIVATE KEY-----\n";
        fs::write(d.join(SERVER_KEY), secret).unwrap();
        fs::set_permissions(d.join(SERVER_KEY), fs::Permissions::from_mode(0o600)).unwrap();
        let e = private_key(d, SERVER_KEY).unwrap_err().to_string();
        assert!(
            e.contains("server-key.pem: not a valid PEM private key"),
            "{e}"
        );
        assert!(!e.contains("SECRET"), "{e}");
        fs::write(d.join(SERVER_KEY), "-----BEGIN PRIVATE KEY-----\nSECRET\n").unwrap();
        let e = private_key(d, SERVER_KEY).unwrap_err().to_string();
        assert!(!e.contains("SECRET"), "{e}");

        fs::write(d.join(CLIENT_CERT), "x").unwrap();
        let e = optional_pair(d, CLIENT_CERT, CLIENT_KEY)
            .unwrap_err()
            .to_string();
        assert!(e.contains("client-key.pem does not"), "{e}");
        assert!(optional_pair(d, "a.pem", "b.pem").unwrap().is_none());
    }

    #[test]
    fn a_private_key_open_to_group_or_others_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Not a key: were it read, the error would say so instead.
        fs::write(d.join(SERVER_KEY), "not a key\n").unwrap();
        let key = d.join(SERVER_KEY);
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602, 0o660, 0o666, 0o610] {
            fs::set_permissions(&key, fs::Permissions::from_mode(mode)).unwrap();
            let e = private_key(d, SERVER_KEY).unwrap_err();
            assert!(
                matches!(e, TlsError::LoosePermissions(_, m) if m == mode),
                "{e}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("permissions {mode:04o} are too open"))
                    && msg.contains("server-key.pem")
                    && msg.contains("chmod 600"),
                "{msg}"
            );
        }
        // Through a symbolic link (itself 0777), the key file's own mode counts.
        let link = d.join(CLIENT_KEY);
        std::os::unix::fs::symlink(&key, &link).unwrap();
        assert!(matches!(
            private_key(d, CLIENT_KEY),
            Err(TlsError::LoosePermissions(_, 0o610))
        ));
        for mode in [0o600, 0o400] {
            fs::set_permissions(&key, fs::Permissions::from_mode(mode)).unwrap();
            let e = private_key(d, SERVER_KEY).unwrap_err().to_string();
            assert!(e.contains("no private key in the file"), "{mode:o}: {e}");
            let e = private_key(d, CLIENT_KEY).unwrap_err().to_string();
            assert!(e.contains("no private key in the file"), "{mode:o}: {e}");
        }
    }
}

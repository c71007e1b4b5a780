//! X.509 certificates for TLS tests, made with the openssl command line in the layout
//! nbdkit, qemu and libnbd read from a directory: `ca-cert.pem`, `server-cert.pem`,
//! `server-key.pem`, `client-cert.pem`, `client-key.pem`. ECDSA P-256 keys (quick to make),
//! valid for a month; the server's certificate names `localhost` and `127.0.0.1`.

use crate::run;
use std::fs;
use std::path::Path;
use std::process::Command;

/// Whether the openssl command line runs (it has no `--version`, so [`crate::have`]
/// cannot tell).
pub fn have_openssl() -> bool {
    Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn openssl(dir: &Path, args: &[&str]) {
    run(Command::new("openssl").current_dir(dir).args(args));
}

fn key(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            name,
        ],
    );
}

/// A certificate for `key`, signed by `ca-cert.pem`/`ca-key.pem` in `dir`, with the
/// extensions `ext` (openssl's extension file syntax).
fn signed(dir: &Path, key_name: &str, cert: &str, cn: &str, ext: &str, serial: &str) {
    let ext_file = format!("{cert}.ext");
    fs::write(dir.join(&ext_file), ext).unwrap();
    let csr = format!("{cert}.csr");
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            key_name,
            "-subj",
            &format!("/CN={cn}"),
            "-out",
            &csr,
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca-cert.pem",
            "-CAkey",
            "ca-key.pem",
            "-set_serial",
            serial,
            "-days",
            "30",
            "-extfile",
            &ext_file,
            "-out",
            cert,
        ],
    );
    fs::remove_file(dir.join(ext_file)).unwrap();
    fs::remove_file(dir.join(csr)).unwrap();
}

/// Makes a certificate authority of its own (common name `ca_name`), a server's and a
/// client's certificate and key in `dir` (created if missing). The CA's key stays there
/// as `ca-key.pem`.
pub fn make_certificates(dir: &Path, ca_name: &str) {
    fs::create_dir_all(dir).unwrap();
    key(dir, "ca-key.pem");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca-key.pem",
            "-subj",
            &format!("/CN={ca_name}"),
            "-days",
            "30",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-out",
            "ca-cert.pem",
        ],
    );
    key(dir, "server-key.pem");
    signed(
        dir,
        "server-key.pem",
        "server-cert.pem",
        "localhost",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
        "2",
    );
    key(dir, "client-key.pem");
    signed(
        dir,
        "client-key.pem",
        "client-cert.pem",
        "sectorcrypt test client",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=clientAuth\n",
        "3",
    );
}

/// A second client's certificates directory `dir` for the authority of `certs` (made by
/// [`make_certificates`]): ca-cert.pem, and client-key.pem and client-cert.pem with the
/// common name `cn`, as libnbd's `tls-certificates` reads them.
pub fn another_client(certs: &Path, dir: &Path, cn: &str) {
    fs::create_dir_all(dir).unwrap();
    for f in ["ca-cert.pem", "ca-key.pem"] {
        fs::copy(certs.join(f), dir.join(f)).unwrap();
    }
    key(dir, "client-key.pem");
    signed(
        dir,
        "client-key.pem",
        "client-cert.pem",
        cn,
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=clientAuth\n",
        "4",
    );
    fs::remove_file(dir.join("ca-key.pem")).unwrap();
}

/// Returns from the calling test, printing `skipped: ...` ([`skip`](crate::skip): a failure
/// under `SECTORCRYPT_STRICT=1`), unless the openssl command line runs ([`have_openssl`]).
#[macro_export]
macro_rules! require_openssl {
    () => {
        if !$crate::tls::have_openssl() {
            $crate::skip("skipped: the openssl command line is not installed");
            return;
        }
    };
}

/// The `nbds+unix://` URI of the default export on the Unix socket `sock`, with libnbd's
/// certificates directory `certs`.
pub fn nbds_uri(sock: &Path, certs: &Path) -> String {
    format!(
        "nbds+unix:///?socket={}&tls-certificates={}",
        sock.display(),
        certs.display()
    )
}

/// qemu's arguments for the export on the Unix socket `sock` over TLS with the
/// certificates in `certs`: the `--object` (tls-creds-x509, id `tls0`) and the
/// `--image-opts` of the nbd driver using it (a Unix socket has no host name, so
/// `tls-hostname=localhost` says what the server's certificate must name).
pub fn qemu_tls_args(sock: &Path, certs: &Path) -> (String, String) {
    (
        format!(
            "tls-creds-x509,id=tls0,endpoint=client,dir={}",
            certs.display()
        ),
        format!(
            "driver=nbd,server.type=unix,server.path={},tls-creds=tls0,tls-hostname=localhost",
            sock.display()
        ),
    )
}

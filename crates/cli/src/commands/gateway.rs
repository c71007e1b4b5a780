//! `sectorcrypt serve --config FILE` and `serve --export NAME=LOCATOR ...`: many volumes
//! behind one server. What this file does is turn the command line into the gateway's
//! [`Config`] (the file's, or one made of the `--export`s with the command line's key
//! options for each) and say where to listen and with what TLS; the volumes are opened
//! into the server's export table by `sectorcrypt_gateway::table`, and `serve` runs it.

use crate::failure::Failure;
use crate::flags::tls::{TlsArgs, TlsMode};
use crate::flags::ServeArgs;
use sectorcrypt_gateway::config::{Config, Export};
use sectorcrypt_gateway::table::{OpenError, Opened};
use sectorcrypt_nbd::Listen;

/// The gateway's configuration, when `a` asks for one (`--config` or `--export`);
/// `None` for the one volume IMAGE.
pub fn from_args(a: &ServeArgs) -> Result<Option<Config>, Failure> {
    let image_given = !a.open.image.as_os_str().is_empty();
    let gateway = a.config.is_some() || !a.export.is_empty();
    match (image_given, gateway) {
        (true, true) => {
            return Err(Failure::usage(
                "give IMAGE, or --config FILE, or --export NAME=LOCATOR: not IMAGE with the \
                 others",
            ))
        }
        (false, false) => {
            return Err(Failure::usage(
                "give the volume IMAGE to serve, or --config FILE, or --export NAME=LOCATOR",
            ))
        }
        (true, false) => return Ok(None),
        (false, true) => {}
    }
    if a.open.header.file.is_some() {
        return Err(Failure::usage(
            "--header is one volume's: with --config give each export its header = \"FILE\"",
        ));
    }
    if a.open.bitlk_startup_key.is_some() || a.open.integrity || a.open.shared {
        return Err(Failure::usage(
            "--bitlk-startup-key, --integrity and --shared serve one volume (IMAGE)",
        ));
    }
    if let Some(path) = &a.config {
        if a.open.key_file.is_some()
            || !a.open.keyfile_component.is_empty()
            || a.open.no_passphrase
            || a.open.read_only
        {
            return Err(Failure::usage(format!(
                "--config {}: the keys and read_only are each export's, in the file; \
                 --key-file, --keyfile-component, --no-passphrase and --read-only go with \
                 --export",
                path.display()
            )));
        }
        return Config::load(path).map(Some).map_err(Failure::usage);
    }
    let key_file =
        match &a.open.key_file {
            Some(f) if f.as_os_str() == "-" => return Err(Failure::usage(
                "--export reads --key-file once per export: give a file, not - (standard input)",
            )),
            Some(f) => Some(f.clone()),
            None if a.open.no_passphrase => None,
            None => {
                return Err(Failure::usage(
                    "--export: give --key-file FILE (or --no-passphrase): the passphrase is read \
                 from the file for every export, never prompted",
                ))
            }
        };
    let mut exports = Vec::with_capacity(a.export.len());
    for arg in &a.export {
        let mut e = Export::from_arg(arg).map_err(Failure::usage)?;
        e.key_file = key_file.clone();
        e.no_passphrase = a.open.no_passphrase;
        e.keyfile_components = a.open.keyfile_component.clone();
        e.read_only = a.open.read_only;
        exports.push(e);
    }
    let config = Config {
        listen: Vec::new(),
        metrics: None,
        tls: None,
        exports,
    };
    config.check().map_err(Failure::usage)?;
    Ok(Some(config))
}

/// Where the configuration says to listen: `None` for the socket systemd passes.
pub fn listen(c: &Config) -> Result<Option<Listen>, Failure> {
    match &c.listen[..] {
        [] => Ok(None),
        [one] if one.contains('/') => Ok(Some(Listen::Unix(one.into()))),
        [one] => Listen::tcp(one)
            .map(Some)
            .map_err(|e| Failure::usage(format!("listen {one:?}: {e}"))),
        more => Err(Failure::usage(format!(
            "listen has {} addresses: serve listens on one (give one, or use --socket or \
             --listen)",
            more.len()
        ))),
    }
}

/// The TLS options: the configuration's `[tls]`, or the command line's; not both.
pub fn tls_args(c: &Config, cli: &TlsArgs) -> Result<TlsArgs, Failure> {
    let Some(t) = &c.tls else {
        return Ok(cli.clone());
    };
    if cli.tls.is_some() || cli.tls_certificates.is_some() || cli.tls_verify_peer {
        return Err(Failure::usage(
            "TLS is set in the configuration's [tls]: drop --tls, --tls-certificates and \
             --tls-verify-peer",
        ));
    }
    Ok(TlsArgs {
        tls: Some(if t.require {
            TlsMode::Require
        } else {
            TlsMode::On
        }),
        tls_certificates: Some(t.certificates.clone()),
        tls_verify_peer: t.verify_peer,
    })
}

/// An export that could not be opened, as the command's failure (with the exit code of
/// its class: 3 for a wrong passphrase).
pub fn open_failure(e: OpenError) -> Failure {
    let message = format!("{e}; nothing is served (every export must open)");
    match e.class().exit_code() {
        3 => Failure::WrongPassphrase(message),
        1 => Failure::runtime(message),
        _ => Failure::usage(message),
    }
}

/// The line said for an export opened.
pub fn opened_line(o: &Opened) -> String {
    format!(
        "export {:?}: {} unlocked: {} bytes of {}{}",
        o.name,
        o.format,
        o.size,
        o.cipher,
        if o.read_only { ", read-only" } else { "" }
    )
}

//! `sectorcrypt serve --config FILE` and `serve --export NAME=LOCATOR ...`: many volumes
//! behind one server. What this file does is turn the command line into the gateway's
//! [`Config`] (the file's, or one made of the `--export`s with the command line's key
//! options for each) and say where to listen and with what TLS; the volumes are opened
//! into the server's export table by `sectorcrypt_gateway::table`, and `serve` runs it.
//! It also registers a running gateway in the runtime directory `open` uses (an entry of
//! kind `gateway` and its control socket, `sectorcrypt_gateway::control`), which `status`
//! asks for the exports and their clients, and `sectorcrypt gateway reload` to reload.

use crate::commands::open_state as state;
use crate::failure::Failure;
use crate::flags::tls::{TlsArgs, TlsMode};
use crate::flags::{GatewayArgs, GatewayCommand, ServeArgs};
use crate::present::escape::printable;
use sectorcrypt_gateway::config::{Config, Export};
use sectorcrypt_gateway::control::{self, Control, Handler};
use sectorcrypt_gateway::log::Log;
use sectorcrypt_gateway::table::{OpenError, Opened};
use sectorcrypt_nbd::Listen;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        max_connections: None,
        max_connections_per_export: None,
        exports,
    };
    config.check().map_err(Failure::usage)?;
    Ok(Some(config))
}

/// Where the configuration says to listen, each address once: none for the sockets
/// systemd passes.
pub fn listen(c: &Config) -> Result<Vec<Listen>, Failure> {
    let mut all: Vec<Listen> = Vec::with_capacity(c.listen.len());
    for one in &c.listen {
        let l = if one.contains('/') {
            Listen::Unix(one.into())
        } else {
            Listen::tcp(one).map_err(|e| Failure::usage(format!("listen {one:?}: {e}")))?
        };
        if all.contains(&l) {
            return Err(Failure::usage(format!("listen gives {one:?} twice")));
        }
        all.push(l);
    }
    Ok(all)
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

/// A gateway's place in the runtime directory: its entry (`kind: "gateway"`, for
/// `status`) and its control socket, both removed by [`Registered::remove`].
#[derive(Debug)]
pub struct Registered {
    dir: PathBuf,
    name: String,
    control: Control,
}

impl Registered {
    /// The gateway's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops answering and removes the entry and the socket.
    pub fn remove(self) {
        self.control.close();
        state::remove(&self.dir, &self.name);
    }
}

/// Registers a running gateway under `name` (`--name`; `gateway-PID` when `None`) in the
/// runtime directory, answering its control socket with `handler`; `listen` is shown by
/// `status`. Without a usable runtime directory (or with the default name taken), a
/// gateway without `--name` serves all the same: `Ok(None)` after a warning on `log`.
pub fn register(
    name: Option<&str>,
    listen: &[Listen],
    config: Option<&Path>,
    handler: Handler,
    log: &Log,
) -> Result<Option<Registered>, Failure> {
    let chosen = name
        .map(str::to_string)
        .unwrap_or_else(|| format!("gateway-{}", std::process::id()));
    match register_as(&chosen, listen, config, handler) {
        Ok(r) => Ok(Some(r)),
        Err(e) if name.is_some() => Err(e),
        Err(e) => {
            log.warning(format!(
                "{}; `sectorcrypt status` and `gateway reload` will not see this gateway",
                e.message()
            ));
            Ok(None)
        }
    }
}

fn register_as(
    name: &str,
    listen: &[Listen],
    config: Option<&Path>,
    handler: Handler,
) -> Result<Registered, Failure> {
    state::check_name(name)?;
    let dir = state::runtime_dir()?;
    state::create_runtime_dir(&dir)?;
    if !state::reserve(&dir, name)? {
        match state::read(&dir, name)? {
            Some(e) if state::alive(&e) => {
                return Err(Failure::usage(format!(
                    "{name} is taken by process {} (give the gateway another --name)",
                    state::pid(&e)
                )))
            }
            Some(e) => state::clean_stale(&dir, name, &e),
            None => {}
        }
        if !state::reserve(&dir, name)? {
            return Err(Failure::usage(format!(
                "{name} was taken meanwhile (give the gateway another --name)"
            )));
        }
    }
    let socket = state::socket_path(&dir, name);
    let control = match Control::serve(&socket, handler) {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(state::state_path(&dir, name));
            return Err(Failure::runtime(format!(
                "the control socket {}: {e}",
                socket.display()
            )));
        }
    };
    let mut entry = state::owner_fields(name)?;
    let listen: Vec<String> = listen
        .iter()
        .map(|l| match l {
            Listen::Unix(p) => format!("unix:{}", p.display()),
            Listen::Tcp(a) => a.to_string(),
        })
        .collect();
    let rest = json!({
        "ready": true,
        "kind": "gateway",
        "listen": listen.first(),
        "listen_all": listen,
        "config": config.map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())),
        "control": socket,
    });
    if let Value::Object(rest) = rest {
        entry.extend(rest);
    }
    if let Err(e) = state::publish(&dir, name, &Value::Object(entry)) {
        control.close();
        state::remove(&dir, name);
        return Err(e);
    }
    Ok(Registered {
        dir,
        name: name.to_string(),
        control,
    })
}

/// How long `status` waits for a gateway's answer.
pub const STATUS_WAIT: Duration = Duration::from_secs(5);

/// How long `gateway reload` waits (opening new exports derives their keys).
const RELOAD_WAIT: Duration = Duration::from_secs(600);

/// What a gateway's control socket says of it (`status`), added to its entry as
/// `exports`; `error` instead when it does not answer.
pub fn with_exports(mut entry: Value) -> Value {
    let answer = entry["control"]
        .as_str()
        .map(|c| control::ask(Path::new(c), "status", STATUS_WAIT));
    match answer {
        Some(Ok(a)) if a["exports"].is_array() => entry["exports"] = a["exports"].clone(),
        Some(Ok(a)) => entry["error"] = format!("unexpected answer: {a}").into(),
        Some(Err(e)) => entry["error"] = format!("not answering: {e}").into(),
        None => entry["error"] = "no control socket in its entry".into(),
    }
    entry
}

/// `sectorcrypt gateway reload [NAME]`.
pub fn command(a: GatewayArgs) -> Result<(), Failure> {
    let GatewayCommand::Reload { name } = a.command;
    let entry = find(name.as_deref())?;
    let control = entry["control"].as_str().unwrap_or_default();
    let answer = control::ask(Path::new(control), "reload", RELOAD_WAIT).map_err(|e| {
        Failure::runtime(format!(
            "gateway {}: {e}",
            entry["name"].as_str().unwrap_or("?")
        ))
    })?;
    let message = printable(answer["message"].as_str().unwrap_or("(no message)"));
    if answer["ok"] == Value::Bool(true) {
        println!("{message}");
        Ok(())
    } else if let Some(e) = answer["error"].as_str() {
        Err(Failure::runtime(printable(e)))
    } else {
        Err(Failure::runtime(message))
    }
}

/// The running gateway named `name`, or the only one.
fn find(name: Option<&str>) -> Result<Value, Failure> {
    let dir = state::runtime_dir()?;
    if let Some(n) = name {
        state::check_name(n)?;
    }
    let names = match (name, state::existing_runtime_dir(&dir)?) {
        (_, false) => Vec::new(),
        (Some(n), true) => vec![n.to_string()],
        (None, true) => state::names(&dir),
    };
    let mut found = Vec::new();
    for n in names {
        let Ok(Some(e)) = state::check_name(&n).and_then(|()| state::read(&dir, &n)) else {
            continue;
        };
        if e["kind"] == "gateway" && e["ready"] == Value::Bool(true) && state::alive(&e) {
            found.push(e);
        }
    }
    match (found.len(), name) {
        (1, _) => Ok(found.remove(0)),
        (0, Some(n)) => Err(Failure::usage(format!("no gateway runs under {n}"))),
        (0, None) => Err(Failure::usage(
            "no gateway runs (serve --config FILE starts one)",
        )),
        (_, _) => {
            let names: Vec<&str> = found.iter().filter_map(|e| e["name"].as_str()).collect();
            Err(Failure::usage(format!(
                "{} gateways run ({}): name one",
                found.len(),
                names.join(", ")
            )))
        }
    }
}

//! `sectorcrypt geli VERB ...`: geli(8)'s command lines, with its own flag letters, as a
//! FreeBSD user types them (`lib/geom/eli/geom_eli.c`, `class_commands`). Each verb is
//! translated into the arguments of the command that does the same thing here and runs
//! that command: init = `format --type geli`, attach = `serve`, onetime = `serve
//! --onetime`, setkey = `change-key` (or `add-key -S N` with `-n N`), kill = `erase`,
//! backup/restore = `header backup/restore`, resize = `resize`, dump = `dump`. delkey
//! removes master-key slots without a passphrase, as geli does. Passphrase files (`-j`,
//! `-J`) count up to their first newline, as every GELI passphrase does here
//! (`geli::keys`).

use crate::args::{
    AddKeyArgs, DumpArgs, EraseArgs, FormatArgs, HeaderArg, HeaderCommand, KeyArgs, LuksType,
    OpenArgs, PbkdfArgs, ResizeArgs, ServeArgs, TestKeyArgs,
};
use crate::args_geli::{
    DelkeyArgs, GeliArgs, InitArgs, Listen, RestoreArgs, SetkeyArgs, Verb, VersionArgs,
};
use crate::failure::Failure;
use crate::image::{self, Access};
use crate::{cmd_geli, cmd_serve, cmd_volume};
use sectorcrypt_volume::geli::{self, resize};
use sectorcrypt_volume::lock::Mode;
use std::path::PathBuf;

fn key(passfile: Option<PathBuf>, keyfiles: Vec<PathBuf>, no_pass: bool) -> KeyArgs {
    KeyArgs {
        key_file: passfile,
        keyfile_component: keyfiles,
        no_passphrase: no_pass,
        key_slot: None,
        batch: true,
    }
}

fn pbkdf(iterations: Option<u32>) -> PbkdfArgs {
    PbkdfArgs {
        pbkdf: None,
        hash: None,
        iter_time: 2000,
        pbkdf_memory: None,
        pbkdf_parallel: None,
        pbkdf_force_iterations: iterations,
    }
}

fn serve(open: OpenArgs, listen: Listen) -> Result<(), Failure> {
    cmd_serve::run(ServeArgs {
        open,
        socket: listen.socket,
        listen: listen.listen,
        export_name: String::new(),
        allow_discards: false,
        socket_mode: None,
        timeout: 30,
        idle_timeout: 0,
    })
}

/// Runs one geli verb.
pub fn run(a: GeliArgs) -> Result<(), Failure> {
    match a.verb {
        Verb::Init(a) => init(a),
        Verb::Attach(a) => {
            let key = key(a.passfile, a.keyfile, a.no_passphrase);
            if a.dryrun {
                return cmd_volume::test_key(TestKeyArgs {
                    image: a.prov,
                    header: HeaderArg::default(),
                    key,
                });
            }
            let open = OpenArgs {
                image: a.prov,
                header: HeaderArg::default(),
                key_file: key.key_file,
                keyfile_component: key.keyfile_component,
                no_passphrase: key.no_passphrase,
                onetime: false,
                read_only: a.readonly,
                threads: None,
            };
            serve(open, a.listen)
        }
        Verb::Onetime(a) => {
            let open = OpenArgs {
                image: a.prov,
                header: HeaderArg::default(),
                key_file: None,
                keyfile_component: Vec::new(),
                no_passphrase: false,
                onetime: true,
                read_only: false,
                threads: None,
            };
            serve(open, a.listen)
        }
        Verb::Setkey(a) => setkey(a),
        Verb::Delkey(a) => delkey(a),
        Verb::Kill(p) => cmd_volume::erase(EraseArgs {
            image: p.prov,
            header: HeaderArg::default(),
            batch: true,
        }),
        Verb::Backup(a) => cmd_volume::header(HeaderCommand::Backup {
            image: a.prov,
            file: a.file,
            header: HeaderArg::default(),
        }),
        Verb::Restore(a) if a.force => restore_forced(a),
        Verb::Restore(a) => cmd_volume::header(HeaderCommand::Restore {
            image: a.prov,
            file: a.file,
            batch: true,
            header: HeaderArg::default(),
        }),
        Verb::Resize(a) => cmd_geli::resize(ResizeArgs {
            image: a.prov,
            old_size: a.oldsize,
        }),
        Verb::Dump(p) => cmd_volume::dump(DumpArgs {
            image: p.prov,
            header: HeaderArg::default(),
            json: false,
        }),
        Verb::Version(a) => version(a),
    }
}

fn init(a: InitArgs) -> Result<(), Failure> {
    if let Some(aalgo) = a.aalgo {
        return Err(Failure::usage(format!(
            "geli init -a {aalgo}: authenticated providers are not supported yet"
        )));
    }
    if a.no_passphrase && (a.passfile.is_some() || a.iterations.is_some()) {
        return Err(Failure::usage(
            "options -P and -J (or -i) are mutually exclusive",
        ));
    }
    let version = a.version.unwrap_or(geli::metadata::VERSION);
    let cipher = match a.ealgo {
        Some(e) => e,
        // geli's default before version 5, which has no AES-XTS.
        None if version < 5 => "aes-cbc".into(),
        None => "aes-xts".into(),
    };
    let prov = a.prov.clone();
    cmd_volume::format(FormatArgs {
        image: a.prov,
        header: HeaderArg::default(),
        size: None,
        luks_type: LuksType::Geli,
        cipher,
        key_size: a.keylen.filter(|&n| n != 0),
        sector_size: a.sectorsize.filter(|&n| n != 0),
        label: None,
        rbd_object_size: None,
        geli_version: version,
        geli_boot: a.boot,
        geli_boot_loader: a.geliboot,
        geli_display_pass: a.displaypass,
        geli_no_trim: a.notrim,
        geli_no_autoresize: a.noautoresize,
        pbkdf: pbkdf(a.iterations),
        key: key(a.passfile, a.keyfile, a.no_passphrase),
    })?;
    match a.backup {
        Some(file) if file.as_os_str() != "none" => {
            cmd_volume::header(HeaderCommand::Backup {
                image: prov.clone(),
                file: file.clone(),
                header: HeaderArg::default(),
            })?;
            println!(
                "It can be restored with: sectorcrypt geli restore {} {}",
                file.display(),
                prov.display()
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

fn setkey(a: SetkeyArgs) -> Result<(), Failure> {
    if !a.newkeyfile.is_empty() && a.newkeyfile != a.keyfile {
        return Err(Failure::usage(
            "geli setkey -K: new keyfiles other than the current ones (-k) are not supported \
             yet",
        ));
    }
    let mut key = key(a.passfile, a.keyfile, a.no_passphrase);
    key.key_slot = a.keyno;
    let args = AddKeyArgs {
        image: a.prov,
        header: HeaderArg::default(),
        new_key_file: a.newpassfile,
        pbkdf: pbkdf(a.iterations),
        key,
    };
    // -n N writes slot N whichever slot the current key opens: add-key's -S.
    match a.keyno {
        Some(_) => cmd_volume::add_key(args),
        None => cmd_volume::change_key(args),
    }
}

/// geli delkey: no passphrase; the last slot in use only with -f; -a destroys both.
fn delkey(a: DelkeyArgs) -> Result<(), Failure> {
    let mut img = image::open(&a.prov, &HeaderArg::default(), Access::Keyslots)?;
    if img.header.name() != geli::NAME {
        return Err(Failure::usage(format!(
            "{} is not a GELI provider",
            a.prov.display()
        )));
    }
    let removed = img.update(|h, store| {
        let active = h.active_keyslots()?;
        let slots = match a.keyno {
            _ if a.all => active.clone(),
            Some(n) if !active.contains(&n) => {
                return Err(Failure::usage(format!("master key {n} is not set")))
            }
            Some(n) => vec![n],
            None => unreachable!("clap requires -n without -a"),
        };
        if !a.force && !a.all && active.iter().all(|s| slots.contains(s)) {
            return Err(Failure::usage(
                "this is the last master key: use -f to remove it",
            ));
        }
        for &n in &slots {
            h.remove_key(store, n)?;
        }
        Ok(slots)
    })?;
    for n in removed {
        println!("master key {n} destroyed");
    }
    Ok(())
}

/// geli restore -f: the backup onto a provider of another size, its size written in.
fn restore_forced(a: RestoreArgs) -> Result<(), Failure> {
    let backup = image::open_store(&a.file, false)?;
    let store = image::open_store(&a.prov, true)?;
    let _claim = image::claim(&store, &a.prov, Mode::Exclusive)?;
    let _lock = image::lock_header(&store, &a.prov, Mode::Exclusive)?;
    let g = resize::restore_resized(&store, &backup)?;
    println!(
        "metadata of {} restored from {} (provider size {})",
        a.prov.display(),
        a.file.display(),
        g.metadata().provsize
    );
    Ok(())
}

fn version(a: VersionArgs) -> Result<(), Failure> {
    if a.prov.is_empty() {
        println!(
            "sectorcrypt {}: GELI metadata versions 0 to {v} read, 1 to {v} written \
             (default {v})",
            env!("CARGO_PKG_VERSION"),
            v = geli::metadata::VERSION
        );
        return Ok(());
    }
    for p in &a.prov {
        let h = image::open(p, &HeaderArg::default(), Access::Inspect)?;
        let g = h
            .header
            .downcast_ref::<geli::Geli>()
            .ok_or_else(|| Failure::usage(format!("{} is not a GELI provider", p.display())))?;
        println!("{}: {}", p.display(), g.metadata().version);
    }
    Ok(())
}

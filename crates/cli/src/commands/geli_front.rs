//! `sectorcrypt geli VERB ...`: geli(8)'s command lines, with its own flag letters, as a
//! FreeBSD user types them (`lib/geom/eli/geom_eli.c`, `class_commands`). Each verb is
//! translated into the arguments of the command that does the same thing here and runs
//! that command: init (label) = `format --type geli` then the metadata backup geli writes,
//! attach = `serve` (or `test-key` with -C), onetime = `serve --onetime` with geli's
//! algorithm, key length and sector size, kill = `erase`, backup/restore = `header
//! backup/restore`, resize = `resize`, dump = `dump`. setkey, delkey, configure and clear
//! change the metadata through the GELI header itself, under the exclusive header lock, as
//! geli does (no passphrase for delkey, configure and clear; setkey's new key may have
//! other keyfiles than the current one). The kernel's verbs say what to do instead. `-v`
//! prints the equivalent sectorcrypt command first. Passphrase files (`-j`, `-J`) count up
//! to their first newline, as every GELI passphrase does here (`geli::keys`).

use crate::commands::{geli as cmd_geli, serve as cmd_serve, volume as cmd_volume};
use crate::failure::Failure;
use crate::flags::geli::{
    AttachArgs, ConfigureArgs, DelkeyArgs, GeliArgs, InitArgs, Listen, OnetimeArgs, Provs,
    RestoreArgs, SetkeyArgs, Verb, VersionArgs, BACKUP_DIR, BACKUP_DIR_VAR,
};
use crate::flags::tcrypt::TcryptArgs;
use crate::flags::{
    DumpArgs, EraseArgs, FormatArgs, HeaderArg, HeaderCommand, KeyArgs, LuksType, OpenArgs,
    PbkdfArgs, ResizeArgs, ServeArgs, TestKeyArgs,
};
use crate::passphrase;
use crate::volumes::image::{self, Access, Keys as _};
use sectorcrypt_volume::format::Format as _;
use sectorcrypt_volume::geli::metadata::flags;
use sectorcrypt_volume::geli::onetime::OnetimeOptions;
use sectorcrypt_volume::geli::{self, resize, Geli, NewUserKey};
use sectorcrypt_volume::hash::HashAlg;
use sectorcrypt_volume::kdf::{KdfKind, KdfOptions};
use sectorcrypt_volume::lock::Mode;
use sectorcrypt_volume::{Header, Store as _};
use std::path::{Path, PathBuf};

fn key(passfile: Option<PathBuf>, keyfiles: Vec<PathBuf>, no_pass: bool) -> KeyArgs {
    KeyArgs {
        key_file: passfile,
        keyfile_component: keyfiles,
        no_passphrase: no_pass,
        bitlk_startup_key: None,
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

/// Serves `open` as geli attaches a provider: TRIM passed down as discards unless the
/// provider has the NODELETE flag (`geli init -T`, `onetime -T`).
fn serve(open: OpenArgs, listen: Listen, exit_after_last: bool, flags: u32) -> Result<(), Failure> {
    cmd_serve::run(ServeArgs {
        open,
        socket: listen.socket,
        listen: listen.listen,
        export_name: String::new(),
        allow_discards: flags & flags::NODELETE == 0,
        socket_mode: None,
        timeout: 30,
        idle_timeout: 0,
        exit_after_last,
        reencrypt: false,
        resilience: None,
        hotzone_size: None,
        tls: listen.tls,
        metrics: None,
        config: None,
        export: Vec::new(),
        name: None,
        log_format: "text".into(),
        tcrypt: TcryptArgs::default(),
    })
}

/// geli's `-a`: the authentication algorithm (`HMAC/SHA256`, ...), or, as geli still
/// accepts with a warning, an encryption algorithm given where `-e` belongs. Returns
/// (integrity, encryption algorithm given by `-a`).
fn authentication(aalgo: Option<&str>) -> (Option<String>, Option<String>) {
    match aalgo {
        Some(n)
            if sectorcrypt_image::create::geli_aalgo(n).is_err()
                && !n.to_ascii_lowercase().starts_with("hmac") =>
        {
            eprintln!(
                "warning: The -e option, not the -a option is now used to specify encryption \
                 algorithm to use."
            );
            (None, Some(n.to_string()))
        }
        a => (a.map(str::to_string), None),
    }
}

/// With `-v`, prints the sectorcrypt command a verb is, before it runs.
fn shown(verbose: bool, command: impl FnOnce() -> String) {
    if verbose {
        println!("sectorcrypt {}", command());
    }
}

/// A path as shown in a command line.
fn arg(p: &Path) -> String {
    crate::present::locator::redacted(p)
}

/// ` --key-file F --keyfile-component K ... [--no-passphrase]`, as `key` says.
fn key_flags(key: &KeyArgs) -> String {
    let mut s = String::new();
    if let Some(f) = &key.key_file {
        s += &format!(" --key-file {}", arg(f));
    }
    for k in &key.keyfile_component {
        s += &format!(" --keyfile-component {}", arg(k));
    }
    if key.no_passphrase {
        s += " --no-passphrase";
    }
    if let Some(n) = key.key_slot {
        s += &format!(" --key-slot {n}");
    }
    s
}

/// Runs one geli verb.
pub fn run(a: GeliArgs) -> Result<(), Failure> {
    let v = a.verbose;
    match a.verb {
        Verb::Init(a) => init(a, v),
        Verb::Attach(a) => attach(a, v),
        Verb::Onetime(a) => onetime(a, v),
        Verb::Configure(a) => configure(a, v),
        Verb::Setkey(a) => setkey(a, v),
        Verb::Delkey(a) => delkey(a),
        Verb::Kill(p) => {
            shown(v, || format!("erase {} --batch", arg(&p.prov)));
            cmd_volume::erase(EraseArgs {
                image: p.prov,
                header: HeaderArg::default(),
                batch: true,
            })
        }
        Verb::Backup(a) => {
            shown(v, || {
                format!("header backup {} {}", arg(&a.prov), arg(&a.file))
            });
            cmd_volume::header(HeaderCommand::Backup {
                image: a.prov,
                file: a.file,
                header: HeaderArg::default(),
            })
        }
        Verb::Restore(a) if a.force => restore_forced(a),
        Verb::Restore(a) => {
            shown(v, || {
                format!("header restore {} {} --batch", arg(&a.prov), arg(&a.file))
            });
            cmd_volume::header(HeaderCommand::Restore {
                image: a.prov,
                file: a.file,
                batch: true,
                header: HeaderArg::default(),
            })
        }
        Verb::Resize(a) => {
            shown(v, || {
                format!("resize --old-size {} {}", a.oldsize, arg(&a.prov))
            });
            cmd_geli::resize(ResizeArgs {
                image: a.prov,
                old_size: a.oldsize,
            })
        }
        Verb::Clear(a) => clear(a, v),
        Verb::Dump(p) => {
            shown(v, || format!("dump {}", arg(&p.prov)));
            cmd_volume::dump(DumpArgs {
                image: p.prov,
                header: HeaderArg::default(),
                json: None,
                tcrypt: TcryptArgs::default(),
                key: KeyArgs {
                    key_file: None,
                    keyfile_component: Vec::new(),
                    no_passphrase: false,
                    bitlk_startup_key: None,
                    key_slot: None,
                    batch: false,
                },
            })
        }
        Verb::Version(a) => version(a),
        Verb::Detach(_) => kernel_only("detach"),
        Verb::Stop(_) => kernel_only("stop"),
        Verb::Suspend(_) => kernel_only("suspend"),
        Verb::Resume(_) => kernel_only("resume"),
        Verb::List(_) => kernel_only("list"),
        Verb::Status(_) => kernel_only("status"),
        Verb::Load(_) => kernel_only("load"),
        Verb::Unload(_) => kernel_only("unload"),
    }
}

/// The kernel's verbs: what to do instead (exit 2).
fn kernel_only(verb: &str) -> Result<(), Failure> {
    let instead = match verb {
        "detach" | "stop" => {
            "a provider is attached for as long as `sectorcrypt geli attach` (sectorcrypt \
             serve) serves it: stop the serving process (SIGTERM, SIGINT or Ctrl-C) once its \
             clients have disconnected, or attach with -d to stop after the last one"
        }
        "suspend" => {
            "stop the serving process (its keys leave memory with it), and attach again to \
             resume"
        }
        "resume" => {
            "nothing is suspended here: attach the provider again (sectorcrypt geli attach)"
        }
        "list" | "status" => {
            "the attached providers are the running `sectorcrypt geli attach` and \
             `sectorcrypt serve` processes (ps -f -C sectorcrypt); `sectorcrypt geli dump \
             PROV` shows a provider's metadata"
        }
        _ => "there is no kernel module to load or unload: sectorcrypt runs in userspace",
    };
    Err(Failure::usage(format!(
        "geli {verb} is a kernel verb and there is no GELI kernel class here: {instead}"
    )))
}

/// The flags of the GELI metadata of `prov`; anything but a GELI provider is refused.
fn provider_flags(prov: &Path) -> Result<u32, Failure> {
    let img = image::open(prov, &HeaderArg::default(), Access::Inspect)?;
    match img.header.downcast_ref::<geli::Geli>() {
        Some(g) => Ok(g.metadata().flags),
        None => Err(Failure::usage(format!(
            "{} is not a GELI provider",
            crate::present::locator::redacted(prov)
        ))),
    }
}

/// geli attach: serve (or, with -C, test-key), trying only slot -n when given.
fn attach(a: AttachArgs, v: bool) -> Result<(), Failure> {
    if let Some(n) = a.keyno.filter(|&n| n >= geli::metadata::MAX_MKEYS) {
        return Err(Failure::usage(format!(
            "invalid keyno {n}: GELI has master-key slots 0 and 1"
        )));
    }
    if a.no_passphrase && a.passfile.is_some() {
        return Err(Failure::usage("options -j and -p are mutually exclusive"));
    }
    let mut key = key(a.passfile, a.keyfile, a.no_passphrase);
    key.key_slot = a.keyno;
    if a.integrity && provider_flags(&a.prov)? & flags::AUTH == 0 {
        return Err(Failure::usage(format!(
            "{} has no data authentication (its AUTH flag is clear), and --integrity asks \
             for it: the provider was made without -a, or the flag was cleared by whoever \
             could write its metadata (the flag is not itself authenticated)",
            crate::present::locator::redacted(&a.prov)
        )));
    }
    if a.dryrun {
        shown(v, || {
            format!("test-key {}{}", arg(&a.prov), key_flags(&key))
        });
        return cmd_volume::test_key(TestKeyArgs {
            image: a.prov,
            header: HeaderArg::default(),
            json: false,
            tcrypt: TcryptArgs::default(),
            key,
        });
    }
    let md_flags = provider_flags(&a.prov)?;
    shown(v, || {
        format!(
            "serve {}{}{}{}",
            arg(&a.prov),
            key_flags(&key),
            if a.readonly { " --read-only" } else { "" },
            match (&a.listen.socket, &a.listen.listen) {
                (Some(s), _) => format!(" --socket {}", arg(s)),
                (None, Some(l)) => format!(" --listen {l}"),
                _ => String::new(),
            }
        )
    });
    let open = OpenArgs {
        image: a.prov,
        header: HeaderArg::default(),
        key_file: key.key_file,
        keyfile_component: key.keyfile_component,
        no_passphrase: key.no_passphrase,
        bitlk_startup_key: None,
        onetime: false,
        read_only: a.readonly,
        shared: false,
        integrity: a.integrity,
        threads: None,
        key_slot: a.keyno,
        onetime_geli: None,
    };
    serve(open, a.listen, a.detach, md_flags)
}

/// geli onetime: a random master key, geli's defaults (AES-XTS, 128 bits, 512 bytes).
fn onetime(a: OnetimeArgs, v: bool) -> Result<(), Failure> {
    let (integrity, a_ealgo) = authentication(a.aalgo.as_deref());
    let mut opts = OnetimeOptions {
        ealgo: sectorcrypt_image::create::geli_ealgo(
            a_ealgo.or(a.ealgo).as_deref().unwrap_or("aes-xts"),
        )?,
        aalgo: integrity
            .as_deref()
            .map(sectorcrypt_image::create::geli_aalgo)
            .transpose()?
            .unwrap_or(0),
        keylen: a.keylen.unwrap_or(0),
        sectorsize: a.sectorsize.unwrap_or(0),
        ..OnetimeOptions::default()
    };
    for (set, bit) in [(a.notrim, flags::NODELETE), (a.detach, flags::RW_DETACH)] {
        if set {
            opts.flags |= bit;
        }
    }
    if a.noautoresize {
        opts.flags &= !flags::AUTORESIZE;
    }
    shown(v, || format!("serve {} --onetime", arg(&a.prov)));
    let flags = opts.flags;
    let open = OpenArgs {
        image: a.prov,
        header: HeaderArg::default(),
        key_file: None,
        keyfile_component: Vec::new(),
        no_passphrase: false,
        bitlk_startup_key: None,
        onetime: true,
        read_only: false,
        shared: false,
        integrity: false,
        threads: None,
        key_slot: None,
        onetime_geli: Some(opts),
    };
    serve(open, a.listen, a.detach, flags)
}

fn init(a: InitArgs, v: bool) -> Result<(), Failure> {
    let (integrity, a_ealgo) = authentication(a.aalgo.as_deref());
    if a.no_passphrase && (a.passfile.is_some() || a.iterations.is_some()) {
        return Err(Failure::usage(
            "options -P and -J (or -i) are mutually exclusive",
        ));
    }
    let version = a.version.unwrap_or(geli::metadata::VERSION);
    let cipher = match a_ealgo.or(a.ealgo) {
        Some(e) => e,
        // geli's default before version 5, which has no AES-XTS.
        None if version < 5 => "aes-cbc".into(),
        None => "aes-xts".into(),
    };
    let prov = a.prov.clone();
    let args = FormatArgs {
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
        integrity,
        no_wipe: false,
        ask_only_over_a_volume: true,
        veracrypt: Default::default(),
        pbkdf: pbkdf(a.iterations),
        key: KeyArgs {
            batch: a.batch,
            ..key(a.passfile, a.keyfile, a.no_passphrase)
        },
    };
    shown(v, || format_command(&args));
    cmd_volume::format(args)?;
    let file = match a.backup {
        Some(f) if f.as_os_str() == "none" => return Ok(()),
        Some(f) => f,
        None => default_backup(&prov),
    };
    shown(v, || format!("header backup {} {}", arg(&prov), arg(&file)));
    write_backup(&prov, &file).map_err(|e| {
        Failure::runtime(format!(
            "{} is initialized, but its metadata backup {} could not be written: {}",
            crate::present::locator::redacted(&prov),
            file.display(),
            e.message()
        ))
    })?;
    println!(
        "\nMetadata backup for provider {p} can be found in {f}\nand can be restored with \
         the following command:\n\n\tsectorcrypt geli restore {f} {p}\n",
        p = crate::present::locator::redacted(&prov),
        f = file.display()
    );
    Ok(())
}

/// `format --type geli ...` as a command line, for `-v`.
fn format_command(a: &FormatArgs) -> String {
    let mut s = format!("format {} --type geli --cipher {}", arg(&a.image), a.cipher);
    if let Some(k) = a.key_size {
        s += &format!(" --key-size {k}");
    }
    if let Some(n) = a.sector_size {
        s += &format!(" --sector-size {n}");
    }
    if let Some(i) = a.pbkdf.pbkdf_force_iterations {
        s += &format!(" --pbkdf-force-iterations {i}");
    }
    if let Some(alg) = &a.integrity {
        s += &format!(" --integrity {alg}");
    }
    if a.geli_version != geli::metadata::VERSION {
        s += &format!(" --geli-version {}", a.geli_version);
    }
    for (set, flag) in [
        (a.geli_boot, " --geli-boot"),
        (a.geli_boot_loader, " --geli-boot-loader"),
        (a.geli_display_pass, " --geli-display-pass"),
        (a.geli_no_trim, " --geli-no-trim"),
        (a.geli_no_autoresize, " --geli-no-autoresize"),
    ] {
        if set {
            s += flag;
        }
    }
    s + &key_flags(&a.key) + " --batch"
}

/// Where geli init puts its backup by default (`eli_init`): the backup folder, then the
/// provider's name without a leading /dev/, each '/' an '_', then ".eli". A remote
/// provider's name is its locator without secrets (no `key=` in a file name).
fn default_backup(prov: &Path) -> PathBuf {
    let name = crate::present::locator::redacted(prov);
    let name = name
        .strip_prefix("/dev/")
        .unwrap_or(&name)
        .replace('/', "_");
    let dir =
        std::env::var_os(BACKUP_DIR_VAR).map_or_else(|| PathBuf::from(BACKUP_DIR), PathBuf::from);
    dir.join(format!("{name}.eli"))
}

/// geli's `eli_backup_create`: the provider's metadata sector to `file`, created (or
/// truncated) with mode 0600 and synced; removed again if it cannot be written whole.
fn write_backup(prov: &Path, file: &Path) -> Result<(), Failure> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let img = image::open(prov, &HeaderArg::default(), Access::Inspect)?;
    let _lock = img.files.lock(Mode::Shared)?;
    let size = img.files.store.size().map_err(|e| {
        Failure::runtime(format!("{}: {e}", crate::present::locator::redacted(prov)))
    })?;
    let mut sector = zeroize::Zeroizing::new(Vec::new());
    for piece in img.header.format().backup_pieces(size) {
        let mut bytes = vec![0u8; piece.len as usize];
        img.files
            .store
            .read_at(&mut bytes, piece.image)
            .map_err(|e| {
                Failure::runtime(format!(
                    "reading {}: {e}",
                    crate::present::locator::redacted(prov)
                ))
            })?;
        sector.extend_from_slice(&bytes);
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)
        .map_err(Failure::runtime)?;
    if let Err(e) = out.write_all(&sector).and_then(|()| out.sync_all()) {
        drop(out);
        let _ = std::fs::remove_file(file);
        return Err(Failure::runtime(e));
    }
    Ok(())
}

/// geli configure: pairs of opposite flags, at least one given; each provider's flags
/// word rewritten when it changes.
fn configure(a: ConfigureArgs, v: bool) -> Result<(), Failure> {
    let pairs = [
        (a.boot, a.noboot, flags::BOOT, 'b', 'B'),
        (
            a.displaypass,
            a.nodisplaypass,
            flags::GELIDISPLAYPASS,
            'd',
            'D',
        ),
        (a.geliboot, a.nogeliboot, flags::GELIBOOT, 'g', 'G'),
        (a.autoresize, a.noautoresize, flags::AUTORESIZE, 'r', 'R'),
        // -t passes TRIM through: NODELETE cleared.
        (a.notrim, a.trim, flags::NODELETE, 'T', 't'),
    ];
    let (mut set, mut unset) = (0u32, 0u32);
    for (on, off, bit, l_on, l_off) in pairs {
        match (on, off) {
            (true, true) => {
                return Err(Failure::usage(format!(
                    "options -{l_on} and -{l_off} are mutually exclusive"
                )))
            }
            (true, false) => set |= bit,
            (false, true) => unset |= bit,
            (false, false) => {}
        }
    }
    if set | unset == 0 {
        return Err(Failure::usage(
            "no option given (one of -b -B -d -D -g -G -r -R -t -T)",
        ));
    }
    for prov in &a.prov {
        shown(v, || format!("dump {}", arg(prov)));
        let mut img = image::open(prov, &HeaderArg::default(), Access::Keyslots)?;
        let (changed, now) = img.change(|h, store| {
            let g = geli_header(h, prov)?;
            let flags = (g.metadata().flags | set) & !unset;
            Ok((g.set_flags(store, flags)?, g.metadata().flag_names()))
        })?;
        let what = if changed { "now" } else { "unchanged:" };
        println!(
            "flags of {} {what} {now}",
            crate::present::locator::redacted(prov)
        );
    }
    Ok(())
}

/// The GELI header of the provider `prov`, or a usage failure naming it.
fn geli_header<'a>(h: &'a mut Header, prov: &Path) -> Result<&'a mut Geli, Failure> {
    h.downcast_mut::<Geli>().ok_or_else(|| {
        Failure::usage(format!(
            "{} is not a GELI provider",
            crate::present::locator::redacted(prov)
        ))
    })
}

/// geli clear: each provider's metadata sector zeroed once, no passphrase asked.
fn clear(a: Provs, v: bool) -> Result<(), Failure> {
    for prov in &a.prov {
        shown(v, || {
            format!(
                "erase {} --batch   (which overwrites it 5 times)",
                arg(prov)
            )
        });
        let store = image::open_store(prov, true)?;
        let _claim = image::claim(&store, prov, Mode::Exclusive)?;
        let _lock = image::lock_header(&store, prov, Mode::Exclusive)?;
        let at = geli::clear(&store)?;
        println!(
            "metadata cleared on {} (the sector at {at} zeroed)",
            crate::present::locator::redacted(prov)
        );
    }
    Ok(())
}

/// geli setkey: the current key (-j, -k, -p) opens any slot; the new one (-J, -K, -P) is
/// sealed into slot -n, or into the slot that opened (`eli_setkey_detached`).
fn setkey(a: SetkeyArgs, v: bool) -> Result<(), Failure> {
    if a.no_passphrase && a.passfile.is_some() {
        return Err(Failure::usage("options -j and -p are mutually exclusive"));
    }
    if a.no_new_passphrase && a.newpassfile.is_some() {
        return Err(Failure::usage("options -J and -P are mutually exclusive"));
    }
    if a.no_new_passphrase && a.newkeyfile.is_empty() {
        return Err(Failure::usage(
            "no key components given for the new key (-P without -K)",
        ));
    }
    if let Some(n) = a.keyno.filter(|&n| n >= geli::metadata::MAX_MKEYS) {
        return Err(Failure::usage(format!(
            "invalid keyno {n}: GELI has master-key slots 0 and 1"
        )));
    }
    passphrase::check_one_stdin(a.passfile.as_deref(), a.newpassfile.as_deref())?;
    let current = key(a.passfile.clone(), a.keyfile.clone(), a.no_passphrase);
    shown(v, || {
        let verb = if a.keyno.is_some() {
            "add-key"
        } else {
            "change-key"
        };
        let mut k = current.clone();
        k.key_slot = a.keyno;
        let new = a
            .newpassfile
            .as_deref()
            .map_or(String::new(), |f| format!(" {}", arg(f)));
        format!("{verb} {}{new}{}", arg(&a.prov), key_flags(&k))
    });
    let mut img = image::open(&a.prov, &HeaderArg::default(), Access::Keyslots)?;
    let files = passphrase::keyfiles(&current)?;
    let new_files = passphrase::keyfiles(&key(None, a.newkeyfile.clone(), false))?;
    let old = img.passphrase(&current)?;
    // The current key, checked before the new passphrase is asked for.
    let opened = |h: &mut Header, store: &dyn sectorcrypt_volume::Store| {
        let g = geli_header(h, &a.prov)?;
        if !files.is_empty() {
            g.set_keyfiles(files.clone())?;
        }
        g.set_passphrase_component(!a.no_passphrase)?;
        Ok::<_, Failure>(g.unlock_key(store, &old, None)?)
    };
    img.change(|h, store| opened(h, store).map(drop))?;
    let new = if a.no_new_passphrase {
        None
    } else {
        Some(passphrase::new(a.newpassfile.as_deref())?)
    };
    let kdf = KdfOptions {
        kind: KdfKind::Pbkdf2,
        hash: HashAlg::Sha512,
        force_iterations: a.iterations,
        ..KdfOptions::default()
    };
    let slot = img.change(|h, store| {
        let (mkey, found) = opened(h, store)?;
        let n = a.keyno.unwrap_or(found);
        let keyfiles: Vec<&[u8]> = new_files.iter().map(|k| &k[..]).collect();
        let user = NewUserKey {
            keyfiles: &keyfiles,
            passphrase: new.as_deref(),
        };
        Ok(geli_header(h, &a.prov)?.setkey(store, n, &mkey, &kdf, &user)?)
    })?;
    println!(
        "master key {slot} of {} set\nNote, that the master key encrypted with old keys \
         and/or passphrase may still exist in a metadata backup file.",
        crate::present::locator::redacted(&a.prov)
    );
    Ok(())
}

/// geli delkey: no passphrase; the last slot in use only with -f; -a destroys both.
fn delkey(a: DelkeyArgs) -> Result<(), Failure> {
    let mut img = image::open(&a.prov, &HeaderArg::default(), Access::Keyslots)?;
    if img.header.name() != geli::NAME {
        return Err(Failure::usage(format!(
            "{} is not a GELI provider",
            crate::present::locator::redacted(&a.prov)
        )));
    }
    let removed = img.change(|h, store| {
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
        crate::present::locator::redacted(&a.prov),
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
        let g = h.header.downcast_ref::<geli::Geli>().ok_or_else(|| {
            Failure::usage(format!(
                "{} is not a GELI provider",
                crate::present::locator::redacted(p)
            ))
        })?;
        println!(
            "{}: {}",
            crate::present::locator::redacted(p),
            g.metadata().version
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_backup_name_holds_no_secret_of_a_remote_provider() {
        let name = |p: &str| {
            default_backup(Path::new(p))
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        };
        assert_eq!(name("/dev/vtbd1p2"), "vtbd1p2.eli");
        assert_eq!(name("/srv/img/a.img"), "_srv_img_a.img.eli");
        let remote = name("rbd:pool/img:id=admin:key=AQSECRETKEY==");
        assert_eq!(remote, "rbd:pool_img.eli");
        assert!(!remote.contains("SECRET"));
    }
}

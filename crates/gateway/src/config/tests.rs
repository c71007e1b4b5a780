use super::*;

/// The module documentation's example, as a user would copy it.
const EXAMPLE: &str = r#"
listen = ["/run/sectorcrypt/gateway.sock", "127.0.0.1:10809"]
metrics = "127.0.0.1:9560"
max_connections = 256
max_connections_per_export = 64

[tls]
certificates = "/etc/sectorcrypt/tls"
verify_peer = true

[[export]]
name = "vm1"
image = "/srv/vm1.img"
header = "/srv/vm1.header"
credential = "vm1"
read_only = false
allow_uids = [1000]
tls_subjects = ["CN=backup"]

[[export]]
name = "geli0"
image = "/srv/geli0.img"
key_file = "/etc/sectorcrypt/geli0.pass"
keyfile_components = ["/etc/sectorcrypt/geli0.key"]
"#;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "gw.toml")
}

fn one(export: &str) -> String {
    format!("[[export]]\nname = \"a\"\nimage = \"/srv/a.img\"\n{export}")
}

#[test]
fn the_documented_example_parses_into_what_it_says() {
    let c = parse(EXAMPLE).unwrap();
    assert_eq!(c.listen.len(), 2);
    assert_eq!(c.metrics.as_deref(), Some("127.0.0.1:9560"));
    assert_eq!(
        (c.max_connections, c.max_connections_per_export),
        (Some(256), Some(64))
    );
    let tls = c.tls.as_ref().unwrap();
    assert!(tls.verify_peer && tls.require);
    assert_eq!(
        c.exports
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        ["vm1", "geli0"]
    );
    let vm1 = c.export("vm1").unwrap();
    assert_eq!(vm1.header.as_deref(), Some(Path::new("/srv/vm1.header")));
    assert_eq!(vm1.allow_uids.as_deref(), Some(&[1000][..]));
    assert_eq!(
        vm1.key_source(Some(Path::new("/run/credentials/gw.service")))
            .unwrap(),
        KeySource::File(PathBuf::from("/run/credentials/gw.service/vm1"))
    );
    let geli = c.export("geli0").unwrap();
    assert_eq!(geli.keyfile_components.len(), 1);
    assert_eq!(
        geli.key_source(None).unwrap(),
        KeySource::File(PathBuf::from("/etc/sectorcrypt/geli0.pass"))
    );
    assert!(!geli.read_only);
}

#[test]
fn a_misspelt_key_is_an_error_with_its_line() {
    let e = parse(&one("key_file = \"/k\"\nread_onyl = true\n")).unwrap_err();
    assert!(e.0.starts_with("gw.toml: "), "{e}");
    assert!(e.0.contains("read_onyl") && e.0.contains("line 5"), "{e}");
    let e = parse(&format!("listne = []\n{}", one("key_file = \"/k\"\n"))).unwrap_err();
    assert!(e.0.contains("listne"), "{e}");
}

#[test]
fn names_are_unique_printable_and_not_empty() {
    let twice = format!(
        "{}\n{}",
        one("key_file = \"/k\"\n"),
        one("key_file = \"/k\"\n")
    );
    assert!(parse(&twice)
        .unwrap_err()
        .0
        .contains("\"a\" is named twice"));
    let empty = "[[export]]\nname = \"\"\nimage = \"/i\"\nkey_file = \"/k\"\n";
    assert!(parse(empty).unwrap_err().0.contains("name is empty"));
    let control = "[[export]]\nname = \"a\\u001b[31m\"\nimage = \"/i\"\nkey_file = \"/k\"\n";
    assert!(parse(control).unwrap_err().0.contains("control character"));
    let long = format!(
        "[[export]]\nname = \"{}\"\nimage = \"/i\"\nkey_file = \"/k\"\n",
        "n".repeat(MAX_NAME + 1)
    );
    assert!(parse(&long).unwrap_err().0.contains("more than NBD's 4096"));
    assert!(parse("listen = [\"/s\"]\n")
        .unwrap_err()
        .0
        .contains("nothing to serve"));
}

#[test]
fn every_export_has_exactly_one_key_source() {
    assert!(parse(&one(""))
        .unwrap_err()
        .0
        .contains("give its passphrase"));
    let both = one("key_file = \"/k\"\ncredential = \"c\"\n");
    assert!(parse(&both).unwrap_err().0.contains("exclude each other"));
    let none_and_file = one("key_file = \"/k\"\nno_passphrase = true\n");
    assert!(parse(&none_and_file)
        .unwrap_err()
        .0
        .contains("exclude each other"));
    let c = parse(&one("no_passphrase = true\n")).unwrap();
    assert_eq!(c.exports[0].key_source(None).unwrap(), KeySource::None);
    for bad in ["../etc/shadow", "a/b", "..", ""] {
        let e = parse(&one(&format!("credential = {bad:?}\n"))).unwrap_err();
        assert!(e.0.contains("not a credential's name"), "{bad}: {e}");
    }
    let c = parse(&one("credential = \"pass\"\n")).unwrap();
    let e = c.exports[0].key_source(None).unwrap_err();
    assert!(e.0.contains("$CREDENTIALS_DIRECTORY"), "{e}");
}

#[test]
fn tls_subjects_need_verified_client_certificates() {
    let e = parse(&one("key_file = \"/k\"\ntls_subjects = [\"CN=x\"]\n")).unwrap_err();
    assert!(e.0.contains("verify_peer"), "{e}");
    let unverified = format!(
        "[tls]\ncertificates = \"/t\"\n{}",
        one("key_file = \"/k\"\ntls_subjects = [\"CN=x\"]\n")
    );
    assert!(parse(&unverified).is_err());
}

#[test]
fn listening_is_on_loopback_or_a_socket_and_metrics_parse() {
    let with = |top: &str| parse(&format!("{top}\n{}", one("key_file = \"/k\"\n")));
    assert!(with("listen = [\"[::1]:10809\", \"/run/s.sock\"]").is_ok());
    let e = with("listen = [\"0.0.0.0:10809\"]").unwrap_err();
    assert!(e.0.contains("not a loopback address"), "{e}");
    let e = with("listen = [\"localhost\"]").unwrap_err();
    assert!(e.0.contains("neither a socket path"), "{e}");
    let e = with("metrics = \"9560\"").unwrap_err();
    assert!(e.0.contains("metrics:"), "{e}");
    assert!(with("metrics = \"/run/sectorcrypt/metrics.sock\"").is_ok());
}

#[test]
fn an_export_on_the_command_line_keeps_the_equals_signs_of_its_uri() {
    let e = Export::from_arg("up=nbd+unix:///disk?socket=/run/up.sock").unwrap();
    assert_eq!(e.name, "up");
    assert_eq!(e.image, "nbd+unix:///disk?socket=/run/up.sock");
    assert!(Export::from_arg("no-equals")
        .unwrap_err()
        .0
        .contains("NAME=LOCATOR"));
}

#[test]
fn a_reload_adds_removes_applies_access_and_refuses_volume_changes() {
    let old = parse(EXAMPLE).unwrap();
    let mut new = old.clone();
    new.exports.retain(|e| e.name != "geli0");
    new.exports.push(Export {
        name: "vm2".into(),
        key_file: Some("/k".into()),
        ..Export::from_arg("vm2=/srv/vm2.img").unwrap()
    });
    new.exports[0].allow_uids = Some(vec![1000, 1001]);
    let c = Changes::between(&old, &new);
    assert_eq!(c.added, ["vm2"]);
    assert_eq!(c.removed, ["geli0"]);
    assert_eq!(c.access, ["vm1"]);
    assert!(c.refused.is_empty() && c.server.is_empty());

    new.exports[0].read_only = true;
    new.exports[0].image = "/srv/other.img".into();
    new.metrics = None;
    let c = Changes::between(&old, &new);
    assert_eq!(c.refused["vm1"], ["image", "read_only"]);
    assert!(
        c.access.is_empty(),
        "a refused export's access change waits too"
    );
    assert_eq!(c.server, ["metrics"]);
    assert_eq!(Changes::between(&old, &old), Changes::default());
}

#[test]
fn a_file_is_read_and_named_in_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("gw.toml");
    std::fs::write(&p, EXAMPLE).unwrap();
    assert_eq!(Config::load(&p).unwrap(), parse(EXAMPLE).unwrap());
    std::fs::write(&p, "[[export]]\nname = 3\n").unwrap();
    let e = Config::load(&p).unwrap_err();
    assert!(e.0.starts_with(&p.display().to_string()), "{e}");
    let missing = dir.path().join("missing.toml");
    assert!(Config::load(&missing)
        .unwrap_err()
        .0
        .contains("missing.toml"));
}

#[test]
fn an_export_of_several_gets_three_quarters_of_the_slots_unless_the_file_says() {
    let key = "key_file = \"/k\"\n";
    let two = format!(
        "{}{key}[[export]]\nname = \"b\"\nimage = \"/srv/b.img\"\n{key}",
        one("")
    );
    let c = parse(&two).unwrap();
    assert_eq!(c.connections_per_export(64), 48);
    assert_eq!(c.connections_per_export(4), 3);
    assert_eq!(c.connections_per_export(1), 1);
    // One export: no limit of its own, as `serve IMAGE`.
    assert_eq!(parse(&one(key)).unwrap().connections_per_export(64), 0);
    // Given: as given, 0 included (no limit).
    for n in [0, 10] {
        let c = parse(&format!("max_connections_per_export = {n}\n{two}")).unwrap();
        assert_eq!(c.connections_per_export(64), n);
    }
}

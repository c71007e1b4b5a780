//! What the `cipher` tests share besides OpenSSL: the check that a refused command exits
//! 2 and writes nothing.

use crate::support::{code, s, sc};

/// Runs `sectorcrypt ARGS` with `input` twice, to standard output and with `--output` onto
/// an existing file, and checks that it is refused as bad usage: exit 2, one line
/// `sectorcrypt: ...` on stderr that contains `msg`, nothing on stdout, the file untouched.
pub fn refused(args: &[&str], input: &[u8], msg: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("existing");
    std::fs::write(&file, b"keep me").expect("write");
    for to_file in [false, true] {
        let mut args = args.to_vec();
        if to_file {
            args.extend(["--output", s(&file)]);
        }
        let out = sc(&args, input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
        assert!(
            err.starts_with("sectorcrypt: ") && err.contains(msg),
            "{args:?}: {err:?} lacks {msg:?}"
        );
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line expected: {err:?}"
        );
        assert_eq!(
            std::fs::read(&file).expect("read"),
            b"keep me",
            "{args:?} touched the output file"
        );
    }
}

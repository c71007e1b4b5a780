//! Real NBD clients against the server: what they see of the export, and data through
//! them byte-exact (odd offsets and lengths, several connections, concurrent writers).

use crate::support::{quiet, start, MemExport};
use rand::{Rng, SeedableRng};
use sectorcrypt_testkit::{pattern, require, run_stdout};
use std::process::Command;
use std::thread;

/// Runs one qemu-io command on the export at `uri`; panics unless it succeeds.
fn qemu_io(uri: &str, cmd: &str) -> String {
    run_stdout(Command::new("qemu-io").args(["-f", "raw", "-c", cmd, uri]))
}

fn nbdinfo_json(uri: &str) -> serde_json::Value {
    let json = run_stdout(Command::new("nbdinfo").arg("--json").arg(uri));
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

#[test]
fn nbdinfo_shows_size_block_sizes_and_flags() {
    require!("nbdinfo");
    let size = 3 * 1024 * 1024 + 4096;
    let export = MemExport::new(vec![0; size], 4096, false);
    let srv = start(export, quiet());
    let v = nbdinfo_json(&srv.uri());
    let e = &v["exports"][0];
    assert_eq!(e["export-size"], size as u64, "{v}");
    assert_eq!(e["block_size_minimum"], 1, "{v}");
    assert_eq!(e["block_size_preferred"], 4096, "{v}");
    assert_eq!(e["block_size_maximum"], 32 << 20, "{v}");
    assert_eq!(e["is_read_only"], false, "{v}");
    assert_eq!(e["can_flush"], true, "{v}");
    assert_eq!(e["can_fua"], true, "{v}");
    assert_eq!(e["can_multi_conn"], true, "{v}");
    assert_eq!(e["can_trim"], false, "{v}");
    assert_eq!(e["can_zero"], true, "{v}");
    srv.stop();

    let ro = MemExport::new(vec![0; 4096], 512, true);
    let srv = start(ro, quiet());
    let v = nbdinfo_json(&srv.uri());
    assert_eq!(v["exports"][0]["is_read_only"], true, "{v}");
    assert_eq!(v["exports"][0]["block_size_preferred"], 512, "{v}");
    let list = run_stdout(Command::new("nbdinfo").arg("--list").arg(srv.uri()));
    assert!(list.contains("vol"), "{list}");
}

#[test]
fn nbdcopy_in_and_out_is_byte_exact_with_four_connections() {
    require!("nbdcopy");
    let size = 24 * 1024 * 1024 + 512 * 7;
    let export = MemExport::new(vec![0; size], 512, false);
    let srv = start(export.clone(), quiet());
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    let plain = pattern(size, 1);
    std::fs::write(&input, &plain).unwrap();

    let copy = |args: &[&str]| {
        let mut cmd = Command::new("nbdcopy");
        cmd.args(["--connections", "4", "--threads", "4"])
            .args(args);
        cmd
    };
    run_stdout(
        copy(&["--requests", "16", "--flush"])
            .arg(&input)
            .arg(srv.uri()),
    );
    assert!(
        export.snapshot() == plain,
        "the export differs after nbdcopy in"
    );
    assert!(export.flushes() > 0, "nbdcopy --flush flushes");

    run_stdout(copy(&[]).arg(srv.uri()).arg(&output));
    assert!(
        std::fs::read(&output).unwrap() == plain,
        "nbdcopy out differs"
    );
    srv.stop();
}

#[test]
fn qemu_io_reads_and_writes_at_odd_offsets() {
    require!("qemu-io");
    let size = 2 * 1024 * 1024;
    let base = pattern(size, 2);
    let export = MemExport::new(base.clone(), 512, false);
    let srv = start(export.clone(), quiet());
    let uri = srv.uri();
    let mut want = base;
    // (offset, length, pattern): odd offsets and lengths, across sector boundaries, at the
    // very end of the export.
    let writes = [
        (1u64, 1usize, 0x11u8),
        (511, 3, 0x22),
        (1000, 70001, 0x33),
        (80001, 511, 0x44),
        (size as u64 - 5, 5, 0x55),
    ];
    for &(o, l, p) in &writes {
        qemu_io(&uri, &format!("write -P {p} {o} {l}"));
        want[o as usize..o as usize + l].fill(p);
    }
    assert!(export.snapshot() == want, "writes through qemu-io differ");
    for &(o, l, p) in &writes {
        let out = qemu_io(&uri, &format!("read -P {p} {o} {l}"));
        assert!(!out.contains("Pattern verification failed"), "{out}");
    }
    // A read that crosses a pattern boundary fails the pattern check: the checks above do
    // compare.
    let out = Command::new("qemu-io")
        .args(["-f", "raw", "-c", "read -P 51 990 20", &uri])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Pattern verification failed"), "{text}");
    // Write zeroes (qemu-io's write -z sends NBD_CMD_WRITE_ZEROES).
    qemu_io(&uri, "write -z 3 9000");
    want[3..9003].fill(0);
    assert!(export.snapshot() == want, "write -z differs");
    srv.stop();
}

#[test]
fn qemu_img_converts_out_of_and_into_the_export() {
    require!("qemu-img");
    let size = 2 * 1024 * 1024;
    let base = pattern(size, 2);
    let export = MemExport::new(base.clone(), 512, false);
    let srv = start(export.clone(), quiet());
    let dir = tempfile::tempdir().unwrap();
    // Out of the export: equal to its contents.
    let out = dir.path().join("conv.raw");
    run_stdout(
        Command::new("qemu-img")
            .args(["convert", "-f", "raw", "-O", "raw"])
            .arg(srv.uri())
            .arg(&out),
    );
    assert!(
        std::fs::read(&out).unwrap() == base,
        "qemu-img convert differs"
    );
    // And into the export.
    let other = pattern(size, 22);
    let input = dir.path().join("in.raw");
    std::fs::write(&input, &other).unwrap();
    run_stdout(
        Command::new("qemu-img")
            .args(["convert", "-n", "-f", "raw", "-O", "raw"])
            .arg(&input)
            .arg(srv.uri()),
    );
    assert!(
        export.snapshot() == other,
        "qemu-img convert into the export differs"
    );
    srv.stop();
}

#[test]
fn concurrent_writers_on_disjoint_ranges() {
    require!("qemu-io");
    let size = 8 * 1024 * 1024;
    let export = MemExport::new(vec![0; size], 512, false);
    let srv = start(export.clone(), quiet());
    let uri = srv.uri();
    let parts = 6usize;
    let part = size / parts;
    let writers: Vec<_> = (0..parts)
        .map(|i| {
            let uri = uri.clone();
            thread::spawn(move || {
                // Each writer: many odd-sized requests over its own range, several in
                // flight (aio_write), on its own connection.
                let mut cmds = Vec::new();
                let mut o = i * part + 3;
                let end = (i + 1) * part - 3;
                let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
                while o < end {
                    let l = rng.gen_range(1..40000).min(end - o);
                    cmds.push("-c".to_string());
                    cmds.push(format!("aio_write -P {} {o} {l}", i + 1));
                    o += l;
                }
                cmds.push("-c".into());
                cmds.push("aio_flush".into());
                run_stdout(
                    Command::new("qemu-io")
                        .args(["-f", "raw"])
                        .args(&cmds)
                        .arg(&uri),
                );
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let got = export.snapshot();
    for i in 0..parts {
        let r = i * part..(i + 1) * part;
        let want: Vec<u8> = r
            .clone()
            .map(|x| {
                if x < i * part + 3 || x >= (i + 1) * part - 3 {
                    0
                } else {
                    (i + 1) as u8
                }
            })
            .collect();
        assert!(got[r] == want[..], "range {i} differs");
    }
    srv.stop();
}

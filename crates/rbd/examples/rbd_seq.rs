//! Sequential throughput on an RBD image, in process, for bench/ceph.sh: `depth` requests
//! of `size` bytes in flight (one thread each, taking the next request in turn), either
//! through sectorcrypt's engine on the volume in the image (`read`/`write`: decrypting or
//! encrypting, IVs and all) or straight to the image through the same store (`raw-read`/
//! `raw-write`: the store's own speed). Prints one line: `MODE BYTES SECONDS MB/s`.
//!
//! ```text
//! rbd_seq MODE SPEC [--pass FILE] [--bytes N] [--offset N] [--size N] [--depth N]
//!                   [--chunk N]
//! ```
//! `--chunk` sets the engine's chunk size (default: the engine's own).
//! `--offset` (raw modes) skips the header; `--bytes` defaults to the volume's (or the
//! image's, from `--offset`) whole size.

use sectorcrypt_rbd::RbdStore;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::{Header, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Where the requests go: the engine (plaintext) or the store (raw).
enum Target {
    Volume(Box<Volume>),
    Raw(RbdStore, u64),
}

impl Target {
    fn io(&self, buf: &mut [u8], at: u64, write: bool) -> std::io::Result<()> {
        match self {
            Target::Volume(v) if write => v.write_at(buf, at),
            Target::Volume(v) => v.read_at(buf, at),
            Target::Raw(s, off) if write => s.write_at(buf, off + at),
            Target::Raw(s, off) => s.read_at(buf, off + at),
        }
    }

    fn len(&self) -> u64 {
        match self {
            Target::Volume(v) => v.size(),
            Target::Raw(s, off) => s.size().expect("image size") - off,
        }
    }

    fn flush(&self) -> std::io::Result<()> {
        match self {
            Target::Volume(v) => v.flush(),
            Target::Raw(s, _) => s.sync(),
        }
    }
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn num(args: &[String], name: &str, default: u64) -> u64 {
    arg(args, name).map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, spec) = match (args.first(), args.get(1)) {
        (Some(m), Some(s)) => (m.as_str(), s.as_str()),
        _ => {
            eprintln!("usage: rbd_seq read|write|raw-read|raw-write SPEC [--pass FILE] ...");
            std::process::exit(2);
        }
    };
    let write = mode.ends_with("write");
    let store = RbdStore::open_spec(spec, write).expect("open the image");
    let target = if mode.starts_with("raw") {
        Target::Raw(store, num(&args, "--offset", 0))
    } else {
        let pass = std::fs::read(arg(&args, "--pass").expect("--pass FILE")).expect("pass");
        let h = Header::read(&store).expect("a volume header");
        let u = h.unlock(&store, &pass).expect("unlock");
        let opts = EngineOptions {
            chunk_bytes: arg(&args, "--chunk").map(|v| v.parse().expect("a number")),
            ..EngineOptions::default()
        };
        let vol = u.engine(Box::new(store), opts);
        Target::Volume(Box::new(vol.expect("engine")))
    };
    let size = num(&args, "--size", 4 << 20);
    let depth = num(&args, "--depth", 16);
    let bytes = num(&args, "--bytes", target.len()).min(target.len());
    let requests = bytes.div_ceil(size);
    let next = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..depth {
            s.spawn(|| {
                let mut buf = vec![0x5au8; size as usize];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= requests {
                        break;
                    }
                    let at = i * size;
                    let n = size.min(bytes - at) as usize;
                    target.io(&mut buf[..n], at, write).expect("i/o");
                }
            });
        }
    });
    if write {
        target.flush().expect("flush");
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{mode} {bytes} {secs:.3} {:.1}", bytes as f64 / secs / 1e6);
}

//! Engine throughput: writes then reads SIZE bytes of plaintext through [`Volume`] over a
//! one-key [`Layout`] (AES-256-XTS, plain64, 512-byte sectors by default) on a file, in requests
//! of REQUEST bytes, and prints the median GB/s of several runs. Each write run starts from a
//! new, empty (sparse) file, as a fresh volume would.
//!
//! ```text
//! cargo run --release -p sectorcrypt-volume --example volume_bench -- \
//!     [--file /dev/shm/F] [--size 1G] [--threads N] [--chunk BYTES] [--request BYTES]
//!     [--sector 512|4096] [--runs 5] [--callers N] [--raw] [--files seq|pipe] [--json]
//! ```
//!
//! `--callers N`: N threads issue the requests concurrently, each taking the next one (the
//! pattern of an NBD client with requests in flight). `--raw`: the same requests as plain
//! `pread`/`pwrite` on the file with no engine and no encryption: the ceiling.
//! `--files seq|pipe`: the plaintext comes from a file beside the volume and is read back
//! into a new file (the pattern of `sectorcrypt write --input` / `read --output`), either
//! alternating file I/O with `write_at`/`read_at` (`seq`) or with `write_from`/`read_to`
//! (`pipe`, the file I/O on a second thread).
//!
//! Used by `bench/volume.sh`. Release builds only.

use sectorcrypt_crypto::dmcrypt::CipherSpec;
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use sectorcrypt_volume::{FileStore, Geometry, IvRule, Layout};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|e| format!("bad size {s:?}: {e}"))
}

struct Args {
    file: PathBuf,
    size: u64,
    threads: Option<usize>,
    chunk: Option<usize>,
    request: usize,
    sector: usize,
    runs: usize,
    callers: usize,
    raw: bool,
    files: Option<Files>,
    json: bool,
}

/// `--files seq|pipe`: plaintext comes from a file and goes to a file, as with
/// `sectorcrypt write --input F` / `read --output F`: `seq` alternates reading the input and
/// `write_at` (and `read_at` and writing the output); `pipe` uses `write_from` / `read_to`.
#[derive(Clone, Copy, PartialEq)]
enum Files {
    Seq,
    Pipe,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        file: PathBuf::from(format!(
            "/dev/shm/sectorcrypt-volume-bench-{}",
            std::process::id()
        )),
        size: 1 << 30,
        threads: None,
        chunk: None,
        request: 8 << 20,
        sector: 512,
        runs: 5,
        callers: 1,
        raw: false,
        files: None,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--json" {
            a.json = true;
            continue;
        }
        if flag == "--raw" {
            a.raw = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--file" => a.file = PathBuf::from(value),
            "--size" => a.size = parse_size(&value)?,
            "--threads" => a.threads = Some(parse_size(&value)? as usize),
            "--chunk" => a.chunk = Some(parse_size(&value)? as usize),
            "--request" => a.request = parse_size(&value)? as usize,
            "--sector" => a.sector = parse_size(&value)? as usize,
            "--runs" => a.runs = parse_size(&value)? as usize,
            "--callers" => a.callers = parse_size(&value)? as usize,
            "--files" => {
                a.files = Some(match value.as_str() {
                    "seq" => Files::Seq,
                    "pipe" => Files::Pipe,
                    _ => return Err("--files takes seq or pipe".into()),
                })
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.size == 0
        || a.request == 0
        || a.runs == 0
        || a.callers == 0
        || !a.size.is_multiple_of(a.sector as u64)
    {
        return Err("size, request and runs must be positive, size whole sectors".into());
    }
    Ok(a)
}

/// CPU time of this process so far (all threads, also those that have ended), in seconds:
/// utime + stime from /proc/self/stat, in clock ticks of 10 ms (CLK_TCK = 100 on Linux).
/// Throughput per CPU second is steadier than wall time on a busy machine.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) end with ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// What the requests go to: the engine, or the bare file (the baseline without encryption).
trait Target: Sync {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()>;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    fn volume(&self) -> Option<&Volume> {
        None
    }
}

impl Target for Volume {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        Volume::write_at(self, buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        Volume::read_at(self, buf, offset)
    }
    fn volume(&self) -> Option<&Volume> {
        Some(self)
    }
}

struct Raw(std::fs::File);

impl Target for Raw {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

/// One pass over the whole volume in requests of `a.request` bytes, issued by `a.callers`
/// threads taking the next request in turn (like an NBD client with requests in flight).
/// Returns (GB/s, GB per CPU-second).
fn pass(a: &Args, target: &dyn Target, src: &[u8], write: bool) -> Result<(f64, f64), String> {
    let next = AtomicU64::new(0);
    let t = Instant::now();
    let c = cpu_seconds();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..a.callers)
            .map(|_| {
                scope.spawn(|| -> std::io::Result<()> {
                    let mut buf = vec![0u8; a.request];
                    loop {
                        let off = next.fetch_add(a.request as u64, Ordering::Relaxed);
                        if off >= a.size {
                            return Ok(());
                        }
                        let n = (a.size - off).min(a.request as u64) as usize;
                        if write {
                            let s = (off as usize) % src.len();
                            let s = if s + n > src.len() { 0 } else { s };
                            target.write_at(&src[s..s + n], off)?;
                        } else {
                            target.read_at(&mut buf[..n], off)?;
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("worker panicked"))
    })
    .map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - c;
    Ok((a.size as f64 / secs / 1e9, a.size as f64 / cpu / 1e9))
}

/// One pass through files (see [`Files`]). Returns (GB/s, GB per CPU-second).
fn files_pass(a: &Args, vol: &Volume, mode: Files, write: bool) -> Result<(f64, f64), String> {
    let input = a.file.with_extension("input");
    let output = a.file.with_extension("output");
    let t = Instant::now();
    let c = cpu_seconds();
    let e = |e: std::io::Error| e.to_string();
    if write {
        let mut f = std::fs::File::open(&input).map_err(e)?;
        match mode {
            Files::Pipe => {
                if vol.write_from(&mut f, 0).map_err(e)? != a.size {
                    return Err("short input".into());
                }
            }
            Files::Seq => {
                let mut buf = vec![0u8; a.request];
                let mut off = 0;
                while off < a.size {
                    let n = (a.size - off).min(a.request as u64) as usize;
                    f.read_exact(&mut buf[..n]).map_err(e)?;
                    vol.write_at(&buf[..n], off).map_err(e)?;
                    off += n as u64;
                }
            }
        }
    } else {
        let mut f = std::fs::File::create(&output).map_err(e)?;
        match mode {
            Files::Pipe => vol.read_to(&mut f, 0, a.size).map_err(e)?,
            Files::Seq => {
                let mut buf = vec![0u8; a.request];
                let mut off = 0;
                while off < a.size {
                    let n = (a.size - off).min(a.request as u64) as usize;
                    vol.read_at(&mut buf[..n], off).map_err(e)?;
                    f.write_all(&buf[..n]).map_err(e)?;
                    off += n as u64;
                }
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - c;
    Ok((a.size as f64 / secs / 1e9, a.size as f64 / cpu / 1e9))
}

fn main() -> Result<(), String> {
    let a = args()?;
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(151) ^ 0x5a).collect();
    let spec: CipherSpec = "aes-xts-plain64".parse().map_err(|e| format!("{e}"))?;
    let geometry = Geometry {
        sector_size: a.sector,
        data_offset: 0,
        size: a.size,
        iv: if a.sector > 512 {
            IvRule::Sectors { first: 0 }
        } else {
            IvRule::Units512 { first: 0 }
        },
        metadata: None,
    };
    // Plaintext source: 64 MiB (or less) of varied bytes, cycled.
    let src_len = (64usize << 20)
        .min(a.size as usize)
        .max(a.request.min(a.size as usize));
    let src: Vec<u8> = (0..src_len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
        .collect();
    let open = || -> Result<Box<dyn Target>, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&a.file)
            .map_err(|e| format!("{}: {e}", a.file.display()))?;
        file.set_len(a.size).map_err(|e| e.to_string())?;
        if a.raw {
            return Ok(Box::new(Raw(file)));
        }
        let layout = Layout::single(geometry, spec, &key).map_err(|e| e.to_string())?;
        let store = Box::new(FileStore::new(file, a.file.display().to_string()));
        let vol = Volume::new(
            store,
            layout,
            EngineOptions {
                threads: a.threads,
                read_only: false,
                chunk_bytes: a.chunk,
            },
        )
        .map_err(|e| e.to_string())?;
        Ok(Box::new(vol))
    };
    if a.files.is_some() {
        let mut f =
            std::fs::File::create(a.file.with_extension("input")).map_err(|e| e.to_string())?;
        let mut left = a.size;
        while left > 0 {
            let n = left.min(src.len() as u64) as usize;
            f.write_all(&src[..n]).map_err(|e| e.to_string())?;
            left -= n as u64;
        }
    }
    let (mut writes, mut reads, mut writes_cpu, mut reads_cpu) = (vec![], vec![], vec![], vec![]);
    for _ in 0..a.runs {
        // Every write pass starts from a new, empty file, as a fresh volume would.
        let target = open()?;
        let ((w, wc), (r, rc)) = match (a.files, target.volume()) {
            (Some(mode), Some(vol)) => (
                files_pass(&a, vol, mode, true)?,
                files_pass(&a, vol, mode, false)?,
            ),
            _ => (
                pass(&a, &*target, &src, true)?,
                pass(&a, &*target, &src, false)?,
            ),
        };
        writes.push(w);
        writes_cpu.push(wc);
        reads.push(r);
        reads_cpu.push(rc);
        // Spot check: the first request reads back.
        let n = (a.size as usize).min(a.request).min(src_len);
        let mut back = vec![0u8; n];
        target.read_at(&mut back, 0).map_err(|e| e.to_string())?;
        if back[..] != src[..n] {
            return Err("read back differs from what was written".into());
        }
    }
    let _ = std::fs::remove_file(&a.file);
    let _ = std::fs::remove_file(a.file.with_extension("input"));
    let _ = std::fs::remove_file(a.file.with_extension("output"));
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let chunk = a
        .chunk
        .unwrap_or(sectorcrypt_volume::engine::DEFAULT_CHUNK_BYTES);
    let what = match (a.raw, a.files) {
        (true, _) => "raw",
        (false, None) => "engine",
        (false, Some(Files::Seq)) => "engine-files-seq",
        (false, Some(Files::Pipe)) => "engine-files-pipe",
    };
    let round = |v: &[f64]| {
        v.iter()
            .map(|x| (x * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    };
    let (w, r) = (median(writes.clone()), median(reads.clone()));
    let (wc, rc) = (median(writes_cpu), median(reads_cpu));
    if a.json {
        println!(
            "{{\"target\":\"{what}\",\"size\":{},\"threads\":{threads},\"callers\":{},\
             \"chunk\":{chunk},\"request\":{},\"sector\":{},\"write_gbps\":{w:.3},\
             \"read_gbps\":{r:.3},\"write_gb_per_cpu_s\":{wc:.3},\"read_gb_per_cpu_s\":{rc:.3}}}",
            a.size, a.callers, a.request, a.sector
        );
    } else {
        println!(
            "{what} {} MiB, threads {threads}, callers {}, chunk {chunk}, request {}, sector {}: \
             write {w:.2} GB/s ({wc:.2} GB per cpu-s), read {r:.2} GB/s ({rc:.2} GB per cpu-s) \
             (median of {}; writes {:?}, reads {:?})",
            a.size >> 20,
            a.callers,
            a.request,
            a.sector,
            a.runs,
            round(&writes),
            round(&reads),
        );
    }
    Ok(())
}

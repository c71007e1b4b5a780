//! Engine throughput: writes then reads SIZE bytes of plaintext through [`Volume`] over a raw
//! `SectorCipher` (AES-256-XTS, plain64, 512-byte sectors by default) on a file, in requests
//! of REQUEST bytes, and prints the median GB/s of several runs. Each write run starts from a
//! new, empty (sparse) file, as a fresh volume would.
//!
//! ```text
//! cargo run --release -p sectorcrypt-volume --example volume_bench -- \
//!     [--file /dev/shm/F] [--size 1G] [--threads N] [--chunk BYTES] [--request BYTES]
//!     [--sector 512|4096] [--runs 5] [--json]
//! ```
//!
//! Used by `bench/volume.sh`. Release builds only.

use sectorcrypt_crypto::{CipherSpec, SectorCipher, SectorLayout};
use sectorcrypt_volume::engine::{EngineOptions, Volume};
use std::fs::OpenOptions;
use std::path::PathBuf;
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
    json: bool,
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
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--json" {
            a.json = true;
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
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.size == 0 || a.request == 0 || a.runs == 0 || !a.size.is_multiple_of(a.sector as u64) {
        return Err("size, request and runs must be positive, size whole sectors".into());
    }
    Ok(a)
}

/// CPU time of all this process's threads so far, in seconds (Linux schedstat, ns
/// precision): throughput per CPU second is steadier than wall time on a busy machine.
fn cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let mut ns = 0u64;
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let a = args()?;
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(151) ^ 0x5a).collect();
    let spec: CipherSpec = "aes-xts-plain64".parse().map_err(|e| format!("{e}"))?;
    let layout = SectorLayout::new(a.sector, a.sector > 512).map_err(|e| format!("{e}"))?;
    // Plaintext source: 64 MiB (or less) of varied bytes, cycled.
    let src_len = (64usize << 20)
        .min(a.size as usize)
        .max(a.request.min(a.size as usize));
    let src: Vec<u8> = (0..src_len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
        .collect();
    let mut read_buf = vec![0u8; a.request];
    let open = |truncate: bool| -> Result<Volume, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(&a.file)
            .map_err(|e| format!("{}: {e}", a.file.display()))?;
        file.set_len(a.size).map_err(|e| e.to_string())?;
        let cipher = SectorCipher::new(spec, &key, layout).map_err(|e| e.to_string())?;
        Volume::new(
            file,
            cipher,
            0,
            a.size,
            0,
            EngineOptions {
                threads: a.threads,
                read_only: false,
                chunk_bytes: a.chunk,
            },
        )
        .map_err(|e| e.to_string())
    };
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    let mut writes_cpu = Vec::new();
    let mut reads_cpu = Vec::new();
    for _ in 0..a.runs {
        let vol = open(true)?;
        let t = Instant::now();
        let c = cpu_seconds();
        let mut off = 0u64;
        while off < a.size {
            let n = (a.size - off).min(a.request as u64) as usize;
            let s = (off as usize) % src_len;
            let s = if s + n > src_len { 0 } else { s };
            vol.write_at(&src[s..s + n], off)
                .map_err(|e| e.to_string())?;
            off += n as u64;
        }
        writes.push(a.size as f64 / t.elapsed().as_secs_f64() / 1e9);
        writes_cpu.push(a.size as f64 / (cpu_seconds() - c) / 1e9);
        let t = Instant::now();
        let c = cpu_seconds();
        let mut off = 0u64;
        while off < a.size {
            let n = (a.size - off).min(a.request as u64) as usize;
            vol.read_at(&mut read_buf[..n], off)
                .map_err(|e| e.to_string())?;
            off += n as u64;
        }
        reads.push(a.size as f64 / t.elapsed().as_secs_f64() / 1e9);
        reads_cpu.push(a.size as f64 / (cpu_seconds() - c) / 1e9);
        // Spot check: the first request reads back.
        let n = (a.size as usize).min(a.request).min(src_len);
        vol.read_at(&mut read_buf[..n], 0)
            .map_err(|e| e.to_string())?;
        if read_buf[..n] != src[..n] {
            return Err("read back differs from what was written".into());
        }
    }
    let _ = std::fs::remove_file(&a.file);
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (w, r) = (median(writes.clone()), median(reads.clone()));
    let (wc, rc) = (median(writes_cpu), median(reads_cpu));
    if a.json {
        println!(
            "{{\"size\":{},\"threads\":{threads},\"chunk\":{},\"request\":{},\"sector\":{},\
             \"write_gbps\":{w:.3},\"read_gbps\":{r:.3},\"write_gb_per_cpu_s\":{wc:.3},\
             \"read_gb_per_cpu_s\":{rc:.3}}}",
            a.size,
            a.chunk
                .unwrap_or(sectorcrypt_volume::engine::DEFAULT_CHUNK_BYTES),
            a.request,
            a.sector
        );
    } else {
        println!(
            "volume {} MiB, threads {threads}, chunk {}, request {}, sector {}: \
             write {w:.2} GB/s ({wc:.2} GB per cpu-s), read {r:.2} GB/s ({rc:.2} GB per cpu-s) \
             (median of {}; writes {:?}, reads {:?})",
            a.size >> 20,
            a.chunk
                .unwrap_or(sectorcrypt_volume::engine::DEFAULT_CHUNK_BYTES),
            a.request,
            a.sector,
            a.runs,
            writes
                .iter()
                .map(|x| (x * 100.0).round() / 100.0)
                .collect::<Vec<_>>(),
            reads
                .iter()
                .map(|x| (x * 100.0).round() / 100.0)
                .collect::<Vec<_>>(),
        );
    }
    Ok(())
}

//! Looking for secrets in a process's memory (its mappings from /proc/PID/smaps, read
//! through /proc/PID/mem: root, or the same user while the process is dumpable) or in a
//! core file (included with `#[path = "support/memscan.rs"] mod memscan;`).

use std::os::unix::fs::FileExt;
use std::path::Path;

/// A byte string looked for.
#[derive(Debug, Clone)]
pub struct Needle {
    pub name: String,
    pub bytes: Vec<u8>,
}

impl Needle {
    pub fn new(name: &str, bytes: &[u8]) -> Needle {
        Needle {
            name: name.to_string(),
            bytes: bytes.to_vec(),
        }
    }
}

/// One place a needle was found.
#[derive(Debug, Clone)]
pub struct Found {
    pub needle: String,
    /// The address (the offset in a core file).
    pub at: u64,
    /// The mapping: range, permissions, name and `VmFlags` (empty for a core file).
    pub mapping: String,
    /// Whether the mapping is kept out of core dumps (`VmFlags` `dd`).
    pub undumped: bool,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {:#x} in {}", self.needle, self.at, self.mapping)
    }
}

/// What a scan saw.
#[derive(Debug, Default)]
pub struct Scan {
    pub found: Vec<Found>,
    /// Mappings that could not be read (memfd_secret's, the vvar pages).
    pub unreadable: Vec<String>,
    /// Bytes read.
    pub bytes: u64,
}

impl Scan {
    /// The findings of needle `name`.
    pub fn of(&self, name: &str) -> Vec<&Found> {
        self.found.iter().filter(|f| f.needle == name).collect()
    }
}

fn find_all(
    hay: &[u8],
    base: u64,
    needles: &[Needle],
    mapping: &str,
    undumped: bool,
) -> Vec<Found> {
    let mut found = vec![];
    for n in needles {
        for i in memchr::memmem::find_iter(hay, &n.bytes) {
            found.push(Found {
                needle: n.name.clone(),
                at: base + i as u64,
                mapping: mapping.to_string(),
                undumped,
            });
        }
    }
    found
}

/// A mapping of /proc/PID/smaps.
struct Mapping {
    start: u64,
    end: u64,
    readable: bool,
    text: String,
    undumped: bool,
}

fn mappings(pid: u32) -> Vec<Mapping> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut out: Vec<Mapping> = vec![];
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            let m = out.last_mut().expect("a mapping before its flags");
            m.undumped = flags.split_whitespace().any(|x| x == "dd");
            m.text = format!("{} [{}]", m.text, flags.trim());
            continue;
        }
        let Some((a, b)) = first.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let perms = f.next().unwrap_or("");
        let name = f.skip(3).collect::<Vec<_>>().join(" ");
        out.push(Mapping {
            start,
            end,
            readable: perms.starts_with('r'),
            text: format!("{first} {perms} {name}"),
            undumped: false,
        });
    }
    assert!(!out.is_empty(), "/proc/{pid}/smaps lists no mapping");
    out
}

/// Every readable mapping of process `pid`, searched.
pub fn scan_process(pid: u32, needles: &[Needle]) -> Scan {
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let overlap = needles.iter().map(|n| n.bytes.len()).max().unwrap();
    let mut scan = Scan::default();
    let mut buf = vec![0u8; 1 << 20];
    for m in mappings(pid).into_iter().filter(|m| m.readable) {
        let mut at = m.start;
        while at < m.end {
            let want = ((m.end - at) as usize).min(buf.len());
            match mem.read_at(&mut buf[..want], at) {
                Ok(0) | Err(_) => {
                    scan.unreadable.push(m.text.clone());
                    break;
                }
                Ok(n) => {
                    scan.bytes += n as u64;
                    scan.found
                        .extend(find_all(&buf[..n], at, needles, &m.text, m.undumped));
                    // Step back so that a needle across two reads is still seen.
                    let last = n as u64 == m.end - at;
                    at += if last { n } else { n - overlap } as u64;
                }
            }
        }
    }
    scan
}

/// A core file, searched (everything in it was dumped).
pub fn scan_core(core: &Path, needles: &[Needle]) -> Scan {
    let bytes = std::fs::read(core).unwrap();
    Scan {
        found: find_all(&bytes, 0, needles, "the core file (at: offset)", false),
        unreadable: vec![],
        bytes: bytes.len() as u64,
    }
}

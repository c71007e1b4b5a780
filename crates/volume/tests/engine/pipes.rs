//! Streams: write_from a reader (uneven pieces, interruptions, failures, too long) and
//! read_to a writer (a closed pipe).

use crate::fixture::*;
use rand::SeedableRng;
use sectorcrypt_volume::engine::Volume;
use std::io::ErrorKind;

/// A reader that yields `data` in uneven pieces, then fails if `fail` says so.
struct Uneven {
    data: Vec<u8>,
    at: usize,
    fail: bool,
    calls: usize,
}

impl std::io::Read for Uneven {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.data.len() {
            return if self.fail {
                Err(std::io::Error::other("the input broke"))
            } else {
                Ok(0)
            };
        }
        // 1, 1000, 70000, ... bytes at a time, and an interruption now and then.
        self.calls += 1;
        if self.calls % 7 == 3 {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let step = [1, 1000, 70_000, 3_000_000][self.calls % 4];
        let n = step.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn pipe_fixture(seed: u64) -> (Fixture, Volume) {
    // 24 MiB: several 8 MiB pieces.
    let cfg = Config::xts(512, 48 * 1024).at(4096, 9);
    let fx = Fixture::new(cfg, seed);
    let vol = fx.open(engine(2, None));
    (fx, vol)
}

#[test]
fn write_from_a_reader_stores_everything_byte_exact() {
    let (fx, vol) = pipe_fixture(90);
    let mut model = fx.plaintext();
    let mut rng = rand::rngs::StdRng::seed_from_u64(91);
    for (off, len) in [(0u64, 0usize), (777, 20 << 20), (0, 24 << 20), (5, 1)] {
        let data = random_bytes(&mut rng, len);
        let mut input = Uneven {
            data: data.clone(),
            at: 0,
            fail: false,
            calls: 0,
        };
        let n = vol.write_from(&mut input, off).unwrap();
        assert_eq!(n, len as u64);
        model[off as usize..][..len].copy_from_slice(&data);
        assert!(fx.plaintext() == model, "write_from {off}+{len}");
    }
    // Too long: what fits is stored, then an error.
    let size = vol.size();
    let data = random_bytes(&mut rng, 3 << 20);
    let off = size - (1 << 20) - 3;
    let e = vol.write_from(&mut &data[..], off).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("beyond the end"), "{e}");
    model[off as usize..].copy_from_slice(&data[..(size - off) as usize]);
    assert!(fx.plaintext() == model, "what fits was stored");
    // A failing reader: its error, and what it gave before is stored.
    let data = random_bytes(&mut rng, 9 << 20);
    let mut input = Uneven {
        data: data.clone(),
        at: 0,
        fail: true,
        calls: 0,
    };
    let e = vol.write_from(&mut input, 100).unwrap_err();
    assert!(e.to_string().contains("the input broke"), "{e}");
    model[100..][..data.len()].copy_from_slice(&data);
    assert!(
        fx.plaintext() == model,
        "the input before the failure was stored"
    );
    drop(vol);
    let ro = fx.open(read_only());
    let e = ro.write_from(&mut &[1u8][..], 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
}

/// A writer that accepts `limit` bytes, then fails like a closed pipe.
struct Closing {
    got: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Closing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.got.len() >= self.limit {
            return Err(ErrorKind::BrokenPipe.into());
        }
        let n = buf.len().min(self.limit - self.got.len()).min(100_000);
        self.got.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn read_to_a_writer_gives_the_plaintext_and_its_errors() {
    let (fx, vol) = pipe_fixture(92);
    let model = fx.plaintext();
    for (off, len) in [
        (0u64, 0u64),
        (0, vol.size()),
        (513, 17 << 20),
        (vol.size() - 1, 1),
    ] {
        let mut out = Vec::new();
        vol.read_to(&mut out, off, len).unwrap();
        assert!(
            out == model[off as usize..][..len as usize],
            "read_to {off}+{len}"
        );
    }
    let mut closing = Closing {
        got: Vec::new(),
        limit: 10 << 20,
    };
    let e = vol.read_to(&mut closing, 3, 20 << 20).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BrokenPipe);
    assert!(closing.got == model[3..][..10 << 20]);
    let e = vol.read_to(&mut Vec::new(), vol.size() - 5, 6).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

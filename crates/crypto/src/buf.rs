//! `InOut`: one buffer view that is either transformed in place or read from a source and
//! written to a separate destination of the same length.
//!
//! Every kernel takes an `InOut`, so in-place and out-of-place calls share one code path and
//! out-of-place never costs an extra copy. The borrow checker guarantees that `src` and `dst`
//! of the split form do not overlap; the in-place form has `src == dst`, and kernels must read
//! a block before they write it (they all do: each group of blocks is loaded, transformed,
//! stored).

use crate::error::InputError;
use crate::Error;

/// Which way a call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Encrypt,
    Decrypt,
}

/// Builds the `InOut` of an out-of-place call, refusing different lengths.
pub(crate) fn split<'a>(src: &'a [u8], dst: &'a mut [u8]) -> Result<InOut<'a>, Error> {
    if src.len() != dst.len() {
        return Err(Error::Input(InputError::LengthMismatch {
            src: src.len(),
            dst: dst.len(),
        }));
    }
    Ok(InOut::split(src, dst))
}

/// A source/destination pair of equal length, or one buffer transformed in place.
#[derive(Debug)]
pub(crate) enum InOut<'a> {
    /// Read and write the same bytes.
    InPlace(&'a mut [u8]),
    /// Read `src`, write `dst` (same length).
    Split { src: &'a [u8], dst: &'a mut [u8] },
}

impl<'a> InOut<'a> {
    /// A split view; the caller has checked that the lengths are equal.
    pub(crate) fn split(src: &'a [u8], dst: &'a mut [u8]) -> Self {
        assert_eq!(
            src.len(),
            dst.len(),
            "InOut: source and destination lengths differ"
        );
        InOut::Split { src, dst }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            InOut::InPlace(b) => b.len(),
            InOut::Split { dst, .. } => dst.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A shorter-lived view of the same bytes.
    pub(crate) fn reborrow(&mut self) -> InOut<'_> {
        match self {
            InOut::InPlace(b) => InOut::InPlace(b),
            InOut::Split { src, dst } => InOut::Split { src, dst },
        }
    }

    /// Splits into `[0, mid)` and `[mid, len)`.
    pub(crate) fn split_at(self, mid: usize) -> (InOut<'a>, InOut<'a>) {
        match self {
            InOut::InPlace(b) => {
                let (x, y) = b.split_at_mut(mid);
                (InOut::InPlace(x), InOut::InPlace(y))
            }
            InOut::Split { src, dst } => {
                let (s0, s1) = src.split_at(mid);
                let (d0, d1) = dst.split_at_mut(mid);
                (
                    InOut::Split { src: s0, dst: d0 },
                    InOut::Split { src: s1, dst: d1 },
                )
            }
        }
    }

    /// The sub-view `[start, end)`.
    pub(crate) fn slice(&mut self, start: usize, end: usize) -> InOut<'_> {
        match self {
            InOut::InPlace(b) => InOut::InPlace(&mut b[start..end]),
            InOut::Split { src, dst } => InOut::Split {
                src: &src[start..end],
                dst: &mut dst[start..end],
            },
        }
    }

    /// Copies input bytes `[off, off + out.len())` into `out`.
    #[inline(always)]
    pub(crate) fn load(&self, off: usize, out: &mut [u8]) {
        let n = out.len();
        match self {
            InOut::InPlace(b) => out.copy_from_slice(&b[off..off + n]),
            InOut::Split { src, .. } => out.copy_from_slice(&src[off..off + n]),
        }
    }

    /// Writes `from` to output bytes `[off, off + from.len())`.
    #[inline(always)]
    pub(crate) fn store(&mut self, off: usize, from: &[u8]) {
        let n = from.len();
        match self {
            InOut::InPlace(b) => b[off..off + n].copy_from_slice(from),
            InOut::Split { dst, .. } => dst[off..off + n].copy_from_slice(from),
        }
    }

    /// Raw input and output pointers for the SIMD kernels (equal when in place). Valid for
    /// `len()` bytes for as long as this view is borrowed.
    #[inline(always)]
    pub(crate) fn ptrs(&mut self) -> (*const u8, *mut u8) {
        match self {
            InOut::InPlace(b) => {
                let p = b.as_mut_ptr();
                (p as *const u8, p)
            }
            InOut::Split { src, dst } => (src.as_ptr(), dst.as_mut_ptr()),
        }
    }
}

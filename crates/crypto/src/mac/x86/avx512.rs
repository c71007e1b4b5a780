//! stub
#![allow(unsafe_code)]
use crate::mac::lanes::{Lanes, Words, MAX_LANES};
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512(());
impl Avx512 {
    pub(crate) fn new() -> Option<Self> { None }
}
impl<const W: usize> Lanes<W> for Avx512 {
    fn lanes(&self) -> usize { 16 }
    fn compress_bytes(&self, _s: &mut [[u32; MAX_LANES]; W], _data: &[&[u8]]) {}
    fn compress_words(&self, _s: &mut [[u32; MAX_LANES]; W], _w: &Words, _n: usize) {}
}

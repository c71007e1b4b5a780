#![allow(unsafe_code)]
use super::super::soft::PackedSbox;
use super::super::Order;
pub(crate) fn ecb(_rk: &[u32; 32], _sbox: &PackedSbox, _order: Order, _buf: &mut [u8]) -> usize {
    0
}

//! What the commands learn from this machine: who uses a device or file ([`busy`]),
//! other processes' start times ([`process`]), and key memory kept out of reach
//! ([`memory`]).

pub mod busy;
pub mod memory;
pub mod process;

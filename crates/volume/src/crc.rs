//! CRC-32C (Castagnoli), as CoreStorage (FileVault 2) stores it: read by the FileVault 2
//! driver and by the signature probe that wipes its header. A leaf module.

/// CRC-32C (polynomial 0x82f63b78, reflected) of `data` continuing from `crc`, with no
/// inversion on the way in or out (CoreStorage stores it so, from the seed `0xffffffff`).
pub fn crc32c(mut crc: u32, data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82f6_3b78
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_of_the_rfc3720_check_string() {
        // CRC-32C("123456789") = e3069283 with the usual inversions (RFC 3720 B.4).
        assert_eq!(!crc32c(!0, b"123456789"), 0xe306_9283);
    }
}

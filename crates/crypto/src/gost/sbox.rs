//! The eight S-box parameter sets of GOST 28147-89, named by their OID names, with their
//! tables.
//!
//! Tables from RFC 4357 section 11 (the CryptoPro and test sets), RFC 5831 / GOST R 34.11-94
//! (its test set), and RFC 8891 section 4.1 / GOST R 34.12-2015 (id-tc26-gost-28147-param-Z,
//! the Magma S-box), as transcribed in `crates/crypto/tests/vectors/gost/README.md`. A set
//! is written as its eight rows `pi[0]` .. `pi[7]`, each as 16 hex digits where digit `x`
//! is `pi[i][x]`; row `pi[i]` is applied to nibble `i` of the 32-bit word (`pi[0]` to the
//! least significant nibble). The digits are read at compile time by [`rows`].

use crate::Error;

/// The rows of one parameter set: `PI[i][x]`.
pub(crate) type Rows = [[u8; 16]; 8];

/// Reads eight rows of 16 lowercase hex digits each; a malformed table fails the build.
const fn rows(hex: [&str; 8]) -> Rows {
    let mut out = [[0u8; 16]; 8];
    let mut i = 0;
    while i < 8 {
        let row = hex[i].as_bytes();
        assert!(row.len() == 16, "an s-box row has 16 digits");
        let mut x = 0;
        while x < 16 {
            out[i][x] = match row[x] {
                b'0'..=b'9' => row[x] - b'0',
                b'a'..=b'f' => row[x] - b'a' + 10,
                _ => panic!("an s-box row is lowercase hex"),
            };
            x += 1;
        }
        i += 1;
    }
    out
}

/// Declares [`Sbox`] from one table: per set its variant, OID name, dotted OID and rows.
macro_rules! parameter_sets {
    ($($(#[$doc:meta])* $v:ident = $name:literal, $oid:literal, [$($row:literal)*];)+) => {
        /// The eight S-box parameter sets of GOST 28147-89, by OID name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Sbox {
            $($(#[$doc])* $v,)+
        }

        impl Sbox {
            /// Every parameter set.
            pub const ALL: [Sbox; 8] = [$(Sbox::$v),+];

            /// The OID name, e.g. `id-Gost28147-89-CryptoPro-A-ParamSet`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Sbox::$v => $name,)+
                }
            }

            /// The dotted OID.
            pub fn oid(self) -> &'static str {
                match self {
                    $(Sbox::$v => $oid,)+
                }
            }

            /// The table rows `pi[i][x]`.
            pub(crate) fn rows(self) -> &'static Rows {
                match self {
                    $(Sbox::$v => {
                        const ROWS: Rows = rows([$($row),*]);
                        &ROWS
                    })+
                }
            }
        }
    };
}

parameter_sets! {
    /// id-GostR3411-94-TestParamSet, 1.2.643.2.2.30.0 (libgcrypt's and Botan's default).
    GostR3411_94Test = "id-GostR3411-94-TestParamSet", "1.2.643.2.2.30.0", [
        "4a92d80e6b1c7f53" "eb4c6dfa23810759" "581da342efc7609b" "7da1089fe46cb253"
        "6c715fd84a9e03b2" "4ba0721d36859cfe" "db413f590ae7682c" "1fd057a4923e6b8c"
    ];
    /// id-GostR3411-94-CryptoProParamSet, 1.2.643.2.2.30.1.
    GostR3411_94CryptoPro = "id-GostR3411-94-CryptoProParamSet", "1.2.643.2.2.30.1", [
        "a4568137dce092bf" "5f402db91763cea8" "7fce94103b526a8d" "4a7c0f28e165db93"
        "764b9c2a180efd35" "7624d9f0a15b8ec3" "de41705a3c8f629b" "13a95b4f867ed02c"
    ];
    /// id-Gost28147-89-TestParamSet, 1.2.643.2.2.31.0.
    Gost28147Test = "id-Gost28147-89-TestParamSet", "1.2.643.2.2.31.0", [
        "42f59108e3bcd7a6" "c9fe813a274d60b5" "d8ec739a15246f0b" "e9b25f710dc6a438"
        "3e59680dab7c21f4" "8f6b19c5d37a0e24" "9bc0367548ef1a2d" "c652b09d3e7af418"
    ];
    /// id-Gost28147-89-CryptoPro-A-ParamSet, 1.2.643.2.2.31.1.
    CryptoProA = "id-Gost28147-89-CryptoPro-A-ParamSet", "1.2.643.2.2.31.1", [
        "96328b17a4efc0d5" "37e98af0526cb4d1" "e462b3d8cf5a0719" "e7acd13902b4f856"
        "b5198df0e423c7a6" "3adc120b75948fe6" "1d297a608c45f3be" "baf50ce8623917d4"
    ];
    /// id-Gost28147-89-CryptoPro-B-ParamSet, 1.2.643.2.2.31.2.
    CryptoProB = "id-Gost28147-89-CryptoPro-B-ParamSet", "1.2.643.2.2.31.2", [
        "84b135092eacd67f" "012a4d5c973fb86e" "ec0a92db758f3614" "750db6123acf4e98"
        "27cf95ab140d68e3" "83264debc17fa095" "52ab91c374d06f8e" "04be8371a296fd5c"
    ];
    /// id-Gost28147-89-CryptoPro-C-ParamSet, 1.2.643.2.2.31.3.
    CryptoProC = "id-Gost28147-89-CryptoPro-C-ParamSet", "1.2.643.2.2.31.3", [
        "1bc29d0f458ea763" "017db4528efc9a63" "825049fa37cd6e1b" "36015da8b297efc4"
        "8db0451293ce6fa7" "c9b18e247365a0fd" "a968de20f35b41c7" "7405a2fec61bd938"
    ];
    /// id-Gost28147-89-CryptoPro-D-ParamSet, 1.2.643.2.2.31.4.
    CryptoProD = "id-Gost28147-89-CryptoPro-D-ParamSet", "1.2.643.2.2.31.4", [
        "fc2a645079ed1b83" "b634cfe27d805a91" "1cb0fe65ad489372" "15eca70d62b493f8"
        "0c89d2ab73654ef1" "80f325eb1a47c9d6" "306f1e92d8c4ba57" "1a68fb04c3597d2e"
    ];
    /// id-tc26-gost-28147-param-Z, 1.2.643.7.1.2.5.1.1 (Magma's, RFC 8891).
    Tc26Z = "id-tc26-gost-28147-param-Z", "1.2.643.7.1.2.5.1.1", [
        "c462a5b9e8d703f1" "68239a5c1e47bd0f" "b3582fade174c960" "c821d4f670a53e9b"
        "7f5a816d093eb42c" "5df692cab78143e0" "8e25691cf4b0da37" "17ed05834fa69cb2"
    ];
}

impl Sbox {
    /// Parses an OID name or a dotted OID.
    pub fn from_name(name: &str) -> Result<Sbox, Error> {
        Sbox::ALL
            .into_iter()
            .find(|s| s.name() == name || s.oid() == name)
            .ok_or_else(|| Error::unknown_name("s-box", name, Sbox::ALL.map(Sbox::name)))
    }
}

impl std::fmt::Display for Sbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of every set is a permutation of the 16 nibbles (a transcription slip
    /// would repeat a digit), and the first row of param-Z is RFC 8891's `pi'_0`.
    #[test]
    fn rows_are_permutations() {
        for s in Sbox::ALL {
            for (i, row) in s.rows().iter().enumerate() {
                let mut seen = [false; 16];
                for &v in row {
                    seen[v as usize] = true;
                }
                assert!(seen.iter().all(|&x| x), "{s} row {i}");
            }
        }
        let z0 = [12, 4, 6, 2, 10, 5, 11, 9, 14, 8, 13, 7, 0, 3, 15, 1];
        assert_eq!(Sbox::Tc26Z.rows()[0], z0);
    }
}

//! The eight S-box parameter sets of GOST 28147-89, named by their OID names, with their
//! tables.
//!
//! The tables are data, in `sboxes.txt` beside this file: one set a line, its OID name and
//! its eight rows `pi[0]` .. `pi[7]`, each as 16 hex digits where digit `x` is `pi[i][x]`.
//! They come from RFC 4357 section 11 (the CryptoPro and test sets), RFC 5831 / GOST R
//! 34.11-94 (its test set), and RFC 8891 section 4.1 / GOST R 34.12-2015
//! (id-tc26-gost-28147-param-Z, the Magma S-box), as transcribed in
//! `crates/crypto/tests/vectors/gost/README.md`. Row `pi[i]` is applied to nibble `i` of
//! the 32-bit word (`pi[0]` to the least significant nibble). [`rows_named`] reads a set at
//! compile time, so a missing or malformed line fails the build.

use crate::Error;

/// The rows of one parameter set: `PI[i][x]`.
pub(crate) type Rows = [[u8; 16]; 8];

/// The tables, one set a line (`#` starts a comment line).
const TABLES: &str = include_str!("sboxes.txt");

/// Whether `text[at..]` starts with `word` followed by a space.
const fn starts_with_word(text: &[u8], at: usize, word: &[u8]) -> bool {
    if at + word.len() >= text.len() || text[at + word.len()] != b' ' {
        return false;
    }
    let mut i = 0;
    while i < word.len() {
        if text[at + i] != word[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The value of a lowercase hex digit.
const fn hex_digit(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => panic!("sboxes.txt: a row digit is not lowercase hex"),
    }
}

/// The rows of the set named `name` in [`TABLES`].
const fn rows_named(name: &str) -> Rows {
    let (text, name) = (TABLES.as_bytes(), name.as_bytes());
    let mut at = 0;
    while !starts_with_word(text, at, name) {
        // On to the next line.
        while at < text.len() && text[at] != b'\n' {
            at += 1;
        }
        assert!(at < text.len(), "sboxes.txt: a parameter set is missing");
        at += 1;
    }
    at += name.len();
    let mut out = [[0u8; 16]; 8];
    let mut i = 0;
    while i < 8 {
        assert!(
            text[at] == b' ',
            "sboxes.txt: rows are separated by one space"
        );
        let mut x = 0;
        while x < 16 {
            out[i][x] = hex_digit(text[at + 1 + x]);
            x += 1;
        }
        at += 17;
        i += 1;
    }
    assert!(
        text[at] == b'\n',
        "sboxes.txt: a set has eight rows of 16 digits"
    );
    out
}

/// Declares [`Sbox`]: per set its variant, OID name and dotted OID.
macro_rules! parameter_sets {
    ($($(#[$doc:meta])* $v:ident = $name:literal, $oid:literal;)+) => {
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
                        const ROWS: Rows = rows_named($name);
                        &ROWS
                    })+
                }
            }
        }
    };
}

parameter_sets! {
    /// id-GostR3411-94-TestParamSet, 1.2.643.2.2.30.0 (libgcrypt's and Botan's default).
    GostR3411_94Test = "id-GostR3411-94-TestParamSet", "1.2.643.2.2.30.0";
    /// id-GostR3411-94-CryptoProParamSet, 1.2.643.2.2.30.1.
    GostR3411_94CryptoPro = "id-GostR3411-94-CryptoProParamSet", "1.2.643.2.2.30.1";
    /// id-Gost28147-89-TestParamSet, 1.2.643.2.2.31.0.
    Gost28147Test = "id-Gost28147-89-TestParamSet", "1.2.643.2.2.31.0";
    /// id-Gost28147-89-CryptoPro-A-ParamSet, 1.2.643.2.2.31.1.
    CryptoProA = "id-Gost28147-89-CryptoPro-A-ParamSet", "1.2.643.2.2.31.1";
    /// id-Gost28147-89-CryptoPro-B-ParamSet, 1.2.643.2.2.31.2.
    CryptoProB = "id-Gost28147-89-CryptoPro-B-ParamSet", "1.2.643.2.2.31.2";
    /// id-Gost28147-89-CryptoPro-C-ParamSet, 1.2.643.2.2.31.3.
    CryptoProC = "id-Gost28147-89-CryptoPro-C-ParamSet", "1.2.643.2.2.31.3";
    /// id-Gost28147-89-CryptoPro-D-ParamSet, 1.2.643.2.2.31.4.
    CryptoProD = "id-Gost28147-89-CryptoPro-D-ParamSet", "1.2.643.2.2.31.4";
    /// id-tc26-gost-28147-param-Z, 1.2.643.7.1.2.5.1.1 (Magma's, RFC 8891).
    Tc26Z = "id-tc26-gost-28147-param-Z", "1.2.643.7.1.2.5.1.1";
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

//! The subject of an X.509 certificate as a string in the form of RFC 4514 ("String
//! Representation of Distinguished Names"), for access lists: `CN=backup,O=Example`.
//!
//! Only what that needs is parsed, by hand, from the DER of the certificate (RFC 5280,
//! 4.1): `Certificate ::= SEQUENCE { tbsCertificate, ... }`, `TBSCertificate ::=
//! SEQUENCE { [0] version OPTIONAL, serialNumber, signature, issuer, validity, subject,
//! ... }`, `Name ::= SEQUENCE OF RelativeDistinguishedName`, `RDN ::= SET OF
//! AttributeTypeAndValue`, `AttributeTypeAndValue ::= SEQUENCE { type OID, value ANY }`.
//! The certificate reaching this parser was already verified by rustls (its chain and
//! signature): this reads its fields, it checks nothing.
//!
//! The string (RFC 4514, 2.1-2.4): the RDNs last first, separated by `,`; the attributes
//! of a multi-valued RDN joined by `+`, last first too (RFC 4514 leaves their order open;
//! this is OpenSSL's, so that the string an administrator copies from `openssl x509`
//! matches); the types of RFC 4514's table
//! by their short names (CN, L, ST, O, OU, C, STREET, DC, UID), every other type as its
//! dotted OID with the value as `#` and the hexadecimal of its DER encoding; values of
//! the string types (UTF8String, PrintableString, IA5String, TeletexString read as Latin-1,
//! BMPString, UniversalString) as text with `"+,;<>\` escaped by a backslash, as are a
//! leading space or `#`, a trailing space, and NUL (`\00`). Those rules give the strings
//! `openssl x509 -noout -subject -nameopt RFC2253` prints for subjects made of the
//! table's types.

/// The certificate's subject in RFC 4514 form, or `None` if `der` is not a certificate
/// this parser can read.
pub(crate) fn subject_of(der: &[u8]) -> Option<String> {
    let (cert, _) = tlv(der, SEQUENCE)?;
    let (mut tbs, _) = tlv(cert, SEQUENCE)?;
    if tbs.first() == Some(&0xa0) {
        tbs = tlv(tbs, 0xa0)?.1;
    }
    let tbs = tlv(tbs, INTEGER)?.1; // serialNumber
    let tbs = tlv(tbs, SEQUENCE)?.1; // signature
    let tbs = tlv(tbs, SEQUENCE)?.1; // issuer
    let tbs = tlv(tbs, SEQUENCE)?.1; // validity
    let (subject, _) = tlv(tbs, SEQUENCE)?;
    name_string(subject)
}

const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

/// Splits one TLV with tag `tag` off the front of `der`: its contents and what follows.
fn tlv(der: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (t, contents, rest) = any_tlv(der)?;
    (t == tag).then_some((contents, rest))
}

/// Splits any one TLV (a one-byte tag, DER's definite length) off the front of `der`:
/// its tag, its contents and what follows.
fn any_tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, der) = der.split_first()?;
    if tag & 0x1f == 0x1f {
        return None; // a tag number above 30: no field read here has one
    }
    let (&first, der) = der.split_first()?;
    let (len, der) = if first < 0x80 {
        (usize::from(first), der)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || der.len() < n {
            return None; // indefinite (not DER) or absurdly long
        }
        let len = der[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &der[n..])
    };
    (der.len() >= len).then(|| (tag, &der[..len], &der[len..]))
}

/// The RFC 4514 string of a Name's contents (its RDNs).
fn name_string(mut name: &[u8]) -> Option<String> {
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (mut set, rest) = tlv(name, SET)?;
        name = rest;
        let mut attributes = Vec::new();
        while !set.is_empty() {
            let (atv, rest) = tlv(set, SEQUENCE)?;
            set = rest;
            attributes.push(attribute_string(atv)?);
        }
        if attributes.is_empty() {
            return None;
        }
        attributes.reverse();
        rdns.push(attributes.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// `TYPE=value` for one AttributeTypeAndValue's contents.
fn attribute_string(atv: &[u8]) -> Option<String> {
    let (oid, value_der) = tlv(atv, OID)?;
    let (tag, value, rest) = any_tlv(value_der)?;
    if !rest.is_empty() {
        return None;
    }
    let text = match short_name(oid) {
        Some(short) => string_value(tag, value).map(|v| (short.to_string(), escape(&v))),
        None => None,
    };
    Some(match text {
        Some((t, v)) => format!("{t}={v}"),
        // RFC 4514, 2.4: a type without a short name, or a value that is no string,
        // as the dotted OID and `#` with the value's whole DER in hexadecimal.
        None => {
            let t = match short_name(oid) {
                Some(short) => short.to_string(),
                None => dotted(oid)?,
            };
            let hex: String = value_der.iter().map(|b| format!("{b:02x}")).collect();
            format!("{t}=#{hex}")
        }
    })
}

/// RFC 4514's table of attribute type names (section 3), by OID contents.
fn short_name(oid: &[u8]) -> Option<&'static str> {
    Some(match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x09] => "STREET",
        // 0.9.2342.19200300.100.1.25 and .1
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        _ => return None,
    })
}

/// An OID's contents in dotted decimal.
fn dotted(oid: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut acc: u64 = 0;
    for (i, &b) in oid.iter().enumerate() {
        if acc > u64::MAX >> 7 {
            return None;
        }
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (acc / 40).min(2);
                arcs.push(first);
                arcs.push(acc - first * 40);
            } else {
                arcs.push(acc);
            }
            acc = 0;
        } else if i == oid.len() - 1 {
            return None;
        }
    }
    if arcs.is_empty() {
        return None;
    }
    Some(
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

/// The text of a value of one of the string types, or `None` for any other type.
fn string_value(tag: u8, v: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String
        0x0c | 0x13 | 0x16 => String::from_utf8(v.to_vec()).ok(),
        // TeletexString: in practice Latin-1.
        0x14 => Some(v.iter().map(|&b| char::from(b)).collect()),
        // BMPString: UCS-2, big-endian.
        0x1e if v.len().is_multiple_of(2) => {
            char::decode_utf16(v.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])))
                .collect::<Result<String, _>>()
                .ok()
        }
        // UniversalString: UCS-4, big-endian.
        0x1c if v.len().is_multiple_of(4) => v
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    }
}

/// Escapes a value as RFC 4514, 2.4 asks.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '#' if i == 0 => out.push_str("\\#"),
            ' ' if i == 0 || i == last => out.push_str("\\ "),
            '\0' => out.push_str("\\00"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of a TLV with a short or long length.
    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        match contents.len() {
            n if n < 0x80 => v.push(n as u8),
            n if n < 0x100 => v.extend_from_slice(&[0x81, n as u8]),
            n => v.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]),
        }
        v.extend_from_slice(contents);
        v
    }

    fn atv(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        der(SEQUENCE, &[der(OID, oid), der(tag, value)].concat())
    }

    /// A certificate's outer layers around `subject` (a Name's contents), with fields
    /// that are not read left empty.
    fn cert(subject: &[u8], version: bool) -> Vec<u8> {
        let mut tbs = Vec::new();
        if version {
            tbs.extend(der(0xa0, &der(INTEGER, &[2])));
        }
        tbs.extend(der(INTEGER, &[0x01, 0x02]));
        tbs.extend(der(SEQUENCE, &[]));
        tbs.extend(der(SEQUENCE, &der(SET, &atv(&[0x55, 4, 3], 0x0c, b"ca"))));
        tbs.extend(der(SEQUENCE, &[]));
        tbs.extend(der(SEQUENCE, subject));
        tbs.extend(der(SEQUENCE, &[0; 200])); // the key, long enough for a long length
        der(
            SEQUENCE,
            &[der(SEQUENCE, &tbs), der(SEQUENCE, &[])].concat(),
        )
    }

    #[test]
    fn rdns_come_last_first_with_short_names_and_plus_for_multi_valued() {
        let subject = [
            der(SET, &atv(&[0x55, 4, 6], 0x13, b"DE")),
            der(SET, &atv(&[0x55, 4, 10], 0x0c, b"Example, Inc.")),
            der(
                SET,
                &[
                    atv(&[0x55, 4, 11], 0x0c, b"ops"),
                    atv(&[0x55, 4, 3], 0x0c, b"web"),
                ]
                .concat(),
            ),
        ]
        .concat();
        for version in [true, false] {
            assert_eq!(
                subject_of(&cert(&subject, version)).unwrap(),
                "CN=web+OU=ops,O=Example\\, Inc.,C=DE"
            );
        }
    }

    #[test]
    fn values_are_escaped_and_other_types_are_hex() {
        let s = |v: &str| escape(v);
        assert_eq!(s("#a b "), "\\#a b\\ ");
        assert_eq!(s(" x"), "\\ x");
        assert_eq!(s("a\"b+c;d<e>f\\g"), "a\\\"b\\+c\\;d\\<e\\>f\\\\g");
        assert_eq!(s("x\0y"), "x\\00y");
        assert_eq!(s("a#b"), "a#b");
        assert_eq!(s("émilie"), "émilie");
        // emailAddress (1.2.840.113549.1.9.1) has no short name in RFC 4514.
        let email = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];
        let subject = der(SET, &atv(&email, 0x16, b"a@b"));
        assert_eq!(
            subject_of(&cert(&subject, true)).unwrap(),
            "1.2.840.113549.1.9.1=#1603614062"
        );
        // A BMPString, and a CN that is no string type.
        let bmp: Vec<u8> = "Zoë".encode_utf16().flat_map(u16::to_be_bytes).collect();
        let subject = [
            der(SET, &atv(&[0x55, 4, 3], 0x1e, &bmp)),
            der(SET, &atv(&[0x55, 4, 3], INTEGER, &[5])),
        ]
        .concat();
        assert_eq!(
            subject_of(&cert(&subject, true)).unwrap(),
            "CN=#020105,CN=Zoë"
        );
    }

    #[test]
    fn what_is_not_a_certificate_gives_none() {
        let good = cert(&der(SET, &atv(&[0x55, 4, 3], 0x0c, b"x")), true);
        assert_eq!(subject_of(&good).unwrap(), "CN=x");
        for cut in 0..good.len() {
            assert_eq!(subject_of(&good[..cut]), None, "cut at {cut}");
        }
        assert_eq!(subject_of(&[]), None);
        assert_eq!(subject_of(&[0x30, 0x80, 0, 0]), None, "indefinite length");
        assert_eq!(subject_of(&[0x30, 0x85, 1, 1, 1, 1, 1]), None);
        // An empty RDN set.
        assert_eq!(subject_of(&cert(&der(SET, &[]), true)), None);
        // An OID whose last byte says more follows.
        let subject = der(SET, &atv(&[0x2a, 0x86], 0x04, b"x"));
        assert_eq!(subject_of(&cert(&subject, true)), None);
        // An empty subject is the empty string.
        assert_eq!(subject_of(&cert(&[], true)).unwrap(), "");
    }
}

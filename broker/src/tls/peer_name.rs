//! The subject common name (CN, OID 2.5.4.3) of an X.509 certificate in
//! DER, for SASL EXTERNAL. Only called on certificates rustls has already
//! verified against the client CA, but still read defensively: every
//! length is checked, and anything unexpected gives `None`.

/// The DER tags this walk needs.
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const CONTEXT_0: u8 = 0xa0;
const UTF8_STRING: u8 = 0x0c;
const PRINTABLE_STRING: u8 = 0x13;
const IA5_STRING: u8 = 0x16;
/// 2.5.4.3, commonName.
const CN_OID: &[u8] = &[0x55, 0x04, 0x03];

/// One tag-length-value: (tag, value, the rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[count..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (found, value, rest) = tlv(input)?;
    (found == tag).then_some((value, rest))
}

/// The first CN of the certificate's subject, if it has one.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (certificate, _) = expect(der, SEQUENCE)?;
    let (tbs, _) = expect(certificate, SEQUENCE)?;
    let mut rest = tbs;
    if rest.first() == Some(&CONTEXT_0) {
        rest = tlv(rest)?.2; // version
    }
    rest = tlv(rest)?.2; // serial number
    rest = tlv(rest)?.2; // signature algorithm
    rest = tlv(rest)?.2; // issuer
    rest = tlv(rest)?.2; // validity
    let (mut subject, _) = expect(rest, SEQUENCE)?;
    while !subject.is_empty() {
        let (mut set, next) = expect(subject, SET)?;
        subject = next;
        while !set.is_empty() {
            let (attribute, next) = expect(set, SEQUENCE)?;
            set = next;
            let (oid, value) = expect(attribute, OID)?;
            if oid != CN_OID {
                continue;
            }
            let (tag, text, _) = tlv(value)?;
            return match tag {
                UTF8_STRING | PRINTABLE_STRING | IA5_STRING => {
                    String::from_utf8(text.to_vec()).ok()
                }
                _ => None,
            };
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with(subject: rcgen::DistinguishedName) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.distinguished_name = subject;
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn finds_the_common_name() {
        let mut name = rcgen::DistinguishedName::new();
        name.push(rcgen::DnType::OrganizationName, "Example Org");
        name.push(rcgen::DnType::CommonName, "alice");
        assert_eq!(common_name(&cert_with(name)).as_deref(), Some("alice"));
    }

    #[test]
    fn none_without_a_cn_or_on_garbage() {
        let mut name = rcgen::DistinguishedName::new();
        name.push(rcgen::DnType::OrganizationName, "Example Org");
        let der = cert_with(name);
        assert_eq!(common_name(&der), None);
        for cut in [0, 1, 5, der.len() / 2] {
            assert_eq!(common_name(&der[..cut]), None);
        }
        assert_eq!(common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }
}

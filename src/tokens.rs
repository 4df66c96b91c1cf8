//! Signed tokens for links in emails (unsubscribe): `<subscriber id>.<expiry>.<mac>`, where
//! mac = HMAC-SHA256(KDIGEST_SECRET, "<purpose>/<id>/<expiry>") in hex. Forged, altered or
//! expired tokens verify to nothing. Expiry 0 means the token does not expire.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::Secret;
use crate::parse::hex;

pub const SECRET_ENV: &str = "KDIGEST_SECRET";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Unsubscribe,
}

impl Purpose {
    fn as_str(self) -> &'static str {
        match self {
            Purpose::Unsubscribe => "unsubscribe",
        }
    }
}

fn mac(secret: &Secret, purpose: Purpose, id: i64, expires: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes any key length");
    mac.update(format!("{}/{id}/{expires}", purpose.as_str()).as_bytes());
    hex(&mac.finalize().into_bytes()[..16])
}

pub fn sign(secret: &Secret, purpose: Purpose, id: i64, expires: i64) -> String {
    format!("{id}.{expires}.{}", mac(secret, purpose, id, expires))
}

/// The subscriber id of a valid token.
pub fn verify(secret: &Secret, purpose: Purpose, token: &str, now_unix: i64) -> Option<i64> {
    let mut parts = token.split('.');
    let id: i64 = parts.next()?.parse().ok()?;
    let expires: i64 = parts.next()?.parse().ok()?;
    let given = parts.next()?;
    if parts.next().is_some() || (expires != 0 && expires < now_unix) {
        return None;
    }
    let expected = mac(secret, purpose, id, expires);
    // Constant-time comparison: no early exit on the first differing byte.
    let same = given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    same.then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_only_unaltered_and_unexpired() {
        let s = Secret::new("k");
        let t = sign(&s, Purpose::Unsubscribe, 42, 0);
        assert_eq!(verify(&s, Purpose::Unsubscribe, &t, 1_000), Some(42));
        assert_eq!(
            verify(&Secret::new("other"), Purpose::Unsubscribe, &t, 1_000),
            None
        );
        assert_eq!(
            verify(&s, Purpose::Unsubscribe, &t.replacen("42", "43", 1), 1_000),
            None
        );
        let expiring = sign(&s, Purpose::Unsubscribe, 7, 500);
        assert_eq!(verify(&s, Purpose::Unsubscribe, &expiring, 400), Some(7));
        assert_eq!(verify(&s, Purpose::Unsubscribe, &expiring, 600), None);
        assert_eq!(verify(&s, Purpose::Unsubscribe, "garbage", 0), None);
    }
}

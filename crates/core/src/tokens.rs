//! Signed tokens for links in emails (confirm, unsubscribe, preferences):
//! `<subscriber id>.<expiry>.<mac>`, where mac = HMAC-SHA256(KDIGEST_SECRET,
//! "<purpose>/<id>/<expiry>") in hex. Forged, altered or expired tokens, and tokens signed for
//! another purpose, verify to nothing. Expiry 0 means the token does not expire.
//!
//! Tokens carry no state of their own: "works once" comes from what they act on (a confirm
//! token only acts on a pending subscriber, and confirming ends pending).

use crate::parse::hex;
use crate::settings::Secret;

pub const SECRET_ENV: &str = "KDIGEST_SECRET";

/// Shorter keys could be guessed offline from one signed link.
pub const SECRET_MIN_CHARS: usize = 32;

/// The signing key from KDIGEST_SECRET: Ok(None) when unset, an error naming the fix (never
/// the value) when it is too short.
pub fn secret_from_env() -> anyhow::Result<Option<Secret>> {
    let Ok(secret) = Secret::from_env(SECRET_ENV, "") else {
        return Ok(None);
    };
    let n = secret.expose().chars().count();
    if n < SECRET_MIN_CHARS {
        anyhow::bail!(
            "{SECRET_ENV} is too short ({n} characters); use at least {SECRET_MIN_CHARS}, for example the output of `openssl rand -hex 32`"
        );
    }
    Ok(Some(secret))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Double opt-in: expires after [`CONFIRM_TTL_SECS`].
    Confirm,
    Unsubscribe,
    Preferences,
    /// A team-chat sign-up waiting for the code its robot received: carried by the code
    /// form, never a link (it confirms nothing without the code). Expires like Confirm.
    ChatConfirm,
    /// An email reader's 👍/👎 links: `/vote/<token>/<event>/<up|down>`. Does not expire.
    Vote,
}

/// How long a confirmation link works.
pub const CONFIRM_TTL_SECS: i64 = 48 * 3600;

impl Purpose {
    /// Also the first segment of the link's path: `/confirm/{token}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Confirm => "confirm",
            Purpose::Unsubscribe => "unsubscribe",
            Purpose::Preferences => "preferences",
            Purpose::ChatConfirm => "chat-confirm",
            Purpose::Vote => "vote",
        }
    }
}

fn mac(secret: &Secret, purpose: Purpose, id: i64, expires: i64) -> String {
    let message = format!("{}/{id}/{expires}", purpose.as_str());
    hex(&secret.hmac_sha256(&[message.as_bytes()])[..16])
}

pub fn sign(secret: &Secret, purpose: Purpose, id: i64, expires: i64) -> String {
    format!("{id}.{expires}.{}", mac(secret, purpose, id, expires))
}

/// The public link for `purpose`: `<base>/<purpose>/<token>`. Confirmation links expire after
/// [`CONFIRM_TTL_SECS`]; the others do not.
pub fn link(base: &url::Url, secret: &Secret, purpose: Purpose, id: i64, now_unix: i64) -> String {
    let expires = match purpose {
        Purpose::Confirm | Purpose::ChatConfirm => now_unix + CONFIRM_TTL_SECS,
        Purpose::Unsubscribe | Purpose::Preferences | Purpose::Vote => 0,
    };
    let token = sign(secret, purpose, id, expires);
    base.join(&format!("{}/{token}", purpose.as_str()))
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("{base}{}/{token}", purpose.as_str()))
}

/// The confirmation code a team-chat sign-up posts to its robot: eight digits, derived from
/// the subscriber, the robot's address and the moment of the sign-up (a renewed sign-up
/// has a new one), so nothing is stored, a code for one robot does nothing for another,
/// and an old code in the chat's history is void.
pub fn chat_code(
    secret: &Secret,
    id: i64,
    address: &str,
    signed_up: chrono::DateTime<chrono::Utc>,
) -> String {
    let at = signed_up.timestamp_micros();
    let mac = secret.hmac_sha256(&[format!("chat-code/{id}/{address}/{at}").as_bytes()]);
    let n = u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]]) % 100_000_000;
    format!("{n:08}")
}

/// Compares without an early exit on the first differing byte.
pub fn same_secret(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
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
    same_secret(given, &expected).then_some(id)
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
        // A token signed for one purpose does nothing for another.
        let confirm = sign(&s, Purpose::Confirm, 42, 0);
        assert_eq!(verify(&s, Purpose::Unsubscribe, &confirm, 0), None);
        assert_eq!(verify(&s, Purpose::Confirm, &confirm, 0), Some(42));
    }
}

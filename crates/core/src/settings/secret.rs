//! Credentials from the environment.

use std::fmt;

use super::ConfigError;

/// A credential read from the environment. Debug never shows it, and it has no Display, so
/// it cannot reach a log line or an error message by accident.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Reads the variable; the error names the variable and the fix, never a value.
    pub fn from_env(var: &str, purpose: &str) -> Result<Secret, ConfigError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => {
                // No log line shows it from now on, whoever writes the line.
                crate::redact::remember(v.trim());
                Ok(Secret(v.trim().to_string()))
            }
            _ => Err(ConfigError::new(format!(
                "Environment variable {var} is not set; it must hold {purpose}"
            ))),
        }
    }

    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// HMAC-SHA256 with this key over the concatenated `parts` (webhook signatures, link
    /// tokens).
    pub fn hmac_sha256(&self, parts: &[&[u8]]) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(self.0.as_bytes())
            .expect("HMAC takes any key length");
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

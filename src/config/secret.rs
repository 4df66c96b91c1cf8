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
            Ok(v) if !v.trim().is_empty() => Ok(Secret(v.trim().to_string())),
            _ => Err(ConfigError {
                problems: vec![format!(
                    "Environment variable {var} is not set; it must hold {purpose}"
                )],
            }),
        }
    }

    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
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

//! Telegram adapter (to be written).

//! Locale tables (zh-CN, en): every heading, label and generated phrase comes from here,
//! never from Rust string literals. Tables are embedded and can be overridden from
//! `<templates_dir>/locales/<lang>.toml`. Pure once loaded.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

const ZH_CN: &str = include_str!("../templates/locales/zh-CN.toml");
const EN: &str = include_str!("../templates/locales/en.toml");

/// The embedded tables, parsed once: bots look texts up on every command.
fn builtin_entries(language: &str) -> &'static BTreeMap<String, String> {
    static TABLES: std::sync::LazyLock<[BTreeMap<String, String>; 2]> =
        std::sync::LazyLock::new(|| {
            [ZH_CN, EN].map(|t| toml::from_str(t).expect("built-in locale tables parse"))
        });
    match language {
        "en" => &TABLES[1],
        _ => &TABLES[0],
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Locale {
    entries: BTreeMap<String, String>,
}

impl Locale {
    /// The table for `language` ("zh-CN" or "en"), from `templates_dir` when it has one.
    pub fn load(language: &str, templates_dir: Option<&Path>) -> anyhow::Result<Locale> {
        let mut entries = builtin_entries(language).clone();
        if let Some(dir) = templates_dir {
            let path = dir.join("locales").join(format!("{language}.toml"));
            if path.exists() {
                let text = std::fs::read_to_string(&path)?;
                let custom: BTreeMap<String, String> = toml::from_str(&text).map_err(|e| {
                    anyhow::anyhow!("Locale file {} is invalid: {}", path.display(), e.message())
                })?;
                // Overrides may be partial: missing keys keep the built-in text.
                entries.extend(custom);
            }
        }
        Ok(Locale { entries })
    }

    /// The table a weekly roll-up is rendered with: each `week_<key>` entry replaces
    /// `<key>` ("This week" instead of "Overview").
    pub fn for_week(&self) -> Locale {
        let mut entries = self.entries.clone();
        for (key, value) in &self.entries {
            if let Some(plain) = key.strip_prefix("week_") {
                entries.insert(plain.to_string(), value.clone());
            }
        }
        Locale { entries }
    }

    pub fn builtin(language: &str) -> Locale {
        Locale::load(language, None).expect("built-in locale tables parse")
    }

    /// Every phrase of the table: words a checked LLM reply may use (`summarize::guard`).
    pub fn phrases(&self) -> impl Iterator<Item = &str> {
        self.entries.values().map(String::as_str)
    }

    pub fn has(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    pub fn get<'a>(&'a self, key: &'a str) -> &'a str {
        self.entries.get(key).map_or(key, String::as_str)
    }

    /// The phrase for `key` with `{name}` placeholders replaced.
    pub fn fill(&self, key: &str, vars: &[(&str, &str)]) -> String {
        let mut s = self.get(key).to_string();
        for (name, value) in vars {
            s = s.replace(&format!("{{{name}}}"), value);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_tables_have_the_same_keys() {
        let zh = Locale::builtin("zh-CN");
        let en = Locale::builtin("en");
        let keys = |l: &Locale| l.entries.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&zh), keys(&en));
        assert_eq!(zh.fill("source_n", &[("n", "2")]), "原始来源 2");
        assert_eq!(en.get("papers"), "Papers");
    }
}

//! Locale tables (zh-CN, en): every heading, label and generated phrase comes from here,
//! never from Rust string literals. Tables are embedded and can be overridden by
//! `<templates_dir>/locales/<lang>.toml` (read by the application into [`Templates`]).
//! Pure.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

const ZH_CN: &str = include_str!("../../../templates/locales/zh-CN.toml");
const EN: &str = include_str!("../../../templates/locales/en.toml");

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

/// The operator's overrides of the built-in templates and locale tables
/// (`digest.templates_dir`), as text: the application reads the directory
/// (`crate::templates::read`), the renderer and the locale tables take what it holds. The
/// names are relative to the directory: `digest.md.j2`, `locales/zh-CN.toml`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Templates {
    /// The directory, for messages.
    pub dir: PathBuf,
    pub files: BTreeMap<String, String>,
}

impl Templates {
    /// The override named `name` and the path it was read from.
    pub fn get(&self, name: &str) -> Option<(PathBuf, &str)> {
        self.files
            .get(name)
            .map(|text| (self.dir.join(name), text.as_str()))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Locale {
    entries: BTreeMap<String, String>,
}

impl Locale {
    /// The table for `language` ("zh-CN" or "en"), with the operator's override when the
    /// templates have one.
    pub fn load(language: &str, templates: Option<&Templates>) -> anyhow::Result<Locale> {
        let mut entries = builtin_entries(language).clone();
        let name = format!("locales/{language}.toml");
        if let Some((path, text)) = templates.and_then(|t| t.get(&name)) {
            let custom: BTreeMap<String, String> = toml::from_str(text).map_err(|e| {
                anyhow::anyhow!("Locale file {} is invalid: {}", path.display(), e.message())
            })?;
            // Overrides may be partial: missing keys keep the built-in text.
            entries.extend(custom);
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

    /// A layer as a reader of this language names it (`layer_name_<id>`: kernel_codegen ->
    /// 内核代码生成); the id itself for a layer the locale does not know (a configured one).
    pub fn layer<'a>(&'a self, id: &'a str) -> &'a str {
        self.entries
            .get(&format!("layer_name_{id}"))
            .map_or(id, String::as_str)
    }

    /// An event's layers named for the reader, joined by the list separator.
    pub fn layer_list(&self, ids: &[String]) -> String {
        ids.iter()
            .map(|id| self.layer(id))
            .collect::<Vec<_>>()
            .join(self.get("list_separator"))
    }

    /// Items joined as a sentence lists them: "a, b and c" (`list_separator`, then
    /// `list_last_separator` before the last), "a、b、c".
    pub fn list<S: AsRef<str>>(&self, items: &[S]) -> String {
        match items {
            [] => String::new(),
            [one] => one.as_ref().to_string(),
            [init @ .., last] => {
                let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
                format!(
                    "{}{}{}",
                    init.join(self.get("list_separator")),
                    self.get("list_last_separator"),
                    last.as_ref()
                )
            }
        }
    }

    /// The phrase for a count: `{key}_one` for 1, else `{key}_other`, with `{n}` filled
    /// ("1 change to act on", "3 changes to act on").
    pub fn count(&self, key: &str, n: usize) -> String {
        let form = if n == 1 { "one" } else { "other" };
        self.fill(&format!("{key}_{form}"), &[("n", &n.to_string())])
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
        assert_eq!(en.count("brief_changes", 1), " with 1 change to act on");
        let layers = ["kernel_codegen".to_string(), "robotics".to_string()];
        assert_eq!(zh.layer_list(&layers), "内核代码生成、robotics");
        // en names a layer in words too; a configured layer keeps its id.
        assert_eq!(en.layer_list(&layers), "kernel codegen, robotics");
        assert_eq!(en.count("brief_changes", 2), " with 2 changes to act on");
    }

    #[test]
    fn a_list_reads_as_a_sentence_lists() {
        let (zh, en) = (Locale::builtin("zh-CN"), Locale::builtin("en"));
        assert_eq!(en.list(&["MI300X", "RCCL"]), "MI300X and RCCL");
        assert_eq!(en.list(&["a", "b", "c"]), "a, b and c");
        assert_eq!(en.list(&["vLLM"]), "vLLM");
        assert_eq!(zh.list(&["a", "b", "c"]), "a、b、c");
        assert_eq!(en.list::<&str>(&[]), "");
    }
}

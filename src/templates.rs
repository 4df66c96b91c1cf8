//! The operator's templates directory (`digest.templates_dir`), read into memory for the
//! renderer and the locale tables, which do no file I/O themselves.

use std::path::Path;

use anyhow::Context as _;

use crate::config::LANGUAGES;
use crate::locale::{Locale, Templates};
use crate::render::Renderer;

/// Every file of `dir` the renderer or the locale tables can take; `None` without a
/// directory. A file that is absent keeps the built-in one.
pub fn read(dir: Option<&Path>) -> anyhow::Result<Option<Templates>> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    let locales = LANGUAGES.iter().map(|l| format!("locales/{l}.toml"));
    let names = crate::render::template_names()
        .map(str::to_string)
        .chain(locales);
    let mut templates = Templates {
        dir: dir.to_path_buf(),
        ..Templates::default()
    };
    for name in names {
        let path = dir.join(&name);
        if path.exists() {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("Cannot read template {}", path.display()))?;
            templates.files.insert(name, text);
        }
    }
    Ok(Some(templates))
}

/// The locale table for `language`, with the directory's override if it has one.
pub fn locale(language: &str, dir: Option<&Path>) -> anyhow::Result<Locale> {
    Locale::load(language, read(dir)?.as_ref())
}

/// The renderer for `language`, with the directory's templates where it has them.
pub fn renderer(language: &str, dir: Option<&Path>) -> anyhow::Result<Renderer> {
    Renderer::new(language, read(dir)?.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Digest;
    use crate::render::Format;

    #[test]
    fn a_templates_directory_overrides_what_it_has_and_names_the_file_it_cannot_use() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("locales")).unwrap();
        std::fs::write(dir.path().join("digest.md.j2"), "custom {{ date }}\n").unwrap();
        std::fs::write(
            dir.path().join("locales/en.toml"),
            "overview = \"The gist\"\n",
        )
        .unwrap();
        let templates = read(Some(dir.path())).unwrap().unwrap();
        assert_eq!(
            templates.files.keys().collect::<Vec<_>>(),
            ["digest.md.j2", "locales/en.toml"]
        );
        // A partial locale file keeps the built-in entries it does not name.
        let en = locale("en", Some(dir.path())).unwrap();
        assert_eq!(en.get("overview"), "The gist");
        assert_eq!(en.get("papers"), Locale::builtin("en").get("papers"));
        let digest: Digest = serde_json::from_value(serde_json::json!({
            "date": "2026-12-06", "language": "en", "generation_mode": "extractive",
            "window": {"start": "2026-12-05T08:00:00+08:00", "end": "2026-12-06T08:00:00+08:00"},
            "title": "t", "overview": "o", "key_changes": [], "papers": [], "other_updates": [],
            "watchlist": [], "source_counts": [], "failed_sources": []
        }))
        .unwrap();
        let md = renderer("en", Some(dir.path()))
            .unwrap()
            .render(&digest, Format::Md)
            .unwrap();
        assert_eq!(md, ["custom 2026-12-06"]);
        assert!(read(None).unwrap().is_none());

        std::fs::write(dir.path().join("locales/zh-CN.toml"), "overview = [").unwrap();
        let error = locale("zh-CN", Some(dir.path())).unwrap_err().to_string();
        assert!(
            error.contains("Locale file") && error.contains("locales/zh-CN.toml is invalid"),
            "{error}"
        );
    }
}

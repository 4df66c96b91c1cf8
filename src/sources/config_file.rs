//! Adding `[[sources]]` entries to the configuration file: appended as text, so the file's
//! comments and layout stay as the reader wrote them, then checked by loading the result
//! (the file is restored when it does not load).

use std::path::Path;

use anyhow::Context as _;

/// One source to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSource {
    pub name: String,
    /// A feed URL or a shorthand, as it will be written.
    pub url: String,
    pub kind: Option<String>,
    pub weight: f64,
    /// A comment line above the entry (where it came from, why it is there).
    pub comment: Option<String>,
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The `[[sources]]` block of one source.
pub fn block(s: &NewSource) -> String {
    let mut out = String::new();
    if let Some(c) = &s.comment {
        for line in c.lines() {
            out.push_str(&format!("# {line}\n"));
        }
    }
    out.push_str(&format!(
        "[[sources]]\nname = {}\nurl = {}\n",
        quoted(&s.name),
        quoted(&s.url)
    ));
    if let Some(k) = &s.kind {
        out.push_str(&format!("kind = {}\n", quoted(k)));
    }
    out.push_str(&format!("weight = {:?}\n", s.weight));
    out
}

/// Whether the file lists sources of its own (then they replace the built-in list).
fn has_sources(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("sources"))
}

/// Appends `sources` to the file at `path`. A file without `[[sources]]` gets the built-in
/// list first, so adding a source adds to the defaults instead of replacing them.
pub fn append(path: &Path, sources: &[NewSource]) -> anyhow::Result<()> {
    let original = std::fs::read_to_string(path).with_context(|| {
        format!(
            "Cannot read {}; `sources enable` and `sources import` write to the configuration file (pass --config PATH)",
            path.display()
        )
    })?;
    let mut text = original.clone();
    if !text.ends_with('\n') && !text.is_empty() {
        text.push('\n');
    }
    if !has_sources(&original) {
        text.push_str("\n# The built-in sources, written out by `kdigest sources` so the ones below add to them.\n");
        for s in crate::config::builtin_sources() {
            text.push('\n');
            text.push_str(&block(&NewSource {
                name: s.name,
                url: s.url,
                kind: s.kind,
                weight: s.weight,
                comment: None,
            }));
        }
    }
    for s in sources {
        text.push('\n');
        text.push_str(&block(s));
    }
    std::fs::write(path, &text).with_context(|| format!("Cannot write {}", path.display()))?;
    if let Err(error) = crate::config::Config::load(path) {
        std::fs::write(path, &original)
            .with_context(|| format!("Cannot restore {}", path.display()))?;
        return Err(anyhow::Error::new(error).context(format!(
            "The new sources would make {} invalid; it is unchanged",
            path.display()
        )));
    }
    Ok(())
}

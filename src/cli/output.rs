//! What `kdigest digest` and `demo` print with `--format`: the document formats of
//! `render`, then each channel's own payloads (from the channel registry: `telegram`,
//! `discord`, ...). Here, above both, so the renderer knows no channel.

use crate::channels::Channel;
use crate::model::Digest;
use crate::render::{Format, Renderer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Document(Format),
    Channel(Channel),
}

static OUTPUTS: std::sync::LazyLock<Vec<Output>> = std::sync::LazyLock::new(|| {
    let documents = Format::ALL.iter().map(|f| Output::Document(*f));
    let channels = Channel::ALL
        .iter()
        .filter(|c| c.format().is_some())
        .map(|c| Output::Channel(*c));
    documents.chain(channels).collect()
});

impl clap::ValueEnum for Output {
    fn value_variants<'a>() -> &'a [Self] {
        &OUTPUTS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

impl Output {
    pub fn all() -> &'static [Output] {
        &OUTPUTS
    }

    pub fn name(self) -> &'static str {
        match self {
            Output::Document(f) => f.name(),
            Output::Channel(c) => c.as_str(),
        }
    }

    /// File name for `--out DIR`; `{n}` is the message number for multi-message formats.
    pub fn file_name(self, n: usize, total: usize) -> String {
        match self {
            Output::Document(f) => f.file_name().to_string(),
            Output::Channel(c) => {
                let ext = c.format().unwrap_or("txt");
                if total > 1 {
                    format!("{}-{n}.{ext}", c.as_str())
                } else {
                    format!("{}.{ext}", c.as_str())
                }
            }
        }
    }

    /// The render: one document, or the channel's messages.
    pub fn render(self, renderer: &Renderer, digest: &Digest) -> anyhow::Result<Vec<String>> {
        match self {
            Output::Document(f) => renderer.render(digest, f),
            Output::Channel(c) => c.render(digest, renderer),
        }
    }
}

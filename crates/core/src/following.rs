//! What a reader follows: projects and phrases (`/follow triton`, `/follow "FlashAttention"`)
//! whose events reach them whatever their threshold and layers, marked. Pure.
//!
//! A phrase matches an event when it occurs, ignoring case, as whole words in the event's
//! title, its text in any language kdigest wrote it in, or its sources' names and links
//! (`github.com/triton-lang/triton` is about triton). "Whole words" keeps `cute` from matching
//! "execute" and `tvm` from matching "tvmjs"-less prose; phrases in scripts without spaces
//! (Chinese) match where they occur.

/// Most phrases one reader follows: enough for a reader's projects, few enough that a
/// plan over a million readers stays cheap.
pub const MAX_FOLLOWS: usize = 20;
/// Longest phrase, in characters.
pub const MAX_CHARS: usize = 60;

/// Why a phrase cannot be followed; said in English here (`Display`, for the command line
/// and the MCP tools), and in a reader's language by its locale key ([`Refusal::key`],
/// filled with `arg`, `max` and `n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nothing left once quotes and spaces are removed.
    Empty,
    /// Longer than [`MAX_CHARS`]; the phrase's start.
    TooLong(String),
    /// No letter or digit, or a control character.
    NoLetter(String),
    /// The reader follows [`MAX_FOLLOWS`] already.
    Full,
}

impl Refusal {
    /// The locale key: `follow_empty`, `follow_too_long`, `follow_no_letter`, `follow_full`.
    pub fn key(&self) -> &'static str {
        match self {
            Refusal::Empty => "follow_empty",
            Refusal::TooLong(_) => "follow_too_long",
            Refusal::NoLetter(_) => "follow_no_letter",
            Refusal::Full => "follow_full",
        }
    }

    /// The phrase (or its start) the refusal is about.
    pub fn arg(&self) -> &str {
        match self {
            Refusal::TooLong(p) | Refusal::NoLetter(p) => p,
            Refusal::Empty | Refusal::Full => "",
        }
    }

    /// The refusal in `t`'s language.
    pub fn say(&self, t: &crate::locale::Locale) -> String {
        t.fill(
            self.key(),
            &[
                ("arg", self.arg()),
                ("max", &MAX_CHARS.to_string()),
                ("n", &MAX_FOLLOWS.to_string()),
            ],
        )
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.say(&crate::locale::Locale::builtin("en")).fmt(f)
    }
}

/// A phrase as a reader typed it, made ready to store: quotes and surrounding space
/// removed, inner space collapsed.
pub fn normalize(typed: &str) -> Result<String, Refusal> {
    let trimmed = typed
        .trim()
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '“' | '”' | '‘' | '’' | '「' | '」'))
        .trim();
    let phrase = trimmed.split_whitespace().collect::<Vec<_>>().join(" ");
    if phrase.is_empty() {
        return Err(Refusal::Empty);
    }
    if phrase.chars().count() > MAX_CHARS {
        return Err(Refusal::TooLong(crate::text::truncate_chars(&phrase, 20)));
    }
    if phrase.chars().any(char::is_control) || !phrase.chars().any(char::is_alphanumeric) {
        return Err(Refusal::NoLetter(phrase));
    }
    Ok(phrase)
}

/// `follows` with `phrase` added (once, ignoring case); [`Refusal::Full`] when the list is
/// full.
pub fn add(follows: &[String], phrase: &str) -> Result<Vec<String>, Refusal> {
    let phrase = normalize(phrase)?;
    let mut out = follows.to_vec();
    if out
        .iter()
        .any(|f| f.to_lowercase() == phrase.to_lowercase())
    {
        return Ok(out);
    }
    if out.len() >= MAX_FOLLOWS {
        return Err(Refusal::Full);
    }
    out.push(phrase);
    Ok(out)
}

/// `follows` with each of `phrases` added in turn ([`add`]); the first refusal stops it.
pub fn add_all<'p>(
    follows: &[String],
    phrases: impl IntoIterator<Item = &'p str>,
) -> Result<Vec<String>, Refusal> {
    phrases
        .into_iter()
        .try_fold(follows.to_vec(), |out, phrase| add(&out, phrase))
}

/// `follows` without `phrase` (ignoring case and quotes); None when it was not followed.
pub fn remove(follows: &[String], phrase: &str) -> Option<Vec<String>> {
    let phrase = normalize(phrase).ok()?.to_lowercase();
    let out: Vec<String> = follows
        .iter()
        .filter(|f| f.to_lowercase() != phrase)
        .cloned()
        .collect();
    (out.len() < follows.len()).then_some(out)
}

/// `"triton", "FlashAttention"`: the phrases quoted, so one with spaces reads as one.
pub fn listed(follows: &[String]) -> String {
    follows
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first of `follows` that `texts` (an event's title, texts and sources' names and
/// links, as [`crate::model::DigestEvent::followable_text`] gives them) are about, as the
/// reader wrote it.
pub fn matched<'a, 't>(
    follows: &'a [String],
    texts: impl IntoIterator<Item = &'t str>,
) -> Option<&'a str> {
    if follows.is_empty() {
        return None;
    }
    let text = haystack(texts);
    follows
        .iter()
        .find(|f| mentions(&text, f))
        .map(String::as_str)
}

/// One digest edition's events made ready for followed phrases, once: each event's words as
/// one lower-case text, and the set of every whole word in them, so a one-word phrase (most
/// follows: `triton`, `cutlass`) is a set lookup and only a longer one reads the texts.
#[derive(Debug, Default)]
pub struct Index {
    texts: Vec<String>,
    words: std::collections::HashSet<String>,
}

impl Index {
    /// From each event's followable text (`DigestEvent::followable_text`).
    pub fn new<'t, E: IntoIterator<Item = &'t str>>(events: impl IntoIterator<Item = E>) -> Index {
        let texts: Vec<String> = events.into_iter().map(haystack).collect();
        let words = texts
            .iter()
            .flat_map(|t| t.split(|c: char| !joins(c)))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        Index { texts, words }
    }

    /// Some event of the edition is about `phrase` (as [`matched`] decides).
    pub fn mentions(&self, phrase: &str) -> bool {
        let phrase = phrase.to_lowercase();
        // Each word of a phrase that occurs is a whole word of the text (its ends are
        // checked, its inside is cut by the phrase's own spaces and marks): a phrase with a
        // word the edition lacks is answered without reading the texts.
        let mut words = phrase.split(|c: char| !joins(c)).filter(|w| !w.is_empty());
        if !words.all(|w| self.words.contains(w)) {
            return false;
        }
        // A phrase of one word is then found; others are read for.
        phrase.chars().all(joins) || self.texts.iter().any(|t| contains_words(t, &phrase))
    }

    /// `follows` without the phrases no event of the edition is about: those change nothing
    /// in what a reader receives that day.
    pub fn acting(&self, follows: &[String]) -> Vec<String> {
        follows
            .iter()
            .filter(|p| self.mentions(p))
            .cloned()
            .collect()
    }
}

/// `texts` made ready for [`mentions`]: lower case, one per line. Made once per event, it
/// answers any number of phrases.
fn haystack<'t>(texts: impl IntoIterator<Item = &'t str>) -> String {
    let mut text = String::new();
    for part in texts {
        text.push_str(&part.to_lowercase());
        text.push('\n');
    }
    text
}

/// `haystack` is about `phrase` (as [`matched`] decides).
fn mentions(haystack: &str, phrase: &str) -> bool {
    contains_words(haystack, &phrase.to_lowercase())
}

/// `phrase` occurs in `text` with no letter or digit joined to either end (both lower case).
/// Letters of scripts written without spaces (Chinese, Japanese) join nothing: a phrase in
/// them matches where it occurs.
fn contains_words(text: &str, phrase: &str) -> bool {
    let joined = |c: Option<char>| c.is_some_and(joins);
    let mut from = 0;
    while let Some(at) = text[from..].find(phrase) {
        let start = from + at;
        let end = start + phrase.len();
        let first = phrase.chars().next();
        let last = phrase.chars().next_back();
        // A boundary is needed only where the phrase itself ends in a letter or digit.
        let open = !joined(first) || !joined(text[..start].chars().next_back());
        let close = !joined(last) || !joined(text[end..].chars().next());
        if open && close {
            return true;
        }
        from = start + phrase.chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// A character that joins its neighbours into one word: a letter or digit of a script
/// written with spaces.
fn joins(c: char) -> bool {
    c.is_alphanumeric() && !crate::text::unspaced(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_match_whole_words_in_titles_text_and_links() {
        let follows = vec!["triton".to_string(), "FlashAttention".to_string()];
        let release = [
            "v3.6.0",
            "Faster warp specialization.",
            "https://github.com/triton-lang/triton/releases/tag/v3.6.0",
        ];
        assert_eq!(matched(&follows, release), Some("triton"));
        let paper = [
            "A new attention kernel",
            "Reaches 92% of flashattention-3 throughput.",
        ];
        assert_eq!(matched(&follows, paper), Some("FlashAttention"));
        let other = ["Tritonal execution", "execute faster"];
        assert_eq!(matched(&follows, other), None, "not a whole word");
        assert_eq!(
            matched(&["cute".to_string()], other),
            None,
            "cute is not in execute"
        );
        // Other scripts with spaces keep whole words; an accented word is one word.
        assert_eq!(matched(&["ядро".to_string()], ["новое ядрона"]), None);
        assert_eq!(
            matched(&["ядро".to_string()], ["новое ядро gpu"]),
            Some("ядро")
        );
        assert_eq!(matched(&["café".to_string()], ["caféine"]), None);
        // The index answers as `matched` does, by word or by reading the texts.
        let index = Index::new([
            vec!["Triton v3.6.0", "https://github.com/triton-lang/triton"],
            vec!["新的注意力内核融合方法", "FlashAttention-3 throughput"],
        ]);
        for (phrase, expected) in [
            ("Triton", true),
            ("lang", true),
            ("trit", false),
            ("注意力", true),
            ("flashattention-3", true),
            ("flashattention", true),
            ("attention", false),
            ("v3.6.0", true),
            ("v3.7.0", false),
            ("triton lang", false),
            ("triton-lang", true),
        ] {
            assert_eq!(index.mentions(phrase), expected, "{phrase}");
        }
        assert_eq!(index.acting(&["quiet".into(), "Triton".into()]), ["Triton"]);
        let zh = ["内核融合", "新的注意力内核融合方法"];
        assert_eq!(matched(&["注意力".to_string()], zh), Some("注意力"));
        assert_eq!(matched(&[], zh), None);
    }

    #[test]
    fn typed_phrases_are_cleaned_checked_and_kept_once() {
        assert_eq!(
            normalize("  \"Flash  Attention\" ").unwrap(),
            "Flash Attention"
        );
        assert_eq!(normalize("“triton”").unwrap(), "triton");
        assert_eq!(normalize("\"\""), Err(Refusal::Empty));
        assert!(
            normalize("!!!")
                .unwrap_err()
                .to_string()
                .contains("no letter")
        );
        assert!(
            normalize(&"x".repeat(61))
                .unwrap_err()
                .to_string()
                .contains("60")
        );
        let zh = crate::locale::Locale::builtin("zh-CN");
        assert!(normalize("!!!").unwrap_err().say(&zh).contains("不含"));
        let one = add(&[], "Triton").unwrap();
        assert_eq!(add(&one, "triton").unwrap(), one, "once, ignoring case");
        let full: Vec<String> = (0..MAX_FOLLOWS).map(|i| format!("p{i}")).collect();
        assert_eq!(add(&full, "one more"), Err(Refusal::Full));
        assert_eq!(remove(&one, "\"TRITON\""), Some(vec![]));
        assert_eq!(remove(&one, "cutlass"), None);
    }
}

//! Small text helpers shared by the pure stages: HTML to text, entity decoding, whitespace,
//! URL normalisation and length-bounded truncation. No I/O.

/// The allow-list feed HTML passes through first: structure, emphasis and http(s) links.
/// ammonia parses like a browser (html5ever), so malformed or hostile markup (unclosed
/// comments, `javascript:` links, event-handler attributes, `<script>` in odd places) is
/// resolved the way a browser would before the simple walk below reads it.
static SANITIZER: std::sync::LazyLock<ammonia::Builder<'static>> = std::sync::LazyLock::new(|| {
    let mut builder = ammonia::Builder::default();
    builder
        .tags(
            [
                "a",
                "p",
                "br",
                "div",
                "span",
                "li",
                "ul",
                "ol",
                "dl",
                "dt",
                "dd",
                "h1",
                "h2",
                "h3",
                "h4",
                "h5",
                "h6",
                "table",
                "tr",
                "td",
                "th",
                "pre",
                "code",
                "blockquote",
                "section",
                "article",
                "hr",
                "b",
                "i",
                "em",
                "strong",
                "sub",
                "sup",
            ]
            .into(),
        )
        .tag_attributes([("a", ["href"].into())].into())
        .generic_attributes(std::collections::HashSet::new())
        .url_schemes(["http", "https"].into())
        .link_rel(None)
        // Dropped with their contents. html5ever parses with scripting on, so noscript,
        // iframe, textarea and the like hold raw markup as text that would otherwise show up
        // as "<img src=...>" in the digest.
        .clean_content_tags(
            [
                "script", "style", "noscript", "iframe", "textarea", "title", "xmp", "noembed",
                "noframes", "template", "object", "svg", "math",
            ]
            .into(),
        );
    builder
});

/// Deepest element nesting handed to the HTML parser. Real feed HTML nests a dozen levels;
/// a hostile summary of 90,000 nested `<div>`s took html5ever about 45 s (its tree building
/// scans the open elements for every tag, quadratic in the depth).
pub const MAX_NESTING: usize = 64;

/// Elements that never have content, so never deepen the nesting.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Drops the tags (not the text) of elements nested deeper than `max`, in one linear pass,
/// so the parser after it sees at most `max` open elements. Only removes markup: what is
/// left still goes through the sanitiser, so nothing unsafe can come of it. Elements whose
/// content the sanitiser removes (scripts, styles) are kept at any depth for that reason.
pub fn bound_nesting(html: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let mut out = String::new();
    let mut depth = 0usize;
    // Opening tags dropped and not yet closed, counted by name (a count, not a stack, so
    // closing is O(1) however deep the input goes).
    let mut dropped: std::collections::HashMap<String, usize> = Default::default();
    let mut copied = 0;
    let mut rest_at = 0;
    while let Some(lt) = html[rest_at..].find('<').map(|i| rest_at + i) {
        let Some(gt) = html[lt..].find('>').map(|i| lt + i) else {
            break;
        };
        rest_at = gt + 1;
        let tag = &html[lt + 1..gt];
        if tag.starts_with('!') || tag.starts_with('?') {
            continue;
        }
        let (closing, name) = tag_name(tag);
        if name.is_empty() || VOID.contains(&name.as_str()) || tag.ends_with('/') {
            continue;
        }
        let keep_always = matches!(
            name.as_str(),
            "script" | "style" | "template" | "svg" | "math"
        );
        let drop = if closing {
            match dropped.get_mut(&name).filter(|n| **n > 0) {
                Some(n) => {
                    *n -= 1;
                    true
                }
                None => {
                    depth = depth.saturating_sub(1);
                    false
                }
            }
        } else if depth >= max && !keep_always {
            *dropped.entry(name).or_default() += 1;
            true
        } else {
            depth += 1;
            false
        };
        if drop {
            out.push_str(&html[copied..lt]);
            // A space keeps words apart where a block tag stood.
            out.push(' ');
            copied = gt + 1;
        }
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(html);
    }
    out.push_str(&html[copied..]);
    std::borrow::Cow::Owned(out)
}

/// Ends a script whose text starts at `start` of `out` (just after its '^' or '_'): an
/// empty one loses its mark; one of more than a signed word ("n+1", "-3 dB") goes in
/// parentheses so the reader sees where it ends.
fn close_script(out: &mut String, start: usize) {
    let text = &out[start..];
    if text.trim().is_empty() {
        out.truncate(start - 1);
        return;
    }
    let unsigned = text
        .trim()
        .trim_start_matches(['-', '+', '−'])
        .trim_start_matches("&minus;");
    let compound = unsigned.contains(|c: char| c.is_whitespace() || "+-*/,()=".contains(c));
    if compound {
        let inner = text.trim().to_string();
        out.truncate(start);
        out.push('(');
        out.push_str(&inner);
        out.push(')');
    }
}

/// Whether the text inside `<...>` closes an element, and the element's name in lower case.
fn tag_name(tag: &str) -> (bool, String) {
    let name = tag
        .trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    (tag.starts_with('/'), name)
}

/// Feed HTML reduced to what [`SANITIZER`] allows. Text without markup is left alone: the
/// parser costs time and would change nothing.
pub fn sanitize_html(html: &str) -> std::borrow::Cow<'_, str> {
    if html.contains('<') {
        let flat = bound_nesting(html, MAX_NESTING);
        std::borrow::Cow::Owned(SANITIZER.clean(&flat).to_string())
    } else {
        std::borrow::Cow::Borrowed(html)
    }
}

/// Plain text of an HTML fragment plus the `href`s of its links, in document order.
///
/// The fragment is sanitised first ([`sanitize_html`]), which drops comments, scripts, styles
/// and the like, so the walk below only meets allowed tags. Block elements become line breaks
/// so later sentence splitting sees list items and paragraphs as separate units.
pub fn html_to_text(html: &str) -> (String, Vec<String>) {
    let clean = sanitize_html(html);
    let html = clean.as_ref();
    let mut out = String::with_capacity(html.len());
    let mut links = Vec::new();
    let mut rest = html;
    // Open `<sup>`/`<sub>`: where their text starts in `out`, so the closing tag can wrap
    // a compound script in parentheses ("2^(n+1)") or drop a mark that got no text.
    let mut scripts: Vec<usize> = Vec::new();
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        rest = &rest[lt..];
        let Some(gt) = rest.find('>') else {
            // A stray '<' with no tag after it is text.
            out.push_str("&lt;");
            rest = &rest[1..];
            continue;
        };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let (closing, name) = tag_name(tag);
        match name.as_str() {
            "a" if !closing => {
                if let Some(href) = attribute(tag, "href") {
                    links.push(decode_entities(&href));
                }
            }
            // Scripts keep their meaning as text: 2<sup>26</sup> is "2^26", not "226";
            // H<sub>2</sub>O is "H_2O".
            "sup" | "sub" if !closing => {
                out.push(if name == "sup" { '^' } else { '_' });
                scripts.push(out.len());
            }
            "sup" | "sub" => {
                if let Some(start) = scripts.pop() {
                    close_script(&mut out, start);
                }
            }
            // List items keep a bullet so sentence splitting can tell them from headings.
            "li" if !closing => out.push_str("\n• "),
            "br" | "p" | "div" | "li" | "ul" | "ol" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6"
            | "tr" | "pre" | "blockquote" | "table" | "section" | "article" | "hr" | "dt"
            | "dd" => out.push('\n'),
            _ => {}
        }
    }
    out.push_str(rest);
    (tidy_lines(&decode_entities(&out)), links)
}

/// Value of `name="..."` (or single-quoted, or bare) inside a tag.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(name) {
        let start = from + pos;
        from = start + name.len();
        let before_ok = start == 0 || lower.as_bytes()[start - 1].is_ascii_whitespace();
        let after = lower[from..].trim_start();
        if !before_ok || !after.starts_with('=') {
            continue;
        }
        let value_start = tag.len() - after.len() + 1;
        let value = tag[value_start..].trim_start();
        return Some(match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or("").to_string(),
            _ => value
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or("")
                .to_string(),
        });
    }
    None
}

/// Decodes the HTML entities that occur in feeds: numeric ones and the common named ones.
/// Unknown entities are left as they are.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest[1..]
            .find(|c: char| c == ';' || c == '&' || c.is_whitespace())
            .map(|i| i + 1);
        let decoded = end
            .filter(|&e| rest.as_bytes()[e] == b';' && e <= 12)
            .and_then(|e| entity(&rest[1..e]).map(|c| (c, e + 1)));
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| *c != '\0');
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "times" => '×',
        "middot" => '·',
        "bull" => '•',
        "deg" => '°',
        "micro" => 'µ',
        "le" => '≤',
        "ge" => '≥',
        "rarr" => '→',
        _ => return None,
    })
}

/// Collapses runs of whitespace inside each line, trims lines and drops empty ones.
/// Works on bytes (ASCII whitespace only; `&nbsp;` is already a space by now): it runs over
/// every item's text.
pub fn tidy_lines(s: &str) -> String {
    const fn blank(b: u8) -> bool {
        matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
    }
    let bytes = s.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let (mut space, mut newline) = (false, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            newline = !out.is_empty();
            space = false;
            i += 1;
        } else if blank(b) {
            space = !out.is_empty();
            i += 1;
        } else {
            if newline {
                out.push(b'\n');
            } else if space {
                out.push(b' ');
            }
            newline = false;
            space = false;
            let run = bytes[i..]
                .iter()
                .take_while(|&&b| b != b'\n' && !blank(b))
                .count();
            out.extend_from_slice(&bytes[i..i + run]);
            i += run;
        }
    }
    // Only ASCII bytes were removed or inserted, so the result is still UTF-8.
    String::from_utf8(out).expect("whitespace edits keep UTF-8 valid")
}

/// A character of a script written without spaces between words.
pub fn unspaced(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30ff}'   // Hiragana, Katakana
        | '\u{3400}'..='\u{4dbf}' // CJK Extension A
        | '\u{4e00}'..='\u{9fff}' // CJK Unified Ideographs
        | '\u{f900}'..='\u{faff}' // CJK Compatibility Ideographs
        | '\u{20000}'..='\u{2ffff}')
}

/// Where `text` holds `word` as a whole word (case matters).
pub fn whole_words<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(word)
        .map(|(at, _)| at)
        .filter(move |&at| {
            let end = at + word.len();
            !text[..at].ends_with(|c: char| c.is_alphanumeric())
                && !text[end..].starts_with(|c: char| c.is_alphanumeric())
        })
}

/// Whether `text` holds `word` as a whole word (case matters).
pub fn has_word(text: &str, word: &str) -> bool {
    whole_words(text, word).next().is_some()
}

/// Words written like names that name no one thing: a title's "LLM" or "GPU" is not what
/// it is about, and two texts that both write "LLM" are not about the same thing.
pub const GENERIC_ACRONYMS: &[&str] = &[
    "AI", "ML", "GPU", "GPUs", "CPU", "CPUs", "LLM", "LLMs", "HPC", "DNN", "DNNs", "DL", "API",
    "APIs", "FAQ", "AMD", "NVIDIA",
];

/// Whether `text` writes the capitalised `word` as a name: never in lower case ("Support",
/// "Performance" are words that a heading or a Title Case title capitalises), and
/// capitalised at least once inside a sentence, after a word or a comma ("full Google Gemma
/// 4 support", "the NVIDIA Blackwell backends"), not only as a line's or a sentence's first
/// word or a list item's after its bullet.
pub fn written_as_name(word: &str, text: &str) -> bool {
    word.starts_with(|c: char| c.is_uppercase())
        && !has_word(text, &word.to_lowercase())
        && whole_words(text, word).any(|at| {
            let before = &text[..at];
            before.ends_with(' ')
                && before
                    .trim_end_matches(' ')
                    .ends_with(|c: char| c.is_alphanumeric() || c == ',')
        })
}

/// The TeX an arXiv abstract writes inline, as a reader reads it: "\textbf{2.72}$\times$"
/// -> "2.72×", "$10^{6}$" -> "10^6", "30\%" -> "30%", "\leq" -> "≤". Only formatting
/// commands and symbols this field's abstracts use are read; any other command stays as
/// written. Dollar signs go only around a short formula without spaces ("$n$", "$\times$"),
/// so "$2 and $3" keeps its prices.
pub fn detex(s: &str) -> std::borrow::Cow<'_, str> {
    use std::sync::LazyLock;
    static FORMAT: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(
            r"\\(?:textbf|textit|textrm|texttt|text|emph|mathrm|mathbf|mathit|mathsf|mathtt)\{([^{}]*)\}",
        )
        .expect("valid regex")
    });
    static COMMAND: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"\\([A-Za-z]+|%)").expect("valid regex"));
    static SCRIPT: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"([\^_])\{([^{}\s]{1,12})\}").expect("valid regex"));
    static INLINE: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"\$([^$\s]{1,30})\$").expect("valid regex"));
    // A figure with its unit, spaced: "$4.75 \times$" (Pruner, 2402.02361).
    static FIGURE: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"\$(\d[\d.,]*)\s?(×|%)\s?\$").expect("valid regex"));
    if !s.contains(['\\', '$']) {
        return std::borrow::Cow::Borrowed(s);
    }
    let s = FORMAT.replace_all(s, "$1");
    let s = COMMAND.replace_all(&s, |c: &regex::Captures| {
        match &c[1] {
            "times" => "×",
            "%" => "%",
            "leq" | "le" => "≤",
            "geq" | "ge" => "≥",
            "approx" => "≈",
            "sim" => "~",
            "to" | "rightarrow" => "→",
            "cdot" => "·",
            "pm" => "±",
            _ => return c[0].to_string(),
        }
        .to_string()
    });
    let s = SCRIPT.replace_all(&s, "$1$2");
    let s = FIGURE.replace_all(&s, "$1$2");
    std::borrow::Cow::Owned(INLINE.replace_all(&s, "$1").into_owned())
}

/// All whitespace (newlines included) collapsed to single spaces.
pub fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Canonical form of a link for identity: lower-case host (the url crate does that), no
/// fragment, no `utm_*` parameters, no trailing slash. `None` when it is not an absolute URL.
pub fn normalize_url(raw: &str) -> Option<String> {
    let mut url = url::Url::parse(raw.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url.set_fragment(None);
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| !k.to_ascii_lowercase().starts_with("utm_"))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    let mut s = url.to_string();
    if url.path().len() > 1 && url.path().ends_with('/') && url.query().is_none() {
        s.pop();
    }
    Some(s)
}

/// Cuts `s` to at most `max` characters at a word boundary and marks the cut with '…'.
pub fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let budget = max.saturating_sub(1);
    let cut: String = s.chars().take(budget).collect();
    // Prefer a word boundary unless that would throw away most of the text (e.g. CJK).
    let trimmed = match cut.rfind(char::is_whitespace) {
        Some(i) if i > cut.len() / 2 => cut[..i].trim_end(),
        _ => cut.as_str(),
    };
    format!("{trimmed}…")
}

/// [`truncate_chars`] for quotes: never inside a parenthesis the cut would leave open (one
/// that opened in the second half of the room): "… decode-shaped problems (M…" becomes
/// "… decode-shaped problems…".
pub fn truncate_outside_parens(s: &str, max: usize) -> String {
    let cut = truncate_chars(s, max);
    let Some(kept) = cut.strip_suffix('…') else {
        return cut;
    };
    let mut depth = 0_i32;
    let mut open_at = None;
    for (i, c) in kept.char_indices() {
        match c {
            '(' => {
                if depth == 0 {
                    open_at = Some(i);
                }
                depth += 1;
            }
            ')' => depth = (depth - 1).max(0),
            _ => {}
        }
    }
    match open_at {
        Some(j) if depth > 0 && j >= kept.len() / 2 => format!("{}…", kept[..j].trim_end()),
        _ => cut,
    }
}

/// Escapes Markdown syntax in untrusted text (Markdown renders and Discord) so a feed title
/// cannot inject links, emphasis or HTML. Brackets are escaped, so parentheses cannot form a
/// link and stay as they are (readable); `#` only matters at the start of a line.
pub fn markdown_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut line_start = true;
    for c in value.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~'
        ) || (c == '#' && line_start)
        {
            out.push('\\');
        }
        out.push(c);
        line_start = c == '\n' || (line_start && c == ' ');
    }
    out
}

/// A URL safe inside Markdown link parentheses.
pub fn markdown_url(value: &str) -> String {
    value
        .replace('(', "%28")
        .replace(')', "%29")
        .replace(' ', "%20")
        .replace('<', "%3C")
        .replace('>', "%3E")
}

#[cfg(test)]
mod tests {
    #[test]
    fn inline_tex_reads_as_text_and_prices_keep_their_dollars() {
        for (tex, text) in [
            (
                r"the highest averaged median speedup of \textbf{2.72}$\times$ over baseline",
                "the highest averaged median speedup of 2.72× over baseline",
            ),
            (
                r"speedups of 1.5-2.0$\times$ with FP16",
                "speedups of 1.5-2.0× with FP16",
            ),
            (
                r"cuts memory by 30\% for $n \leq 4$",
                "cuts memory by 30% for $n ≤ 4$",
            ),
            (r"a pool of $10^{6}$ tasks", "a pool of 10^6 tasks"),
            (
                r"an average speedup of $4.75 \times$ and 4.05$\times$",
                "an average speedup of 4.75× and 4.05×",
            ),
            // One formula's closing dollar and the next one's opening are no formula.
            (r"within $k=8$ 12% $\pm$ 3%", "within k=8 12% ± 3%"),
            // Other commands stay as written.
            (
                r"$\mathcal{O}(n)$ and \left( x \right)",
                r"\mathcal{O}(n) and \left( x \right)",
            ),
            (
                "GPUs at $2 an hour and $3 for H100s",
                "GPUs at $2 an hour and $3 for H100s",
            ),
        ] {
            assert_eq!(detex(tex), text, "{tex}");
        }
        assert!(matches!(detex("plain text"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn deep_nesting_is_flattened_before_the_parser_and_the_text_survives() {
        use super::*;
        let deep = format!(
            "{}Triton kernel <b>fast</b>{}<p>after</p>",
            "<div>".repeat(30_000),
            "</div>".repeat(30_000)
        );
        let flat = bound_nesting(&deep, MAX_NESTING);
        assert_eq!(flat.matches("<div>").count(), MAX_NESTING);
        assert_eq!(flat.matches("</div>").count(), MAX_NESTING);
        // The <b> is at depth 30,000 too: its tags go, its word stays.
        assert!(
            flat.contains("Triton kernel  fast "),
            "{}",
            &flat[flat.len() - 400..]
        );
        let (text, _) = html_to_text(&deep);
        assert!(text.contains("Triton kernel fast"), "{text}");
        assert!(text.ends_with("after"), "{text}");
        // Ordinary HTML is left as it is, byte for byte.
        let normal = "<p>a <a href=\"https://x.org\">b</a><br/>c</p><!-- x -->";
        assert!(matches!(
            bound_nesting(normal, MAX_NESTING),
            std::borrow::Cow::Borrowed(_)
        ));
        // A script deep down is still removed with its content by the sanitiser.
        let script = format!("{}<script>alert(1)</script>ok", "<span>".repeat(100));
        let (text, _) = html_to_text(&script);
        assert_eq!(text, "ok");
    }

    use super::*;

    #[test]
    fn html_becomes_lines_of_text_with_links() {
        let html = r#"<p>Fast &amp; <b>small</b>.</p><ul><li>One</li><li><a href="https://arxiv.org/abs/2610.1?a=1&amp;b=2">paper</a></li></ul><script>x<y</script>tail &#8217; &#x1F600; &bogus;"#;
        let (text, links) = html_to_text(html);
        assert_eq!(text, "Fast & small.\n• One\n• paper\ntail ’ 😀 &bogus;");
        assert_eq!(links, vec!["https://arxiv.org/abs/2610.1?a=1&b=2"]);
    }

    #[test]
    fn scripts_keep_numbers_apart_from_their_base() {
        let text = |html: &str| html_to_text(html).0;
        assert_eq!(
            text("<p>A table of 2<sup>26</sup> entries.</p>"),
            "A table of 2^26 entries."
        );
        assert_eq!(text("an error of 10<sup>-3</sup>"), "an error of 10^-3");
        assert_eq!(
            text("an error of 10<sup>&minus;3</sup>"),
            "an error of 10^−3"
        );
        assert_eq!(text("2<sup>n+1</sup> slots"), "2^(n+1) slots");
        assert_eq!(text("H<sub>2</sub>O and x<sub>i</sub>"), "H_2O and x_i");
        assert_eq!(text("a<sup></sup>b"), "ab");
    }

    #[test]
    fn markdown_escape_defuses_links_and_headings_but_keeps_prose_readable() {
        assert_eq!(
            markdown_escape("[x](javascript:alert(1))"),
            "\\[x\\](javascript:alert(1))"
        );
        assert_eq!(
            markdown_escape("# not a heading, issue #12"),
            "\\# not a heading, issue #12"
        );
        assert_eq!(markdown_escape("a_b *c* <b>"), "a\\_b \\*c\\* \\<b\\>");
    }

    #[test]
    fn lines_are_tidied() {
        assert_eq!(tidy_lines("  a \t b \r\n\n  \n c  d\n"), "a b\nc d");
        assert_eq!(tidy_lines("内核 \n  编译"), "内核\n编译");
    }

    #[test]
    fn hostile_markup_leaves_no_script_handler_or_javascript_link() {
        let html = r#"<noscript><img src="lazy.jpg"></noscript><p onclick="steal()">Hi<img src=x onerror=alert(1)></p><a href="javascript:alert(1)">bad</a> <a href="https://ok.example/x">good</a><!--<script>alert(2)</script>--><svg><script>alert(3)</script></svg><style>p{}</style>"#;
        let clean = sanitize_html(html);
        for needle in [
            "onclick",
            "onerror",
            "javascript:",
            "<script",
            "<img",
            "<svg",
            "alert",
        ] {
            assert!(!clean.contains(needle), "{needle} in {clean}");
        }
        let (text, links) = html_to_text(html);
        assert_eq!(text, "Hi\nbad good");
        assert_eq!(links, ["https://ok.example/x"]);
    }

    #[test]
    fn stray_angle_bracket_is_kept_as_text() {
        assert_eq!(html_to_text("a < b and c").0, "a < b and c");
    }

    #[test]
    fn urls_are_normalised() {
        assert_eq!(
            normalize_url(
                "https://Developer.NVIDIA.com/blog/post/?utm_source=rss&utm_medium=x#top"
            )
            .unwrap(),
            "https://developer.nvidia.com/blog/post"
        );
        assert_eq!(
            normalize_url("https://x.org/a?id=3&utm_campaign=q").unwrap(),
            "https://x.org/a?id=3"
        );
        assert_eq!(normalize_url("https://x.org/").unwrap(), "https://x.org/");
        assert!(normalize_url("/relative").is_none());
        assert!(normalize_url("mailto:a@b.c").is_none());
    }

    #[test]
    fn truncation_marks_the_cut_at_a_word_boundary() {
        assert_eq!(truncate_chars("alpha beta gamma", 12), "alpha beta…");
        assert_eq!(truncate_chars("short", 12), "short");
        assert_eq!(truncate_chars("一二三四五六", 4), "一二三…");
    }
}

#[cfg(test)]
mod quote_cut_tests {
    use super::truncate_outside_parens;

    #[test]
    fn a_quote_is_never_cut_inside_a_parenthesis() {
        let s =
            "Up to 1.6x over cuBLAS on FP4 GEMM for decode-shaped problems (M up to 64) and more.";
        assert_eq!(
            truncate_outside_parens(s, 70),
            "Up to 1.6x over cuBLAS on FP4 GEMM for decode-shaped problems…"
        );
        // A parenthesis closed before the cut stays; one opened early is not a reason to
        // throw most of the text away.
        let s = "Compile time is 40% lower (4.7 s to 2.8 s), and the tutorial is up to 3.1x faster than before";
        assert_eq!(
            truncate_outside_parens(s, 80),
            "Compile time is 40% lower (4.7 s to 2.8 s), and the tutorial is up to 3.1x…"
        );
        assert_eq!(truncate_outside_parens("short.", 70), "short.");
    }
}

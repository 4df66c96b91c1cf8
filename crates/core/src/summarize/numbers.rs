//! Are the numbers in an LLM reply in its sources? Pure.
//!
//! A reply may write a source's figures differently and still be faithful:
//! - in Chinese numerals, with 万/亿 and 倍/成 ("四百倍", "1.5万", "三成", "百分之三十");
//! - a version shorter than the tag ("3.9" for "3.9.0");
//! - a figure derived from two source figures: their difference ("24.3 个百分点" from 91.9 and
//!   67.6), their ratio ("2.1x"), or one as a percentage of the other ("80%" for "8 of 10"),
//!   equal at the precision the reply writes.
//!
//! Anything else is invented and refuses the reply.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

static ARABIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d+(?:,\d{3})*(?:\.\d+)*(?:\s?(万|亿))?(\s?(?:%|％|x\b|×|倍|times\b))?")
        .expect("valid regex")
});

/// A power as text gives it: "2^26", "10^-3" (`text::html_to_text` writes `<sup>` so).
static POWER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\d+(?:\.\d+)?)\s?\^\s?\(?([-−]?\d+)\)?").expect("valid regex"));

/// Runs of Chinese numeral characters (with 百分之 for percentages).
static CHINESE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(百分之)?([零〇一二两三四五六七八九十百千万亿点]+)(倍|成)?").expect("valid regex")
});

/// Words made of numeral characters that are not numbers ("very", "must", "in case").
const NOT_NUMBERS: &[&str] = &[
    "十分", "千万", "万一", "一一", "一些", "一起", "一般", "一直", "一致", "一定", "一旦",
];

/// What a stated number is: a plain figure, a percentage or a multiple ("3x", "四倍").
/// Percentages may be one source figure as a share of another; multiples their ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    Percent,
    Multiple,
}

fn kind_of(suffix: Option<&str>) -> Kind {
    match suffix.map(str::trim) {
        Some("%" | "％" | "成") => Kind::Percent,
        Some("x" | "×" | "倍" | "times") => Kind::Multiple,
        _ => Kind::Plain,
    }
}

/// Numbers a text states (thousands separators removed), with their kind; Chinese numerals
/// and 万/亿 multiples are converted.
pub fn stated(text: &str) -> Vec<(String, Kind)> {
    let mut out = Vec::new();
    // Powers first, as one figure each ("2^26" and its value 67108864), and blanked so
    // base and exponent are not read as figures of their own: "226" is not "2^26".
    let text = superscripts_as_powers(text);
    let mut rest = text.clone();
    for m in POWER.captures_iter(&text) {
        let exponent = m[2].replace('−', "-");
        out.push((format!("{}^{exponent}", &m[1]), Kind::Plain));
        if let (Ok(base), Ok(e)) = (m[1].parse::<f64>(), exponent.parse::<i32>()) {
            let value = base.powi(e);
            // format_number writes values in this range without an exponent.
            if (1e-12..1e15).contains(&value.abs()) {
                out.push((format_number(value), Kind::Plain));
            }
        }
        let span = m.get(0).expect("whole match");
        rest.replace_range(span.range(), &" ".repeat(span.len()));
    }
    let text = rest.as_str();
    for m in ARABIC.captures_iter(text) {
        let digits = m.get(0).map_or("", |w| w.as_str());
        let digits: String = digits
            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .next()
            .unwrap_or("")
            .replace(',', "");
        let digits = digits.trim_end_matches('.').to_string();
        let kind = kind_of(m.get(2).map(|u| u.as_str()));
        match m.get(1).map(|u| u.as_str()) {
            // "1.2万" states 12000; 1.2 alone is not a claim.
            Some(unit) => {
                if let Ok(v) = digits.parse::<f64>() {
                    let scale = if unit == "万" { 1e4 } else { 1e8 };
                    out.push((format_number(v * scale), kind));
                }
            }
            None => out.push((digits, kind)),
        }
    }
    for m in CHINESE.captures_iter(text) {
        let run = &m[2];
        let percent = m.get(1).is_some();
        let suffix = m.get(3).map(|s| s.as_str());
        // A lone numeral character is a word ("一种", "三个后端") unless 倍 or 成 makes it
        // a figure; so are the words above.
        let lone = run.chars().count() == 1;
        if (lone && suffix.is_none() && !percent) || NOT_NUMBERS.iter().any(|w| m[0].contains(w)) {
            continue;
        }
        let Some(mut v) = chinese_value(run) else {
            continue;
        };
        if suffix == Some("成") {
            v *= 10.0;
        }
        let kind = if percent {
            Kind::Percent
        } else {
            kind_of(suffix)
        };
        out.push((format_number(v), kind));
    }
    out
}

/// "2²⁶" written as "2^26", so both spellings state the same figure.
fn superscripts_as_powers(text: &str) -> String {
    const SUPERSCRIPTS: &str = "⁰¹²³⁴⁵⁶⁷⁸⁹";
    let mut out = String::with_capacity(text.len());
    let mut in_script = false;
    for c in text.chars() {
        let digit = SUPERSCRIPTS.chars().position(|s| s == c);
        if digit.is_some() || c == '⁻' {
            if !in_script {
                out.push('^');
                in_script = true;
            }
            match digit {
                Some(d) => out.push(char::from(b'0' + d as u8)),
                None => out.push('-'),
            }
        } else {
            in_script = false;
            out.push(c);
        }
    }
    out
}

/// The value of a Chinese numeral ("四百" 400, "一万二千" 12000, "三点五" 3.5, "两" 2).
fn chinese_value(run: &str) -> Option<f64> {
    let (int_part, frac_part) = match run.split_once('点') {
        Some((i, f)) => (i, Some(f)),
        None => (run, None),
    };
    let mut total = 0.0;
    let mut section = 0.0;
    let mut digit: Option<f64> = None;
    for c in int_part.chars() {
        match c {
            '零' | '〇' => digit = Some(0.0),
            '一' => digit = Some(1.0),
            '二' | '两' => digit = Some(2.0),
            '三' => digit = Some(3.0),
            '四' => digit = Some(4.0),
            '五' => digit = Some(5.0),
            '六' => digit = Some(6.0),
            '七' => digit = Some(7.0),
            '八' => digit = Some(8.0),
            '九' => digit = Some(9.0),
            '十' | '百' | '千' => {
                let unit = match c {
                    '十' => 10.0,
                    '百' => 100.0,
                    _ => 1000.0,
                };
                section += digit.take().unwrap_or(1.0) * unit;
            }
            '万' | '亿' => {
                let unit = if c == '万' { 1e4 } else { 1e8 };
                section += digit.take().unwrap_or(0.0);
                total += section.max(1.0) * unit;
                section = 0.0;
            }
            _ => return None,
        }
    }
    let mut value = total + section + digit.unwrap_or(0.0);
    if let Some(frac) = frac_part {
        let mut scale = 0.1;
        for c in frac.chars() {
            let d = chinese_value(&c.to_string())?;
            value += d * scale;
            scale /= 10.0;
        }
    }
    Some(value)
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The numbers a reply states that its sources do not support, in order.
pub fn unsupported(reply: &str, source: &str) -> Vec<String> {
    let known: BTreeSet<String> = stated(source).into_iter().map(|(n, _)| n).collect();
    let values: Vec<f64> = known
        .iter()
        .filter_map(|k| k.parse::<f64>().ok())
        .take(80)
        .collect();
    stated(reply)
        .into_iter()
        .filter(|(n, kind)| {
            !known.contains(n) && !shorter_version(n, &known) && !derived(n, *kind, &values)
        })
        .map(|(n, _)| n)
        .collect()
}

/// "3.9" for a source's "3.9.0" (or "3.9.0-rc1"): the same version written shorter.
fn shorter_version(n: &str, known: &BTreeSet<String>) -> bool {
    n.contains('.')
        && known
            .iter()
            .any(|k| k.matches('.').count() >= 2 && k.starts_with(&format!("{n}.")))
}

/// Equal, at the precision `n` is written with, to the difference of two source figures,
/// or (for a percentage) one as a share of the other, or (for a multiple) their ratio.
fn derived(n: &str, kind: Kind, values: &[f64]) -> bool {
    let Ok(target) = n.parse::<f64>() else {
        return false;
    };
    let decimals = n.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
    let scale = 10f64.powi(decimals);
    let same = |v: f64| v.is_finite() && (v * scale).round() == (target * scale).round();
    values.iter().enumerate().any(|(i, a)| {
        values.iter().enumerate().any(|(j, b)| {
            let ratio = if *b == 0.0 { f64::NAN } else { a / b };
            i != j
                && (same(a - b)
                    || (kind == Kind::Percent && same(ratio * 100.0))
                    || (kind == Kind::Multiple && same(ratio)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "Triton 3.9.0 is out. Batched MMAv2 dot is up to 40x faster. The pass rate rose from 67.6% to 91.9%. 8 of 10 kernels compiled. Throughput reached 12,000 tokens/s.";

    fn values(text: &str) -> Vec<String> {
        stated(text).into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn chinese_numerals_are_read_as_numbers() {
        assert_eq!(stated("提速四百倍"), [("400".to_string(), Kind::Multiple)]);
        assert_eq!(values("提速四十倍"), ["40"]);
        assert_eq!(values("两倍"), ["2"]);
        assert_eq!(stated("三成"), [("30".to_string(), Kind::Percent)]);
        assert_eq!(stated("百分之三十"), [("30".to_string(), Kind::Percent)]);
        assert_eq!(values("一万二千"), ["12000"]);
        assert_eq!(values("1.2万 tokens/s"), ["12000"]);
        assert_eq!(values("三点五倍"), ["3.5"]);
        assert_eq!(
            stated("1.9x and 12,000 tokens"),
            [
                ("1.9".to_string(), Kind::Multiple),
                ("12000".to_string(), Kind::Plain)
            ]
        );
        // Words, not numbers.
        assert!(stated("一种十分重要的方法，进一步统一了三个后端").is_empty());
    }

    #[test]
    fn faithful_renderings_pass() {
        for reply in [
            "Triton 3.9 发布，批量 MMAv2 dot 最高提速四十倍",
            "通过率提升 24.3 个百分点，从 67.6% 到 91.9%",
            "80% 的内核通过编译",
            "吞吐达到 1.2万 tokens/s",
            "8 of 10 kernels",
        ] {
            assert_eq!(unsupported(reply, SOURCE), Vec::<String>::new(), "{reply}");
        }
    }

    #[test]
    fn powers_are_figures_of_their_own() {
        let source = "A table of 2^26 entries and an error below 10^-3.";
        assert_eq!(values("2^26"), ["2^26", "67108864"]);
        assert_eq!(values("10^-3"), ["10^-3", "0.001"]);
        for reply in [
            "表大小为 2^26",
            "2²⁶ 个条目",
            "67,108,864 entries",
            "误差低于 10^-3",
        ] {
            assert_eq!(unsupported(reply, source), Vec::<String>::new(), "{reply}");
        }
        // The figure the HTML bug made of 2<sup>26</sup>: refused.
        assert_eq!(unsupported("226 entries", source), ["226"]);
    }

    #[test]
    fn invented_numbers_are_refused() {
        assert_eq!(unsupported("提速四百倍", SOURCE), ["400"]);
        assert_eq!(unsupported("up to 75x faster", SOURCE), ["75"]);
        assert_eq!(unsupported("Triton 3.8 发布", SOURCE), ["3.8"]);
        assert_eq!(unsupported("通过率提升 25 个百分点", SOURCE), ["25"]);
        // 400 is 40 / 10 × 100, but "四百倍" is a multiple, not a percentage: refused above.
        // A multiple may be the ratio of two figures.
        assert_eq!(
            unsupported("提速 4 倍", SOURCE),
            Vec::<String>::new(),
            "40 / 10"
        );
    }
}

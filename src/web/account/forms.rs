//! The account forms: what a form sends, its checks, the page language and the client key
//! sign-up limits count by.

use std::collections::BTreeSet;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::*;
use crate::model::{Filter, Score};

pub(in crate::web) use crate::web::client_key;

/// An account page: never stored by caches (it can show an address).
pub(in crate::web) fn html(status: StatusCode, body: String) -> Response {
    let mut response = crate::web::html(status, body);
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

pub(in crate::web) fn failure(error: anyhow::Error) -> Response {
    tracing::error!(message = "Account page failed", error = %format!("{error:#}"));
    StatusCode::SERVICE_UNAVAILABLE.into_response()
}

/// What a settings form sends; `layers` repeats, one per ticked box.
#[derive(Default)]
pub(in crate::web) struct Fields {
    pub(in crate::web) email: String,
    pub(in crate::web) layers: Vec<String>,
    pub(in crate::web) min_score: Option<String>,
    pub(in crate::web) language: Option<String>,
    /// The team-chat form: the robot's URL and keyword; the code form: its token and code.
    pub(in crate::web) robot: String,
    pub(in crate::web) keyword: String,
    pub(in crate::web) token: String,
    pub(in crate::web) code: String,
    /// The preferences form's delivery time and zone.
    pub(in crate::web) at: Option<String>,
    pub(in crate::web) tz: Option<String>,
    /// The preferences form's cadence kind and roll-up day.
    pub(in crate::web) cadence: Option<String>,
    pub(in crate::web) cadence_day: Option<String>,
    /// The preferences form has the boost checkbox (`boost_field`), and it is ticked.
    pub(in crate::web) boost: Option<bool>,
    /// The preferences form's followed phrases, one per line.
    pub(in crate::web) follows: Option<String>,
}

/// The forms post `application/x-www-form-urlencoded`; anything else (text/plain from a
/// cross-site form, JSON) is refused before it is read.
pub(in crate::web) fn not_a_form(headers: &HeaderMap) -> Option<Response> {
    let form = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    (!form).then(|| {
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Send the form as application/x-www-form-urlencoded\n",
        )
            .into_response()
    })
}

pub(in crate::web) fn parse_fields(body: &[u8]) -> Fields {
    let mut fields = Fields::default();
    for (key, value) in url::form_urlencoded::parse(body) {
        match key.as_ref() {
            "email" => fields.email = value.trim().to_string(),
            "layers" => fields.layers.push(value.into_owned()),
            "min_score" => fields.min_score = Some(value.trim().to_string()),
            "language" => fields.language = Some(value.into_owned()),
            "robot" => fields.robot = value.trim().to_string(),
            "keyword" => fields.keyword = value.trim().to_string(),
            "token" => fields.token = value.trim().to_string(),
            "code" => fields.code = value.trim().to_string(),
            "at" => fields.at = Some(value.trim().to_string()),
            "tz" => fields.tz = Some(value.trim().to_string()),
            "cadence" => fields.cadence = Some(value.trim().to_string()),
            "cadence_day" => fields.cadence_day = Some(value.trim().to_string()),
            "boost_field" => fields.boost = Some(fields.boost.unwrap_or(false)),
            "boost" => fields.boost = Some(value == "on"),
            "follows" => fields.follows = Some(value.into_owned()),
            _ => {}
        }
    }
    fields
}

/// The followed phrases a form gives, one per line (crate::following checks each); `None`
/// when it has no such field (an older form).
pub(in crate::web) fn form_follows(
    fields: &Fields,
) -> Result<Option<Vec<String>>, crate::following::Refusal> {
    let Some(text) = fields.follows.as_deref() else {
        return Ok(None);
    };
    let lines = text.lines().filter(|l| !l.trim().is_empty());
    crate::following::add_all(&[], lines).map(Some)
}

/// The cadence a form gives; `None` when it has no cadence field (an older form).
pub(in crate::web) fn form_cadence(
    fields: &Fields,
) -> Result<Option<crate::subscriber::Cadence>, String> {
    let Some(kind) = fields.cadence.as_deref() else {
        return Ok(None);
    };
    let text = match (kind, fields.cadence_day.as_deref()) {
        ("daily", _) | (_, None) => kind.to_string(),
        (kind, Some(day)) => format!("{kind}:{day}"),
    };
    crate::subscriber::Cadence::parse(&text).map(Some)
}

/// The cadence selects with `current` chosen; the day is the current roll-up day (Monday
/// for a daily reader).
pub(in crate::web) fn cadence_form(
    current: crate::subscriber::Cadence,
    t: &crate::locale::Locale,
) -> CadenceForm {
    use crate::subscriber::{Cadence, DEFAULT_WEEKLY_DAY};
    let kind = match current {
        Cadence::Daily => "daily",
        Cadence::Weekly(_) => "weekly",
        Cadence::Both(_) => "both",
    };
    let day = current.weekly_day().unwrap_or(DEFAULT_WEEKLY_DAY);
    let choice = |value: &str, label: String, checked: bool| Choice {
        value: value.to_string(),
        label,
        checked,
        href: String::new(),
    };
    CadenceForm {
        kinds: ["daily", "weekly", "both"]
            .into_iter()
            .map(|k| {
                choice(
                    k,
                    t.get(&format!("cadence_kind_{k}")).to_string(),
                    k == kind,
                )
            })
            .collect(),
        days: (0..7)
            .map(|i| {
                let d = chrono::Weekday::try_from(i as u8).expect("0-6 are days");
                let v = d.to_string().to_ascii_lowercase();
                choice(&v, t.get(&format!("day_{v}")).to_string(), d == day)
            })
            .collect(),
    }
}

/// Validates layers, threshold and language; the error is a locale key and its value.
pub(in crate::web) fn parse_settings(
    fields: &Fields,
    known_layers: &[String],
    default: &Filter,
) -> Result<(Filter, Option<String>), (&'static str, String)> {
    let mut layers = BTreeSet::new();
    for l in &fields.layers {
        if !known_layers.contains(l) {
            return Err(("signup_bad_layer", l.clone()));
        }
        layers.insert(l.clone());
    }
    let min_score = match fields.min_score.as_deref() {
        None | Some("") => default.min_score,
        Some(s) => s
            .parse::<f64>()
            .ok()
            .and_then(Score::parse_threshold)
            .ok_or(("signup_bad_score", s.to_string()))?,
    };
    let language = match fields.language.as_deref() {
        None => None,
        Some(l) if LANGUAGES.contains(&l) => Some(l.to_string()),
        Some(l) => return Err(("signup_bad_language", l.to_string())),
    };
    Ok((
        Filter {
            layers,
            min_score,
            boost: None,
            follows: Vec::new(),
        },
        language,
    ))
}

#[derive(Deserialize)]
pub struct LangQuery {
    pub(in crate::web) lang: Option<String>,
}

/// The language a posted form asks for (its `language` field) when supported, else the
/// request's Accept-Language, else `default`.
pub(in crate::web) fn form_language(fields: &Fields, headers: &HeaderMap, default: &str) -> String {
    fields
        .language
        .clone()
        .filter(|l| LANGUAGES.contains(&l.as_str()))
        .unwrap_or_else(|| page_language(None, headers, default))
}

/// `?lang=` when supported, else the first supported Accept-Language tag, else `default`.
pub(in crate::web) fn page_language(
    query: Option<&str>,
    headers: &HeaderMap,
    default: &str,
) -> String {
    let supported = |tag: &str| {
        let tag = tag.trim().to_ascii_lowercase();
        LANGUAGES
            .iter()
            .find(|l| {
                let l = l.to_ascii_lowercase();
                tag == l || l.split('-').next() == Some(tag.split('-').next().unwrap_or(""))
            })
            .map(|l| l.to_string())
    };
    if let Some(l) = query.and_then(supported) {
        return l;
    }
    let accept = headers
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // The supported language with the highest q (1 when absent; q=0 means "not this one");
    // among equals, the first listed.
    let mut best: Option<(f32, String)> = None;
    for part in accept.split(',') {
        let mut pieces = part.split(';');
        let Some(language) = supported(pieces.next().unwrap_or("")) else {
            continue;
        };
        let q = pieces
            .find_map(|p| p.trim().strip_prefix("q="))
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q > 0.0 && best.as_ref().is_none_or(|(b, _)| q > *b) {
            best = Some((q, language));
        }
    }
    best.map_or_else(|| default.to_string(), |(_, language)| language)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_accept_known_layers_whole_scores_and_languages() {
        let known = vec!["frontend".to_string(), "runtime".to_string()];
        let default = Filter::default();
        let fields = parse_fields(b"layers=runtime&layers=frontend&min_score=70&language=en");
        let (filter, language) = parse_settings(&fields, &known, &default).unwrap();
        assert_eq!(filter.layers.len(), 2);
        assert_eq!(filter.min_score, Score::from_tenths(700));
        assert_eq!(language.as_deref(), Some("en"));
        let bad = |body: &[u8]| parse_settings(&parse_fields(body), &known, &default).unwrap_err();
        assert_eq!(bad(b"layers=gpu").0, "signup_bad_layer");
        assert_eq!(bad(b"min_score=101").0, "signup_bad_score");
        assert_eq!(bad(b"min_score=abc").0, "signup_bad_score");
        let half = parse_settings(&parse_fields(b"min_score=7.5"), &known, &default).unwrap();
        assert_eq!(half.0.min_score, Score::from_tenths(75));
        assert_eq!(bad(b"language=fr").0, "signup_bad_language");
    }

    #[test]
    fn clients_are_keyed_by_ipv4_address_or_ipv6_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(client_key(a), client_key(c));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(client_key(v4), v4);
    }

    #[test]
    fn page_language_prefers_query_then_accept_language() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_LANGUAGE,
            "fr-CH, en-US;q=0.8, zh;q=0.5".parse().unwrap(),
        );
        assert_eq!(page_language(Some("zh-CN"), &headers, "zh-CN"), "zh-CN");
        assert_eq!(page_language(None, &headers, "zh-CN"), "en");
        assert_eq!(
            page_language(Some("xx"), &HeaderMap::new(), "zh-CN"),
            "zh-CN"
        );
        let mut weighted = HeaderMap::new();
        weighted.insert(
            header::ACCEPT_LANGUAGE,
            "en;q=0.3, zh-CN;q=0.9".parse().unwrap(),
        );
        assert_eq!(page_language(None, &weighted, "en"), "zh-CN", "q decides");
        let mut refused = HeaderMap::new();
        refused.insert(header::ACCEPT_LANGUAGE, "en;q=0".parse().unwrap());
        assert_eq!(
            page_language(None, &refused, "zh-CN"),
            "zh-CN",
            "q=0 is a no"
        );
    }
}

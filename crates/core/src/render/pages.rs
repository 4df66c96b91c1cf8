//! The web site's pages (a digest's page, the home page, the archive pages, the account
//! pages) and the sign-up's one-link emails, rendered from the same templates and locale as
//! the digest documents (`render/mod.rs`).

use minijinja::{Value, context};
use serde::Serialize;

use super::{Email, Renderer};
use crate::archive::ArchivedEvent;
use crate::model::{Digest, DigestEvent};
use crate::text::collapse_whitespace;

/// The one-link emails of the sign-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEmail {
    /// The double opt-in confirmation link.
    Confirm,
    /// The address already receives the digest: a link to its preferences.
    AlreadySubscribed,
}

impl LinkEmail {
    fn prefix(self) -> &'static str {
        match self {
            LinkEmail::Confirm => "confirm_email",
            LinkEmail::AlreadySubscribed => "known_email",
        }
    }
}

/// What an account page shows: a title, paragraphs, an optional error and an optional form.
#[derive(Debug, Default, Serialize)]
pub struct AccountPage {
    pub title: String,
    pub paragraphs: Vec<String>,
    pub error: Option<String>,
    pub form: Option<AccountForm>,
    /// Links to the same page in the other languages.
    pub switch: Vec<Choice>,
}

#[derive(Debug, Default, Serialize)]
pub struct AccountForm {
    pub action: String,
    pub button: String,
    /// `Some` shows the email field with this value.
    pub email: Option<String>,
    /// `Some` shows the team-chat robot fields (URL, keyword) with these values.
    pub robot: Option<(String, String)>,
    /// Shows the confirmation-code field.
    pub code: bool,
    /// Hidden fields: (name, value).
    pub hidden: Vec<(String, String)>,
    /// `Some` shows the delivery-time fields (HH:MM or empty, time zone) with these values.
    pub time: Option<(String, String)>,
    /// `Some` shows the cadence selects (daily, weekly, both; the roll-up's day).
    pub cadence: Option<CadenceForm>,
    pub settings: Option<SettingsForm>,
}

/// The preferences form's cadence: its kind and the weekly roll-up's day.
#[derive(Debug, Default, Serialize)]
pub struct CadenceForm {
    pub kinds: Vec<Choice>,
    pub days: Vec<Choice>,
}

/// The layer checkboxes, threshold and language of the sign-up and preferences forms.
#[derive(Debug, Default, Serialize)]
pub struct SettingsForm {
    pub layers: Vec<Choice>,
    /// The threshold as shown: "60" or "72.5".
    pub min_score: String,
    pub languages: Vec<Choice>,
    /// The preferences page's layer boost: on or off, and what it does now.
    pub boost: Option<(bool, String)>,
    /// The preferences page's followed phrases, one per line.
    pub follows: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Choice {
    pub value: String,
    pub label: String,
    pub checked: bool,
    pub href: String,
}

/// The blog's archive pages (search, a layer, an event's permalink): a title, an optional
/// lead, the search form, events listed, one event in full with the digests it was in, a
/// line for an empty list, paging links and a feed.
#[derive(Debug, Default)]
pub struct ArchivePage<'a> {
    pub title: String,
    pub lead: Option<String>,
    /// `Some` shows the search form with this query.
    pub query: Option<String>,
    pub results: &'a [ArchivedEvent],
    /// The event of a permalink page, with every appearance (newest first).
    pub event: Option<(&'a DigestEvent, &'a [ArchivedEvent])>,
    pub empty: Option<String>,
    pub newer: Option<String>,
    pub older: Option<String>,
    pub feed_url: Option<String>,
    /// The permalink's votes ("👍 3 · 👎 1"), when it has any.
    pub tally: Option<String>,
}

impl Renderer {
    pub fn page(&self, digest: &Digest, reads: &str) -> anyhow::Result<String> {
        let reads = self.locale.fill("reads", &[("n", reads)]);
        let ctx = context! { back_url => "/", reads => reads, ..self.context(digest) };
        Ok(self.env.get_template("digest.html.j2")?.render(ctx)?)
    }

    pub fn home(
        &self,
        digests: &[(Digest, i64)],
        newer: Option<i64>,
        older: Option<i64>,
        signup: bool,
    ) -> anyhow::Result<String> {
        let items: Vec<Value> = digests
            .iter()
            .map(|(d, reads)| {
                context! {
                    date => d.date.to_string(),
                    title => d.title,
                    excerpt => crate::text::truncate_chars(&collapse_whitespace(&d.overview), 240),
                    reads => self.locale.fill("reads", &[("n", &reads.to_string())]),
                }
            })
            .collect();
        // The newest digest's ISO week: its roll-up page (`/week/{week}`).
        let latest_week = digests
            .iter()
            .map(|(d, _)| d.date)
            .max()
            .map(|date| crate::weekly::Week::of(date).to_string());
        let ctx = context! {
            t => Value::from_serialize(&self.locale),
            lang => &self.language,
            signup => signup,
            latest_week => latest_week,
            digests => items,
            newer => newer,
            older => older,
        };
        Ok(self.env.get_template("home.html.j2")?.render(ctx)?)
    }

    pub fn archive(&self, page: &ArchivePage) -> anyhow::Result<String> {
        let results: Vec<Value> = page
            .results
            .iter()
            .map(|a| {
                let view = self.event_view(a.event.n, &a.event);
                let summary = crate::text::truncate_chars(&view.summary, 320);
                context! { date => a.date.to_string(), summary => summary, ..Value::from_serialize(&view) }
            })
            .collect();
        let (event, appearances) = match page.event {
            Some((e, seen)) => (
                Some(self.event_view(e.n, e)),
                seen.iter()
                    .map(|a| context! { date => a.date.to_string(), score => a.event.score.to_string() })
                    .collect(),
            ),
            None => (None, Vec::new()),
        };
        let ctx = context! {
            t => Value::from_serialize(&self.locale),
            lang => &self.language,
            title => page.title,
            tally => page.tally,
            lead => page.lead,
            search => page.query.is_some(),
            query => page.query,
            results => results,
            event => event,
            appearances => appearances,
            empty => page.empty,
            newer => page.newer,
            older => page.older,
            feed_url => page.feed_url,
        };
        Ok(self.env.get_template("archive.html.j2")?.render(ctx)?)
    }

    pub fn account_page(&self, page: &AccountPage) -> anyhow::Result<String> {
        let ctx =
            context! { t => &self.locale, lang => &self.language, ..Value::from_serialize(page) };
        Ok(self.env.get_template("account.html.j2")?.render(ctx)?)
    }

    pub fn link_email(&self, kind: LinkEmail, url: &str) -> anyhow::Result<Email> {
        let t = &self.locale;
        let key = |suffix: &str| t.get(&format!("{}_{suffix}", kind.prefix())).to_string();
        let ctx = context! {
            lang => &self.language,
            subject => key("subject"),
            intro => key("intro"),
            action => key("action"),
            note => key("ignore"),
            url => url,
        };
        let render = |name: &str| -> anyhow::Result<String> {
            Ok(self.env.get_template(name)?.render(&ctx)?)
        };
        Ok(Email {
            subject: key("subject"),
            html: render("link_email.html.j2")?,
            text: render("link_email.txt.j2")?,
        })
    }
}

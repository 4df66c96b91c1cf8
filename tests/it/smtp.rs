//! A real SMTP server on 127.0.0.1 (mailin-embedded, in process) and readers for what
//! arrives: headers, and the decoded text of each MIME part.

use std::sync::{Arc, Mutex};

use mailin_embedded::{Handler, Response, Server, response};

/// Received mails: (recipients, raw message).
pub type Mails = Arc<Mutex<Vec<(Vec<String>, String)>>>;

#[derive(Clone, Default)]
struct Inbox {
    mails: Mails,
    current: Vec<u8>,
    to: Vec<String>,
}

impl Handler for Inbox {
    fn rcpt(&mut self, to: &str) -> Response {
        if to.contains("bounce") {
            response::NO_MAILBOX
        } else {
            response::OK
        }
    }

    fn data_start(&mut self, _domain: &str, _from: &str, _is8bit: bool, to: &[String]) -> Response {
        self.current.clear();
        self.to = to.to_vec();
        response::OK
    }

    fn data(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.current.extend_from_slice(buf);
        Ok(())
    }

    fn data_end(&mut self) -> Response {
        let mail = String::from_utf8_lossy(&self.current).into_owned();
        self.mails.lock().unwrap().push((self.to.clone(), mail));
        response::OK
    }
}

pub fn spawn_smtp() -> (u16, Mails) {
    spawn_smtp_on(0)
}

/// The SMTP server on a given port (0: any free one).
pub fn spawn_smtp_on(port: u16) -> (u16, Mails) {
    let inbox = Inbox::default();
    let mails = inbox.mails.clone();
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut server = Server::new(inbox);
    server.with_name("localhost").with_tcp_listener(listener);
    std::thread::spawn(move || {
        let _ = server.serve();
    });
    (port, mails)
}

/// The value of a header, unfolded.
pub fn header(mail: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = mail.split("\r\n").collect();
    let start = lines.iter().position(|l| {
        l.to_ascii_lowercase()
            .starts_with(&format!("{}:", name.to_ascii_lowercase()))
    })?;
    let mut value = lines[start][name.len() + 1..].trim().to_string();
    for l in &lines[start + 1..] {
        if l.starts_with(' ') || l.starts_with('\t') {
            value.push(' ');
            value.push_str(l.trim());
        } else {
            break;
        }
    }
    Some(value)
}

/// The decoded bodies of the parts of `mail` with content type `content_type` (quoted-printable
/// and base64 undone), so links and text can be read as the reader sees them.
pub fn parts(mail: &str, content_type: &str) -> Vec<String> {
    let mut out = Vec::new();
    for section in mail.split("\r\n--") {
        let Some((head, body)) = section.split_once("\r\n\r\n") else {
            continue;
        };
        let head_lower = head.to_ascii_lowercase();
        if !head_lower.contains(&format!("content-type: {content_type}")) {
            continue;
        }
        let body = body.trim_end_matches("--").trim_end();
        let decoded = if head_lower.contains("content-transfer-encoding: base64") {
            base64_decode(&body.replace(['\r', '\n'], ""))
        } else if head_lower.contains("content-transfer-encoding: quoted-printable") {
            quoted_printable_decode(body)
        } else {
            body.as_bytes().to_vec()
        };
        out.push(String::from_utf8_lossy(&decoded).into_owned());
    }
    out
}

fn quoted_printable_decode(s: &str) -> Vec<u8> {
    let s = s.replace("=\r\n", "");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        let Some(v) = ALPHABET.iter().position(|a| *a == c) else {
            continue;
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[test]
fn decoders_undo_transfer_encodings() {
    assert_eq!(base64_decode("5Lit5paH"), "中文".as_bytes());
    assert_eq!(quoted_printable_decode("a=3Db=\r\nc"), b"a=bc");
}

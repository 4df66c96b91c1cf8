//! An SMTP server on 127.0.0.1 for the email tests, and readers for what arrives: headers,
//! and the decoded text of each MIME part.
//!
//! The server speaks RFC 5321 over real TCP (EHLO/HELO, MAIL, RCPT, DATA with dot
//! unstuffing, RSET, NOOP, QUIT), one thread per connection, so lettre's pooled client runs
//! unchanged against it. Recipients containing "bounce" are refused with 550 5.1.1, as a
//! relay refuses an unknown mailbox. It is written here rather than taken from a crate: the
//! one in-process server crate (mailin-embedded) builds aws-lc-sys, a C library, into every
//! test build.
//!
//! [`spawn_faulty_smtp`] misbehaves on purpose, one transaction at a time, as the relays of
//! the fault campaign did: a connection dropped in the middle of DATA or after the final dot
//! (the message kept), and 421/451/452 answers. [`spawn_silent_relay`] accepts connections
//! and never greets.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// Received mails: (recipients, raw message).
pub type Mails = Arc<Mutex<Vec<(Vec<String>, String)>>>;

/// How the server treats one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// This reply to RCPT TO (a 421 closes the connection after it).
    AtRcpt(&'static str),
    /// The connection closes after the first lines of the message.
    DropMidData,
    /// The message is kept, and the connection closes before the reply to the final dot.
    DropAfterDot,
    /// This reply to the final dot, the message not kept.
    AtDot(&'static str),
}

/// Chooses the fault of each transaction from its first recipient and how many
/// transactions that recipient had before.
pub type FaultPlan = Arc<dyn Fn(&str, usize) -> Fault + Send + Sync>;

pub fn spawn_smtp() -> (u16, Mails) {
    spawn_smtp_on(0)
}

/// The SMTP server on a given port (0: any free one).
pub fn spawn_smtp_on(port: u16) -> (u16, Mails) {
    spawn_faulty_smtp_on(port, Arc::new(|_: &str, _| Fault::None))
}

/// The SMTP server with `plan`'s faults, on any free port.
pub fn spawn_faulty_smtp(plan: FaultPlan) -> (u16, Mails) {
    spawn_faulty_smtp_on(0, plan)
}

fn spawn_faulty_smtp_on(port: u16, plan: FaultPlan) -> (u16, Mails) {
    let mails = Mails::default();
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let inbox = mails.clone();
    let tries = Arc::new(Mutex::new(std::collections::HashMap::<String, usize>::new()));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let server = Server {
                mails: inbox.clone(),
                plan: plan.clone(),
                tries: tries.clone(),
            };
            std::thread::spawn(move || {
                let _ = server.session(stream);
            });
        }
    });
    (port, mails)
}

/// A relay that accepts connections and never says a word.
pub fn spawn_silent_relay() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

struct Server {
    mails: Mails,
    plan: FaultPlan,
    /// Transactions seen per first recipient.
    tries: Arc<Mutex<std::collections::HashMap<String, usize>>>,
}

impl Server {
    /// The fault for a transaction to `rcpt`, counting it.
    fn fault(&self, rcpt: &str) -> Fault {
        let mut tries = self.tries.lock().unwrap();
        let n = tries.entry(rcpt.to_string()).or_default();
        let fault = (self.plan)(rcpt, *n);
        *n += 1;
        fault
    }

    fn session(&self, stream: TcpStream) -> std::io::Result<()> {
        let mails = &self.mails;
        let mut fault = Fault::None;
        let mut out = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let mut reply = |text: &str| out.write_all(format!("{text}\r\n").as_bytes());
        reply("220 localhost ESMTP kdigest-test")?;
        let (mut from, mut to) = (None::<String>, Vec::<String>::new());
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let command = line.trim_end();
            let verb = command
                .split([' ', ':'])
                .next()
                .unwrap_or("")
                .to_ascii_uppercase();
            match verb.as_str() {
                "EHLO" => reply("250-localhost\r\n250-8BITMIME\r\n250 SMTPUTF8")?,
                "HELO" => reply("250 localhost")?,
                "MAIL" => {
                    from = Some(address(command));
                    to.clear();
                    fault = Fault::None;
                    reply("250 2.1.0 OK")?;
                }
                "RCPT" if from.is_none() => reply("503 5.5.1 MAIL first")?,
                "RCPT" => {
                    let rcpt = address(command);
                    if to.is_empty() {
                        fault = self.fault(&rcpt);
                    }
                    if let Fault::AtRcpt(answer) = fault {
                        reply(answer)?;
                        if answer.starts_with("421") {
                            return Ok(());
                        }
                    } else if rcpt.contains("bounce") {
                        reply("550 5.1.1 No such mailbox")?;
                    } else {
                        to.push(rcpt);
                        reply("250 2.1.5 OK")?;
                    }
                }
                "DATA" if to.is_empty() => reply("554 5.5.1 No valid recipients")?,
                "DATA" => {
                    reply("354 End data with <CR><LF>.<CR><LF>")?;
                    let mut message = String::new();
                    loop {
                        let mut data = String::new();
                        if reader.read_line(&mut data)? == 0 {
                            return Ok(());
                        }
                        if data == ".\r\n" {
                            break;
                        }
                        if fault == Fault::DropMidData && message.len() > 200 {
                            return Ok(());
                        }
                        // Dot unstuffing (RFC 5321 4.5.2).
                        message.push_str(data.strip_prefix('.').unwrap_or(&data));
                    }
                    from = None;
                    if let Fault::AtDot(answer) = fault {
                        to.clear();
                        reply(answer)?;
                        continue;
                    }
                    mails
                        .lock()
                        .unwrap()
                        .push((std::mem::take(&mut to), message));
                    if fault == Fault::DropAfterDot {
                        return Ok(());
                    }
                    reply("250 2.0.0 Queued")?;
                }
                "RSET" => {
                    from = None;
                    to.clear();
                    reply("250 2.0.0 OK")?;
                }
                "NOOP" => reply("250 2.0.0 OK")?,
                "QUIT" => {
                    reply("221 2.0.0 Bye")?;
                    return Ok(());
                }
                _ => reply("502 5.5.2 Command not implemented")?,
            }
        }
    }
}

/// The address between angle brackets of `MAIL FROM:<a>` or `RCPT TO:<b>`.
fn address(command: &str) -> String {
    command
        .split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map_or_else(String::new, |(addr, _)| addr.to_string())
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

//! The connections to the SMTP relay: a pool of lettre's SMTP connections, each step bounded
//! by `email.timeout_secs`, and every fault sorted by where it happened.
//!
//! kdigest keeps its own pool instead of lettre's transport for three reasons the email
//! channel needs:
//! - **Where a fault happened decides what it means.** Failing to connect, greet, start TLS
//!   or log in is the relay refusing or missing *us*: the channel pauses and nobody is
//!   marked. A connection that drops or goes silent in the middle of a message is a fault of
//!   that message's transaction: it is retried with backoff (lettre reports a connection
//!   closed mid-DATA as a response error, which read as "this message cannot be sent", and
//!   the mail was lost).
//! - **A relay that accepts TCP and never answers** held a send forever (lettre's async
//!   timeout covers the TCP connect only). Here connecting with the greeting, EHLO, STARTTLS
//!   and login is one step, each message's transaction another, each bounded.
//! - **Throughput.** lettre 0.11.23 does not set TCP_NODELAY, and it writes a message and its
//!   final `\r\n.\r\n` separately: Nagle holds the terminator until the relay's delayed ACK,
//!   about 40 ms, so one connection carried about 22 messages a second. Connections made
//!   here set TCP_NODELAY before lettre speaks SMTP over them (not for implicit TLS, which
//!   lettre connects itself).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use tokio::sync::Semaphore;

use crate::SendError;
use super::config::{EmailConfig, SmtpTls};

/// A connection idle for longer is checked with NOOP before it carries a message (relays
/// close idle connections; a message is not started on one that is gone).
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(5);
/// A connection idle for longer is closed rather than reused.
const CLOSE_IDLE_AFTER: Duration = Duration::from_secs(60);
/// How long the email channel waits when the relay does not offer STARTTLS: the relay's
/// configuration or ours has to change, so the log says it once in a while, not per minute.
const NO_STARTTLS_PAUSE: Duration = Duration::from_secs(600);

pub struct Relay {
    host: String,
    port: u16,
    tls: SmtpTls,
    hello: ClientId,
    credentials: Option<Credentials>,
    timeout: Duration,
    /// At most `email.pool_size` connections carry messages at once.
    open: Semaphore,
    idle: Mutex<Vec<(AsyncSmtpConnection, Instant)>>,
}

/// Where a connection failed: the two steps of [`Relay`].
enum Step {
    Connect,
    Message,
}

impl Relay {
    pub fn new(config: &EmailConfig, credentials: Option<Credentials>) -> Relay {
        Relay {
            host: config.smtp_host.clone(),
            port: config.smtp_port,
            tls: config.tls,
            hello: ClientId::default(),
            credentials,
            timeout: config.timeout,
            open: Semaphore::new(config.pool_size as usize),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(AsyncSmtpConnection, Instant)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands one message to the relay.
    pub async fn send(&self, envelope: &Envelope, message: &[u8]) -> Result<(), SendError> {
        let _permit = self.open.acquire().await.map_err(|_| SendError::Outage {
            reason: "The email channel is shutting down".into(),
            retry_after: None,
        })?;
        let mut connection = match self.reusable().await {
            Some(c) => c,
            None => self.connect().await?,
        };
        let sent = tokio::time::timeout(self.timeout, connection.send(envelope, message)).await;
        match sent {
            Ok(Ok(_)) => {
                self.idle().push((connection, Instant::now()));
                Ok(())
            }
            // lettre closes the connection after any error, a refusal included.
            Ok(Err(e)) => Err(self.failure(Step::Message, &e)),
            Err(_) => Err(SendError::Transient {
                reason: format!(
                    "SMTP relay {}:{} did not finish the message within {} s (email.timeout_secs); it is sent again, and a relay that kept it after all delivers it twice under one Message-ID",
                    self.host,
                    self.port,
                    self.timeout.as_secs_f64()
                ),
                retry_after: None,
            }),
        }
    }

    /// An idle connection that still answers, if there is one.
    async fn reusable(&self) -> Option<AsyncSmtpConnection> {
        loop {
            let (mut connection, since) = self.idle().pop()?;
            let idle_for = since.elapsed();
            if idle_for > CLOSE_IDLE_AFTER {
                continue;
            }
            if idle_for <= CHECK_IDLE_AFTER {
                return Some(connection);
            }
            let alive = tokio::time::timeout(self.timeout, connection.test_connected()).await;
            if alive == Ok(true) {
                return Some(connection);
            }
        }
    }

    /// A new connection: TCP, greeting, EHLO, STARTTLS, login, within one timeout.
    async fn connect(&self) -> Result<AsyncSmtpConnection, SendError> {
        let step = async {
            let mut connection = match self.tls {
                SmtpTls::Implicit => {
                    let tls = TlsParameters::new(self.host.clone())
                        .map_err(|e| self.failure(Step::Connect, &e))?;
                    AsyncSmtpConnection::connect_tokio1(
                        (self.host.as_str(), self.port),
                        Some(self.timeout),
                        &self.hello,
                        Some(tls),
                        None,
                    )
                    .await
                    .map_err(|e| self.failure(Step::Connect, &e))?
                }
                SmtpTls::StartTls | SmtpTls::None => {
                    let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                        .await
                        .map_err(|e| self.unreachable(&e.to_string()))?;
                    // Nagle would hold each message's final dot for the relay's delayed
                    // ACK; see the module comment.
                    let _ = tcp.set_nodelay(true);
                    AsyncSmtpConnection::connect_with_transport(Box::new(tcp), &self.hello)
                        .await
                        .map_err(|e| self.failure(Step::Connect, &e))?
                }
            };
            if self.tls == SmtpTls::StartTls {
                if !connection.can_starttls() {
                    connection.abort().await;
                    return Err(SendError::Outage {
                        reason: format!(
                            "SMTP relay {}:{} does not offer STARTTLS, which email.tls = \"starttls\" requires; email waits. Use a relay that offers it, email.tls = \"implicit\" for port 465, or \"none\" only for a relay on this machine",
                            self.host, self.port
                        ),
                        retry_after: Some(NO_STARTTLS_PAUSE),
                    });
                }
                let tls = TlsParameters::new(self.host.clone())
                    .map_err(|e| self.failure(Step::Connect, &e))?;
                connection
                    .starttls(tls, &self.hello)
                    .await
                    .map_err(|e| self.failure(Step::Connect, &e))?;
            }
            if let Some(credentials) = &self.credentials {
                connection
                    .auth(&[Mechanism::Plain, Mechanism::Login], credentials)
                    .await
                    .map_err(|e| self.failure(Step::Connect, &e))?;
            }
            Ok(connection)
        };
        tokio::time::timeout(self.timeout, step)
            .await
            .map_err(|_| {
                self.unreachable(&format!(
                    "no greeting, EHLO, STARTTLS or login answer within {} s (email.timeout_secs)",
                    self.timeout.as_secs_f64()
                ))
            })?
    }

    fn unreachable(&self, why: &str) -> SendError {
        SendError::Outage {
            reason: format!("SMTP relay {}:{} unreachable: {why}", self.host, self.port),
            retry_after: None,
        }
    }

    /// What a lettre error means, given the step it happened in.
    fn failure(&self, step: Step, e: &lettre::transport::smtp::Error) -> SendError {
        let code = e.status().map(|c| c.to_string());
        match (step, code) {
            // The relay answered with a code: the table in `classify` decides, except that
            // while connecting any refusal is a refusal of us, never of a reader.
            (Step::Connect, Some(code)) => match super::send::classify_reply(&code, &e.to_string())
            {
                outage @ SendError::Outage { .. } => outage,
                other => SendError::Outage {
                    reason: format!("SMTP relay refused the connection: {other}"),
                    retry_after: None,
                },
            },
            (Step::Message, Some(code)) => super::send::classify_reply(&code, &e.to_string()),
            (Step::Connect, None) => self.unreachable(&e.to_string()),
            // Something lettre would not send (non-ASCII to a relay without SMTPUTF8).
            (Step::Message, None) if e.is_client() => SendError::Failed {
                reason: format!("This email cannot be sent: {e}"),
            },
            // The connection dropped, closed or garbled the answer in the middle of the
            // message: the message is sent again. Dropped after the final dot, the relay
            // may have kept it: the reader then gets it twice, under one Message-ID.
            (Step::Message, None) => SendError::Transient {
                reason: format!(
                    "SMTP relay {}:{} dropped the connection during the message ({e}); it is sent again",
                    self.host, self.port
                ),
                retry_after: None,
            },
        }
    }
}

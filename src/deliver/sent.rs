//! Group commit for sent deliveries. Marking each sent row in its own statement made the
//! database the fan-out's bottleneck (a write transaction, a WAL frame and two thread
//! hand-offs per delivery). Here a delivery adds its row to a pending list and waits for
//! the writer: whoever holds it marks every row pending at that moment in one statement
//! per chunk, so rows that finish while a write runs go together in the next one. No
//! timer: a lone delivery is written at once. Each row keeps its own fence (claim token).

use std::sync::Mutex;

use chrono::Utc;
use tokio::sync::oneshot;

use crate::store::{Claimed, Settled, Store};

struct Pending {
    claim: Claimed,
    attempts: u32,
    reply: oneshot::Sender<Result<Settled, String>>,
}

#[derive(Default)]
pub struct SentLog {
    pending: Mutex<Vec<Pending>>,
    writer: tokio::sync::Mutex<()>,
}

impl SentLog {
    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        // A plain list: consistent after any panic.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `claim` sent after `attempts` attempts, with whatever else is pending.
    pub async fn mark_sent(
        &self,
        store: &Store,
        claim: &Claimed,
        attempts: u32,
    ) -> anyhow::Result<Settled> {
        let (reply, answer) = oneshot::channel();
        self.pending().push(Pending {
            claim: claim.clone(),
            attempts,
            reply,
        });
        {
            let _writer = self.writer.lock().await;
            let batch = std::mem::take(&mut *self.pending());
            if !batch.is_empty() {
                let rows: Vec<(&Claimed, u32)> =
                    batch.iter().map(|p| (&p.claim, p.attempts)).collect();
                let result = store.mark_sent_many(&rows, Utc::now()).await;
                for p in batch {
                    let outcome = match &result {
                        Ok(ids) if ids.contains(&p.claim.id) => Ok(Settled::Done),
                        Ok(_) => Ok(Settled::Lost),
                        Err(error) => Err(format!("{error:#}")),
                    };
                    let _ = p.reply.send(outcome);
                }
            }
        }
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the write marking this delivery sent was cut off"))?
            .map_err(|e| anyhow::anyhow!("Cannot mark the delivery sent: {e}"))
    }
}

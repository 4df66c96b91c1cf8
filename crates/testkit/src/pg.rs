//! A fresh Postgres schema per test, on the server every development and CI machine runs
//! at 127.0.0.1:5432 (KDIGEST_TEST_POSTGRES names another). Without a server a test skips
//! with a message, except under CI=true, where it fails: CI must run them.

use std::time::Duration;

use sqlx::Connection;

pub const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/test";

pub struct PgSchema {
    /// The URL of the schema: a database URL whose search_path is the schema.
    pub url: String,
    server: String,
    name: String,
}

fn server() -> String {
    std::env::var("KDIGEST_TEST_POSTGRES").unwrap_or_else(|_| DEFAULT_SERVER.to_string())
}

/// A new empty schema, or None (with a message) when no server answers outside CI.
pub async fn schema() -> Option<PgSchema> {
    let server = server();
    let connect =
        tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&server));
    let mut conn = match connect.await {
        Ok(Ok(conn)) => conn,
        failure => {
            let why = match failure {
                Ok(Err(e)) => e.to_string(),
                _ => "no answer within 5 s".to_string(),
            };
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true and Postgres at {server} is unreachable: {why}");
            }
            eprintln!(
                "skipping: Postgres at {server} is unreachable ({why}); set KDIGEST_TEST_POSTGRES"
            );
            return None;
        }
    };
    let name = format!(
        "t_{}_{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    );
    sqlx::query(&format!("CREATE SCHEMA {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.ok();
    let separator = if server.contains('?') { '&' } else { '?' };
    Some(PgSchema {
        url: format!("{server}{separator}options[search_path]={name}"),
        server,
        name,
    })
}

impl Drop for PgSchema {
    /// The schema goes with the test, passed or failed (on a thread of its own: Drop
    /// cannot await, and the test's runtime may be gone).
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&server).await {
                    let _ = sqlx::query(&format!("DROP SCHEMA {name} CASCADE"))
                        .execute(&mut conn)
                        .await;
                }
            });
        })
        .join();
    }
}

//! Loopback servers and child processes that clean up after a failing test.

use axum::Router;

/// A loopback port where nothing listens (bound, then let go).
pub fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Serves `app` on a free loopback port; returns `http://127.0.0.1:<port>`.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// A child process that is killed when dropped: a test that fails (panics) must not leave
/// its daemon or driver running, holding ports and the harness's output open.
pub struct Process(Option<std::process::Child>);

impl Process {
    pub fn new(child: std::process::Child) -> Process {
        Process(Some(child))
    }

    /// The child, no longer killed on drop (to wait for its output).
    pub fn into_inner(mut self) -> std::process::Child {
        self.0.take().expect("a live child")
    }
}

impl std::ops::Deref for Process {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        self.0.as_ref().expect("a live child")
    }
}

impl std::ops::DerefMut for Process {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("a live child")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A bench's receiver or mock API in a process of its own, as in production the receivers
/// are not in kdigest's process: this bench binary started again with `args`, which
/// serves with [`serve_in_child`] and prints its port first. Killed when dropped.
pub struct ChildServer {
    child: std::process::Child,
    pub port: u16,
}

impl ChildServer {
    pub fn start(args: &[&str]) -> ChildServer {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let port = line.trim().parse().unwrap();
        ChildServer { child, port }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// GET `path` as JSON; from synchronous code (it runs a runtime of its own).
    pub fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let url = format!("{}{path}", self.base());
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async { reqwest::get(url).await.unwrap().json().await.unwrap() })
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In the child of a [`ChildServer`]: serves `app` on a free port of `ip` (0.0.0.0 reaches
/// every 127.x.y.z), prints the port, and serves until killed.
pub fn serve_in_child(app: axum::Router, ip: &str) {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
            println!("{}", listener.local_addr().unwrap().port());
            axum::serve(listener, app).await.unwrap();
        });
}

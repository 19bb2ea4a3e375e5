//! A TCP proxy in front of a database server, to simulate the server going away: [`Proxy::cut`] closes
//! every connection through it and refuses new ones (each is accepted and closed at once, as a server
//! that is shutting down); [`Proxy::restore`] lets connections through again. [`Proxy::requests`]
//! counts the client's requests (round trips of a protocol that waits for each answer).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A proxy listening on a local port, forwarding to a target address.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

#[derive(Default)]
struct Shared {
    up: AtomicBool,
    connections: Mutex<Vec<AbortHandle>>,
    /// Connections accepted while cut (and closed at once).
    refused: AtomicU64,
    /// Bytes from a client that followed bytes from the server (or opened the connection).
    requests: AtomicU64,
}

impl Proxy {
    /// Starts a proxy to `target` (`host:port`) on `127.0.0.1:<free port>`, letting connections through.
    ///
    /// # Panics
    ///
    /// When no local port can be bound (a test fixture: there is nothing to recover).
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a local port for the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared { up: AtomicBool::new(true), ..Shared::default() });
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { continue };
                if !s.up.load(Ordering::SeqCst) {
                    s.refused.fetch_add(1, Ordering::Relaxed);
                    drop(client);
                    continue;
                }
                let target = target.clone();
                let shared = s.clone();
                let conn = tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&target).await else { return };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    forward(client, server, &shared).await;
                });
                let mut list = s.connections.lock().unwrap_or_else(|e| e.into_inner());
                list.retain(|c| !c.is_finished());
                list.push(conn.abort_handle());
            }
        })
        .abort_handle();
        Proxy { addr, shared, accept }
    }

    /// The port to connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Closes every connection through the proxy and refuses new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.shared.up.store(false, Ordering::SeqCst);
        for c in self.shared.connections.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            c.abort();
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.shared.up.store(true, Ordering::SeqCst);
    }

    /// Connections refused while cut.
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// Requests of all connections so far: bytes from a client after bytes from the server (or as the
    /// connection's first), however many reads they took. For a protocol whose client waits for each
    /// answer before it sends again, the round trips.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }
}

/// Copies both ways between `client` and `server` until either side closes, counting requests.
async fn forward(client: TcpStream, server: TcpStream, shared: &Shared) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Whether the server spoke last: set before its bytes are passed on, so a client's next request
    // (sent only after it read them) always finds it set.
    let server_last = AtomicBool::new(true);
    let up = async {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = client_read.read(&mut buf).await {
            if server_last.swap(false, Ordering::SeqCst) {
                shared.requests.fetch_add(1, Ordering::SeqCst);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = server_read.read(&mut buf).await {
            server_last.store(true, Ordering::SeqCst);
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

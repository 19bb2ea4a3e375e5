//! A TCP proxy in front of a database server, to simulate the server going away: [`Proxy::cut`] closes
//! every connection through it and refuses new ones (each is accepted and closed at once, as a server
//! that is shutting down); [`Proxy::restore`] lets connections through again.

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
                let conn = tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&target).await else { return };
                    let mut client = client;
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
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
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

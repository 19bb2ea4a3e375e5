//! `TCP_NODELAY` on the pool's connections.
//!
//! sqlx 0.9 connects with Nagle's algorithm left on, and its TLS stream writes each TLS record (at
//! most 16 KiB) with a `write` of its own. A message larger than one record (a group commit of many
//! runs, or one large checkpoint) then leaves as two or more partial segments; Nagle holds the second
//! until the first is acknowledged, and the server, waiting for the rest of the message, delays that
//! acknowledgement (40 ms on Linux). Measured (docs/stores.md, "Connecting, TLS"; bench/analysis.md):
//! groups of 20–60 commits took 42–48 ms each over TLS and 1–5 ms without it, and 10 steps of 40 KB
//! took 580 ms over TLS against 106 ms without.
//!
//! sqlx gives no handle on its socket, so after each connection opens, the store finds the process's
//! TCP sockets connected to the server (`/proc/self/fd`, Linux) and sets `TCP_NODELAY` on those that
//! lack it. Elsewhere this is a no-op. Setting it on another TCP socket to the same server (another
//! pool's, say) is harmless: it only sends small writes sooner.

use std::net::SocketAddr;

/// The server's addresses, for [`set_on_connections_to`]: `host:port` resolved (none for a Unix
/// socket path).
pub(crate) async fn server_addrs(host: &str, port: u16) -> Vec<SocketAddr> {
    if host.starts_with('/') {
        return Vec::new();
    }
    match tokio::net::lookup_host((host, port)).await {
        Ok(addrs) => addrs.collect(),
        Err(_) => Vec::new(),
    }
}

/// Sets `TCP_NODELAY` on every TCP socket of this process connected to one of `peers` that lacks it;
/// returns how many it set.
///
/// One of the two places the workspace allows `unsafe` (the other: the SQLite store's VFS):
/// borrowing a file descriptor by number is `unsafe` in Rust whatever the use, and sqlx offers no
/// other way to the socket.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn set_on_connections_to(peers: &[SocketAddr]) -> usize {
    use std::os::fd::{BorrowedFd, RawFd};
    if peers.is_empty() {
        return 0;
    }
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    let mut set = 0;
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<RawFd>().ok()) else { continue };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.as_os_str().as_encoded_bytes().starts_with(b"socket:"));
        if !is_socket {
            continue;
        }
        // SAFETY: `fd` was open when listed and is used only for `getpeername` / `getsockopt` /
        // `setsockopt` on this line's borrow. Were it closed meanwhile, the calls fail (EBADF); were
        // its number reused, the peer check below applies to the new socket. No memory is involved.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let to_server =
            socket.peer_addr().ok().and_then(|a| a.as_socket()).is_some_and(|a| peers.contains(&a));
        if to_server && socket.tcp_nodelay().is_ok_and(|on| !on) && socket.set_tcp_nodelay(true).is_ok() {
            set += 1;
        }
    }
    set
}

/// Not Linux: nothing (see the module docs).
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_on_connections_to(_peers: &[SocketAddr]) -> usize {
    0
}

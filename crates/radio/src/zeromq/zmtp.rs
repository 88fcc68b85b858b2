//! The part of ZMTP 3.0 (rfc.zeromq.org/spec/23) that gr-zeromq's stream blocks use:
//! TCP, the NULL security mechanism, PUB/SUB and PUSH/PULL sockets, multi-frame
//! messages. Written here rather than taken from a crate: the `zmq` crate builds
//! libzmq (C++) and libsodium from source, and the pure-Rust `zeromq` crate is
//! async-only (a tokio runtime behind a synchronous streamer); this subset is
//! small, synchronous and tested against libzmq (pyzmq, GNU Radio) in tests/python.
//!
//! We announce ZMTP 3.0, so libzmq peers send subscriptions as messages whose first
//! byte is 1 (subscribe) or 0 (cancel); the 3.1 SUBSCRIBE/CANCEL commands are
//! understood too.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const FLAG_MORE: u8 = 0x01;
const FLAG_LONG: u8 = 0x02;
const FLAG_COMMAND: u8 = 0x04;
/// Largest frame accepted from a peer; gr-zeromq sends one work call's items.
const MAX_FRAME: u64 = 1 << 28;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const RECONNECT_INTERVAL: Duration = Duration::from_millis(100);
const ACCEPT_POLL: Duration = Duration::from_millis(20);

/// The socket types gr-zeromq's stream blocks use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketType {
    Pub,
    Sub,
    Push,
    Pull,
}

impl SocketType {
    pub fn name(self) -> &'static str {
        match self {
            SocketType::Pub => "PUB",
            SocketType::Sub => "SUB",
            SocketType::Push => "PUSH",
            SocketType::Pull => "PULL",
        }
    }

    /// Peer types ZMTP allows this socket to talk to.
    fn accepts(self, peer: &[u8]) -> bool {
        let ok: &[&[u8]] = match self {
            SocketType::Pub => &[b"SUB", b"XSUB"],
            SocketType::Sub => &[b"PUB", b"XPUB"],
            SocketType::Push => &[b"PULL"],
            SocketType::Pull => &[b"PUSH"],
        };
        ok.contains(&peer)
    }
}

fn protocol(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Why a ZeroMQ endpoint string cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("endpoint {0:?}: only tcp:// endpoints are supported (e.g. tcp://127.0.0.1:5555)")]
    NotTcp(String),
    #[error("endpoint {0:?}: no port (write tcp://host:port)")]
    NoPort(String),
    #[error("endpoint {endpoint:?}: port {port:?} is not a number in 0..=65535")]
    BadPort { endpoint: String, port: String },
}

/// `tcp://host:port` (host `*` = every interface) as a socket address string.
pub fn tcp_address(endpoint: &str) -> Result<String, EndpointError> {
    let rest = endpoint
        .strip_prefix("tcp://")
        .ok_or_else(|| EndpointError::NotTcp(endpoint.into()))?;
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| EndpointError::NoPort(endpoint.into()))?;
    port.parse::<u16>().map_err(|_| EndpointError::BadPort {
        endpoint: endpoint.into(),
        port: port.into(),
    })?;
    let host = if host == "*" { "0.0.0.0" } else { host };
    Ok(format!("{host}:{port}"))
}

fn greeting() -> [u8; 64] {
    let mut g = [0u8; 64];
    g[0] = 0xFF;
    g[9] = 0x7F;
    g[10] = 3; // version 3.0
    g[12..16].copy_from_slice(b"NULL");
    g
}

fn write_frame(w: &mut impl Write, flags: u8, body: &[u8]) -> io::Result<()> {
    if body.len() > 255 {
        w.write_all(&[flags | FLAG_LONG])?;
        w.write_all(&(body.len() as u64).to_be_bytes())?;
    } else {
        w.write_all(&[flags, body.len() as u8])?;
    }
    w.write_all(body)
}

/// One frame: (flags, body).
fn read_frame(r: &mut impl Read) -> io::Result<(u8, Vec<u8>)> {
    let mut flags = [0u8; 1];
    r.read_exact(&mut flags)?;
    let len = if flags[0] & FLAG_LONG != 0 {
        let mut b = [0u8; 8];
        r.read_exact(&mut b)?;
        u64::from_be_bytes(b)
    } else {
        let mut b = [0u8; 1];
        r.read_exact(&mut b)?;
        b[0] as u64
    };
    if len > MAX_FRAME {
        return Err(protocol(format!(
            "a {len}-byte frame is larger than the {MAX_FRAME} bytes accepted"
        )));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    Ok((flags[0], body))
}

/// What a peer sent: a message (its frames) or a command (name, data).
pub enum Incoming {
    Message(Vec<Vec<u8>>),
    Command(Vec<u8>, Vec<u8>),
}

fn read_incoming(r: &mut impl Read) -> io::Result<Incoming> {
    let mut frames = Vec::new();
    loop {
        let (flags, body) = read_frame(r)?;
        if flags & FLAG_COMMAND != 0 {
            let n = *body
                .first()
                .ok_or_else(|| protocol("empty command frame"))? as usize;
            if body.len() < 1 + n {
                return Err(protocol("command name longer than its frame"));
            }
            return Ok(Incoming::Command(
                body[1..1 + n].to_vec(),
                body[1 + n..].to_vec(),
            ));
        }
        frames.push(body);
        if flags & FLAG_MORE == 0 {
            return Ok(Incoming::Message(frames));
        }
    }
}

/// Writes one message (frames in order).
fn write_message(w: &mut impl Write, frames: &[&[u8]]) -> io::Result<()> {
    for (i, f) in frames.iter().enumerate() {
        let more = if i + 1 < frames.len() { FLAG_MORE } else { 0 };
        write_frame(w, more, f)?;
    }
    w.flush()
}

fn ready_command(me: SocketType) -> Vec<u8> {
    let mut body = vec![5];
    body.extend_from_slice(b"READY");
    body.push(11);
    body.extend_from_slice(b"Socket-Type");
    body.extend_from_slice(&(me.name().len() as u32).to_be_bytes());
    body.extend_from_slice(me.name().as_bytes());
    body
}

/// The value of property `name` in a READY command's metadata.
fn property<'a>(mut meta: &'a [u8], name: &str) -> Option<&'a [u8]> {
    while !meta.is_empty() {
        let n = meta[0] as usize;
        let key = meta.get(1..1 + n)?;
        let len = u32::from_be_bytes(meta.get(1 + n..5 + n)?.try_into().ok()?) as usize;
        let value = meta.get(5 + n..5 + n + len)?;
        if key.eq_ignore_ascii_case(name.as_bytes()) {
            return Some(value);
        }
        meta = &meta[5 + n + len..];
    }
    None
}

/// Greeting and READY exchange; on success the stream carries messages.
fn handshake(stream: &mut TcpStream, me: SocketType) -> io::Result<()> {
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.write_all(&greeting())?;
    let mut peer = [0u8; 64];
    stream.read_exact(&mut peer)?;
    if peer[0] != 0xFF || peer[9] & 1 != 1 {
        return Err(protocol(
            "the peer is not a ZMTP 3 endpoint (bad signature)",
        ));
    }
    if peer[10] < 3 {
        return Err(protocol(format!(
            "the peer speaks ZMTP {}.x; ZMTP 3 is needed (libzmq >= 4)",
            peer[10]
        )));
    }
    let mechanism = &peer[12..32];
    if !mechanism.starts_with(b"NULL\0") {
        let name = String::from_utf8_lossy(mechanism)
            .trim_end_matches('\0')
            .to_string();
        return Err(protocol(format!(
            "the peer uses the {name} security mechanism; only NULL is supported"
        )));
    }
    write_frame(stream, FLAG_COMMAND, &ready_command(me))?;
    stream.flush()?;
    match read_incoming(stream)? {
        Incoming::Command(name, meta) if name == b"READY" => {
            let peer = property(&meta, "Socket-Type").unwrap_or_default();
            if !me.accepts(peer) {
                return Err(protocol(format!(
                    "a {} socket cannot talk to a {} socket",
                    me.name(),
                    String::from_utf8_lossy(peer)
                )));
            }
        }
        _ => return Err(protocol("the peer did not send READY")),
    }
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
    Ok(())
}

/// Called with every message a peer sends.
pub type OnMessage = Arc<dyn Fn(Vec<Vec<u8>>) + Send + Sync>;

struct Peer {
    id: u64,
    writer: BufWriter<TcpStream>,
    /// PUB: the prefixes this subscriber asked for.
    subscriptions: Arc<Mutex<Vec<Vec<u8>>>>,
    subscribed: Arc<AtomicBool>,
}

struct State {
    peers: Vec<Peer>,
    next: usize,
}

struct Shared {
    me: SocketType,
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
    ids: AtomicU64,
    on_message: Option<OnMessage>,
    /// SUB: the prefix to subscribe to.
    topic: Vec<u8>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Streams to shut down on drop (wakes blocked readers).
    streams: Mutex<Vec<(u64, TcpStream)>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn(self: &Arc<Self>, f: impl FnOnce() + Send + 'static) {
        let h = std::thread::spawn(f);
        self.threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(h);
    }

    fn remove(&self, id: u64) {
        self.lock().peers.retain(|p| p.id != id);
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = streams.iter().position(|(s, _)| *s == id) {
            let (_, s) = streams.swap_remove(i);
            let _ = s.shutdown(Shutdown::Both);
        }
        self.changed.notify_all();
    }

    /// Handshakes `stream`, registers it, and reads from it until it closes.
    /// Returns when the peer is gone.
    fn serve(self: &Arc<Self>, mut stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        if handshake(&mut stream, self.me).is_err() {
            return;
        }
        let (Ok(reader), Ok(writer), Ok(keep)) =
            (stream.try_clone(), stream.try_clone(), stream.try_clone())
        else {
            return;
        };
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let subscriptions = Arc::new(Mutex::new(Vec::new()));
        let subscribed = Arc::new(AtomicBool::new(false));
        let mut writer = BufWriter::with_capacity(1 << 16, writer);
        if self.me == SocketType::Sub {
            let mut sub = vec![1u8];
            sub.extend_from_slice(&self.topic);
            if write_message(&mut writer, &[&sub]).is_err() {
                return;
            }
            subscribed.store(true, Ordering::Release);
        }
        self.streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, keep));
        if self.stop.load(Ordering::Acquire) {
            self.remove(id);
            return;
        }
        self.lock().peers.push(Peer {
            id,
            writer,
            subscriptions: subscriptions.clone(),
            subscribed: subscribed.clone(),
        });
        self.changed.notify_all();
        let mut reader = BufReader::with_capacity(1 << 16, reader);
        while let Ok(incoming) = read_incoming(&mut reader) {
            match incoming {
                Incoming::Message(frames) => match self.me {
                    SocketType::Pub => {
                        if let Some(first) = frames.first() {
                            update_subscriptions(&subscriptions, first, &subscribed);
                            self.changed.notify_all();
                        }
                    }
                    SocketType::Sub | SocketType::Pull => {
                        if let Some(f) = &self.on_message {
                            f(frames);
                        }
                    }
                    SocketType::Push => {}
                },
                Incoming::Command(name, data) if self.me == SocketType::Pub => {
                    let op = match name.as_slice() {
                        b"SUBSCRIBE" => 1,
                        b"CANCEL" => 0,
                        _ => continue,
                    };
                    let mut msg = vec![op];
                    msg.extend_from_slice(&data);
                    update_subscriptions(&subscriptions, &msg, &subscribed);
                    self.changed.notify_all();
                }
                Incoming::Command(..) => {}
            }
        }
        self.remove(id);
    }
}

fn update_subscriptions(subs: &Mutex<Vec<Vec<u8>>>, msg: &[u8], subscribed: &AtomicBool) {
    let mut s = subs.lock().unwrap_or_else(|p| p.into_inner());
    match msg.split_first() {
        Some((1, topic)) => s.push(topic.to_vec()),
        Some((0, topic)) => {
            if let Some(i) = s.iter().position(|t| t == topic) {
                s.swap_remove(i);
            }
        }
        _ => {}
    }
    subscribed.store(!s.is_empty(), Ordering::Release);
}

/// One ZeroMQ socket on one endpoint: bound (accepting any number of peers) or
/// connected (reconnecting until dropped).
pub struct Socket {
    shared: Arc<Shared>,
    local: Option<SocketAddr>,
    endpoint: String,
}

impl Socket {
    /// Opens `endpoint` (`tcp://host:port`) as a `me` socket. Incoming messages
    /// (SUB, PULL) go to `on_message`; a SUB subscribes to `topic` (empty: all).
    pub fn open(
        me: SocketType,
        endpoint: &str,
        bind: bool,
        topic: &[u8],
        on_message: Option<OnMessage>,
    ) -> io::Result<Socket> {
        let address =
            tcp_address(endpoint).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let shared = Arc::new(Shared {
            me,
            state: Mutex::new(State {
                peers: Vec::new(),
                next: 0,
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            ids: AtomicU64::new(0),
            on_message,
            topic: topic.to_vec(),
            threads: Mutex::new(Vec::new()),
            streams: Mutex::new(Vec::new()),
        });
        let local = if bind {
            let listener = TcpListener::bind(&address)?;
            listener.set_nonblocking(true)?;
            let local = listener.local_addr()?;
            let s = shared.clone();
            shared.spawn(move || accept_loop(s, listener));
            Some(local)
        } else {
            let targets: Vec<SocketAddr> = address.to_socket_addrs()?.collect();
            let s = shared.clone();
            shared.spawn(move || connect_loop(s, targets));
            None
        };
        Ok(Socket {
            shared,
            local,
            endpoint: endpoint.to_string(),
        })
    }

    /// The address a bound socket listens on (its port when `:0` was asked).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Peers connected (for a PUB: subscribed) now.
    pub fn ready_peers(&self) -> usize {
        self.shared
            .lock()
            .peers
            .iter()
            .filter(|p| p.subscribed.load(Ordering::Acquire) || self.shared.me != SocketType::Pub)
            .count()
    }

    /// Waits until at least one peer is ready; false on timeout.
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.ready_peers() > 0 {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let g = self.shared.lock();
            let _ = self
                .shared
                .changed
                .wait_timeout(g, (deadline - now).min(Duration::from_millis(10)));
        }
    }

    /// Sends one message. PUB: to every peer subscribed to a prefix of the first
    /// frame (none: dropped, as ZeroMQ does); returns true. PUSH: to the next peer
    /// in turn, waiting up to `timeout` for one; false when none came.
    pub fn send(&self, frames: &[&[u8]], timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut dead = Vec::new();
        let mut st = self.shared.lock();
        let sent = match self.shared.me {
            SocketType::Pub => {
                let first = frames.first().copied().unwrap_or_default();
                for p in st.peers.iter_mut() {
                    let wants = p
                        .subscriptions
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .iter()
                        .any(|t| first.starts_with(t));
                    if wants && write_message(&mut p.writer, frames).is_err() {
                        dead.push(p.id);
                    }
                }
                true
            }
            _ => loop {
                if !st.peers.is_empty() {
                    let i = st.next % st.peers.len();
                    st.next = i + 1;
                    let p = &mut st.peers[i];
                    if write_message(&mut p.writer, frames).is_ok() {
                        break true;
                    }
                    let id = p.id;
                    st.peers.retain(|p| p.id != id);
                    dead.push(id);
                    continue;
                }
                let now = Instant::now();
                if now >= deadline {
                    break false;
                }
                st = self
                    .shared
                    .changed
                    .wait_timeout(st, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            },
        };
        drop(st);
        for id in dead {
            self.shared.remove(id);
        }
        sent
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for (_, s) in self
            .shared
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.shared.changed.notify_all();
        let threads: Vec<_> = self
            .shared
            .threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    while !shared.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(false).is_err() {
                    continue;
                }
                let s = shared.clone();
                shared.spawn(move || s.serve(stream));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(ACCEPT_POLL),
            Err(_) => std::thread::sleep(ACCEPT_POLL),
        }
    }
}

fn connect_loop(shared: Arc<Shared>, targets: Vec<SocketAddr>) {
    while !shared.stop.load(Ordering::Acquire) {
        if let Some(stream) = targets
            .iter()
            .find_map(|a| TcpStream::connect_timeout(a, HANDSHAKE_TIMEOUT).ok())
        {
            shared.serve(stream);
        }
        let until = Instant::now() + RECONNECT_INTERVAL;
        while Instant::now() < until && !shared.stop.load(Ordering::Acquire) {
            std::thread::sleep(ACCEPT_POLL.min(RECONNECT_INTERVAL));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn pair(tx: SocketType, rx: SocketType) -> (Socket, Socket, mpsc::Receiver<Vec<Vec<u8>>>) {
        let (send, recv) = mpsc::channel();
        let send = Mutex::new(send);
        let on: OnMessage = Arc::new(move |m| {
            let _ = send.lock().unwrap().send(m);
        });
        let a = Socket::open(tx, "tcp://127.0.0.1:0", true, b"", None).unwrap();
        let port = a.local_addr().unwrap().port();
        let b = Socket::open(rx, &format!("tcp://127.0.0.1:{port}"), false, b"", Some(on)).unwrap();
        assert!(a.wait_ready(Duration::from_secs(5)));
        assert!(b.wait_ready(Duration::from_secs(5)));
        (a, b, recv)
    }

    #[test]
    fn pub_sub_and_push_pull_carry_short_and_long_frames() {
        for (tx, rx) in [
            (SocketType::Pub, SocketType::Sub),
            (SocketType::Push, SocketType::Pull),
        ] {
            let (a, _b, got) = pair(tx, rx);
            let long = vec![7u8; 300];
            assert!(a.send(&[b"key", &long], Duration::from_secs(1)));
            assert!(a.send(&[b"x"], Duration::from_secs(1)));
            let m = got.recv_timeout(Duration::from_secs(5)).unwrap();
            assert_eq!(m, vec![b"key".to_vec(), long]);
            assert_eq!(
                got.recv_timeout(Duration::from_secs(5)).unwrap(),
                vec![b"x".to_vec()]
            );
        }
    }

    #[test]
    fn mismatched_socket_types_never_connect() {
        let a = Socket::open(SocketType::Pub, "tcp://127.0.0.1:0", true, b"", None).unwrap();
        let port = a.local_addr().unwrap().port();
        let b = Socket::open(
            SocketType::Pull,
            &format!("tcp://127.0.0.1:{port}"),
            false,
            b"",
            None,
        )
        .unwrap();
        assert!(!b.wait_ready(Duration::from_millis(300)));
    }

    #[test]
    fn push_without_peers_times_out() {
        let a = Socket::open(SocketType::Push, "tcp://127.0.0.1:0", true, b"", None).unwrap();
        assert!(!a.send(&[b"lost"], Duration::from_millis(50)));
    }

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(tcp_address("tcp://*:5555").unwrap(), "0.0.0.0:5555");
        assert!(tcp_address("ipc:///tmp/x")
            .unwrap_err()
            .to_string()
            .contains("only tcp://"));
        assert!(tcp_address("tcp://host")
            .unwrap_err()
            .to_string()
            .contains("no port"));
        assert!(tcp_address("tcp://host:99999")
            .unwrap_err()
            .to_string()
            .contains("port"));
    }

    #[test]
    fn garbage_from_a_peer_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let b = Socket::open(
            SocketType::Sub,
            &format!("tcp://127.0.0.1:{port}"),
            false,
            b"",
            None,
        )
        .unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.write_all(&[0x42; 64]).unwrap();
        assert!(!b.wait_ready(Duration::from_millis(300)));
    }
}

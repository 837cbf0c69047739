//! The metrics endpoint: HTTP/1.1 over one thread, with bounds a hostile or
//! careless client cannot push past.
//!
//! hyper serves the connections on a single-threaded tokio runtime, so idle
//! connections cost a task and a buffer each, never a thread. The bounds:
//! - at most [`MAX_CONNECTIONS`] open at once; past that a new connection is
//!   closed as soon as it is accepted (Prometheus retries at its next scrape);
//! - the request line and headers must arrive within [`HEADER_TIMEOUT`] of
//!   the connection's start (hyper's header read timeout, which starts at
//!   once), and a kept-alive connection is closed after [`CONNECTION_LIFETIME`]
//!   whatever it does;
//! - headers larger than [`MAX_HEADER_BYTES`] end the connection;
//! - GET and HEAD only (405 with `Allow: GET, HEAD` otherwise), request
//!   bodies never read;
//! - an accept that fails for want of file descriptors or memory (EMFILE,
//!   ENFILE, ENOBUFS, ENOMEM) is retried after [`ACCEPT_BACKOFF`], logged
//!   once per episode; the socket keeps listening throughout.

use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE as CT};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{oneshot, Semaphore};

use crate::job::Env;
use crate::log;
use crate::metrics::{render, Machine, CONTENT_TYPE};

/// Connections served at once (each is a file descriptor and a buffer of
/// at most [`MAX_HEADER_BYTES`]): a thousand idle ones and the scrapers fit.
pub const MAX_CONNECTIONS: usize = 2048;
/// Time a client has to send its request line and headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a connection stays open, kept alive or not.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// The read buffer's bound: a request line and headers longer than this
/// end the connection (hyper's smallest allowed value is 8 KiB).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Wait before the next accept when the process is out of descriptors.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(250);

/// The running endpoint; dropping it (or [`Endpoint::stop`]) closes it.
pub struct Endpoint {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    addr: SocketAddr,
}

impl Endpoint {
    /// Binds `addr` now, so that a port in use fails the start, and serves
    /// it on a thread of its own.
    pub fn start(addr: SocketAddr, env: &Env) -> io::Result<Endpoint> {
        let listener = bind(addr)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let (tx, rx) = oneshot::channel();
        let env = env.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || runtime.block_on(serve(listener, env, rx)))?;
        Ok(Endpoint {
            stop: Some(tx),
            thread: Some(thread),
            addr,
        })
    }

    /// The address it listens on (the port chosen, for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every connection and waits for the thread.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.shut();
    }
}

/// A listening socket on `addr`, non-blocking for tokio (the standard
/// library sets SO_REUSEADDR, so a restart within TIME_WAIT binds).
pub fn bind(addr: SocketAddr) -> io::Result<StdListener> {
    let listener = StdListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Whether an accept error means the process or the system ran out of a
/// resource (the listening socket itself is fine).
fn exhausted(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

async fn serve(listener: StdListener, env: Env, mut stop: oneshot::Receiver<()>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error(None, &format!("metrics endpoint: cannot serve: {e}"));
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut starved = false;
    let mut full = false;
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if exhausted(&e) => {
                if !starved {
                    starved = true;
                    log::warn(
                        None,
                        &format!(
                            "metrics endpoint: cannot accept a connection ({e}); retrying every \
                             {} ms, still listening",
                            ACCEPT_BACKOFF.as_millis()
                        ),
                    );
                }
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
            // A connection reset before it was accepted, and the like:
            // about that connection only.
            Err(_) => continue,
        };
        if starved {
            starved = false;
            log::info(None, "metrics endpoint: accepting connections again");
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            if !full {
                full = true;
                log::warn(
                    None,
                    &format!(
                        "metrics endpoint: {MAX_CONNECTIONS} connections open; closing new ones \
                         until some end"
                    ),
                );
            }
            drop(stream);
            continue;
        };
        if full && slots.available_permits() > MAX_CONNECTIONS / 2 {
            full = false;
        }
        let env = env.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let _ = stream.set_nodelay(true);
            let service = hyper::service::service_fn(move |req| {
                let env = env.clone();
                async move { Ok::<_, Infallible>(respond(&req, &env)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                // `printf 'GET ...' | nc` shuts its write side after the
                // request: the answer is still written (the header timeout
                // and the lifetime bound such a connection).
                .half_close(true)
                .serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = tokio::time::sleep(CONNECTION_LIFETIME) => {}
            }
        });
    }
    // Returning drops the runtime, and with it every connection's task.
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CT, HeaderValue::from_static(content_type));
    r
}

/// The answer to one request. HEAD gets GET's headers without the body
/// (hyper leaves the body out).
fn respond(req: &Request<Incoming>, env: &Env) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET and HEAD: try GET /metrics\n".into(),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/metrics" => {
            let status = env.status().clone();
            text(
                StatusCode::OK,
                CONTENT_TYPE,
                render(&status, &Machine::read(&env.root)),
            )
        }
        "/" => text(
            StatusCode::OK,
            "text/html",
            "<html><body><h1>udamon</h1><p><a href=\"/metrics\">metrics</a></p></body></html>"
                .into(),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: try /metrics\n".into(),
        ),
    }
}

//! The accept loop of the simulator.
//!
//! The server is a plain tokio `TcpListener` with one hyper HTTP/1 connection task per client,
//! around the axum `Router`, instead of `axum::serve`, for one reason: the "drop" fault must be
//! able to close a connection without sending any answer. A handler asks for that by putting a
//! [`DropConnection`] marker in the extensions of its response; the service wrapping the router
//! turns such a response into an `Err`, and hyper answers an error of the service by closing the
//! connection at once, writing nothing. The client sees its request fail with a connection error
//! after the server has done the work (the order exists), which is the case a careless client
//! pays twice for.

use std::fmt;

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

/// Response extension: close the connection instead of sending this response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DropConnection;

/// The error the wrapping service returns to make hyper drop the connection.
#[derive(Debug)]
struct DroppedOnPurpose;

impl fmt::Display for DroppedOnPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connection dropped by the simulator's drop fault")
    }
}

impl std::error::Error for DroppedOnPurpose {}

/// Accepts connections until `shutdown` turns true, then closes every open connection.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            accepted = listener.accept() => {
                let (stream, _peer) = match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of file descriptors and the like: wait a little, keep serving.
                        tracing::warn!("simulator accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let router = router.clone();
                connections.spawn(async move {
                    let service = tower::service_fn(move |request: hyper::Request<Incoming>| {
                        let router = router.clone();
                        async move {
                            // The router's error type is `Infallible`.
                            let response = match router.oneshot(request).await {
                                Ok(r) => r,
                                Err(never) => match never {},
                            };
                            if response.extensions().get::<DropConnection>().is_some() {
                                Err(DroppedOnPurpose)
                            } else {
                                Ok::<_, DroppedOnPurpose>(response)
                            }
                        }
                    });
                    // No timer: hyper's header-read timeout would also close idle keep-alive
                    // connections, racing a client that reuses one. Connections end when their
                    // client closes them, or at shutdown.
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                        .await;
                });
            }
        }
    }
    drop(listener);
    connections.shutdown().await;
}

//! One call, one connection: the client side with its timeout, and the
//! server loop. Both record the call in the trace.

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use turmoil::net::{TcpListener, TcpStream};

use super::Ctx;
use crate::trace::Event;
use crate::wire::{Envelope, Request, Response, read_frame, write_frame};

/// Why a call got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallError {
    /// No answer within the timeout (a partition, a hold, a lost answer).
    Timeout,
    /// The connection failed (refused by a crashed host, reset, broken).
    Transport,
}

/// Calls `to` and waits at most `timeout_ms` simulated milliseconds.
pub(crate) async fn call(
    ctx: &Ctx,
    from: &str,
    to: &str,
    port: u16,
    request: Request,
    timeout_ms: u64,
) -> Result<Response, CallError> {
    call_at(ctx, from, to, (to, port), request, timeout_ms).await
}

/// Calls the host and port `at`, which the trace names `to` (a replica of
/// a group answers on its group's host), and waits at most `timeout_ms`
/// simulated milliseconds.
pub(crate) async fn call_at(
    ctx: &Ctx,
    from: &str,
    to: &str,
    at: (&str, u16),
    request: Request,
    timeout_ms: u64,
) -> Result<Response, CallError> {
    let id = ctx.next_rpc_id();
    ctx.emit(Event::Rpc {
        id,
        from: from.to_string(),
        to: to.to_string(),
        req: request.clone(),
    });
    let envelope = Envelope {
        id,
        from: from.to_string(),
        request,
    };
    let exchange = async {
        let mut stream = TcpStream::connect(at).await?;
        write_frame(&mut stream, &envelope).await?;
        read_frame::<_, Response>(&mut stream).await
    };
    let outcome = tokio::time::timeout(Duration::from_millis(timeout_ms), exchange).await;
    let (error, kind) = match outcome {
        Ok(Ok(response)) => {
            ctx.emit(Event::Delivered { id });
            return Ok(response);
        }
        Ok(Err(e)) => (format!("transport: {}", e.kind()), CallError::Transport),
        Err(_) => ("timeout".to_string(), CallError::Timeout),
    };
    ctx.emit(Event::RpcFailed {
        id,
        from: from.to_string(),
        to: to.to_string(),
        error,
    });
    Err(kind)
}

/// Accepts calls on `port` forever; each connection carries one call,
/// handled on its own task. The handler records its reply and returns
/// `None` to drop it. Dropping the returned future (a crash) stops the
/// calls in progress too: they never answer.
pub(crate) async fn serve<H, Fut>(port: u16, handler: Rc<H>) -> turmoil::Result
where
    H: Fn(Envelope) -> Fut + 'static,
    Fut: Future<Output = Option<Response>> + 'static,
{
    let listener = TcpListener::bind(("0.0.0.0", port)).await?;
    let mut calls = tokio::task::JoinSet::new();
    loop {
        let (mut stream, _) = listener.accept().await?;
        // Forget the calls that ended: the set holds only those in flight.
        while calls.try_join_next().is_some() {}
        let handler = handler.clone();
        calls.spawn_local(async move {
            let Ok(envelope) = read_frame::<_, Envelope>(&mut stream).await else {
                return;
            };
            if let Some(response) = handler(envelope).await {
                // The caller may have given up; its timeout is in the trace.
                let _ = write_frame(&mut stream, &response).await;
            }
        });
    }
}

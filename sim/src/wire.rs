//! The simulator's RPC: messages between hosts and their framing.
//!
//! One call is one TCP connection over turmoil's simulated network: the
//! client writes one frame, the server answers with one frame (or, under a
//! fault, closes without answering). A frame is a 4-byte big-endian length
//! and that many bytes of JSON. The same types appear in the trace, so the
//! trace holds every request and answer exactly as sent.

use connreg::catalog::{CatalogPage, CatalogQuery};
use connreg::request::{AuditEntry, CircuitCloseParams};
use connreg::{
    ActionId, FenceToken, HeartbeatOutcome, HeartbeatParams, MaintainParams, Maintained,
    Publication, RegisterParams, Replica, ReplicaId, Resolved, Revision, RouteAssignment,
    RouteRecord, RouteRequest, SettleParams, Settled, TenantId,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::limits::FRAME_BYTES_MAX;

/// The port registry hosts listen on.
pub const REGISTRY_PORT: u16 = 7000;
/// The port replica hosts listen on for dispatches and cancellations.
pub const REPLICA_PORT: u16 = 7100;

/// A domain error as it crosses the wire: the variant's stable name
/// (`connreg::Error::kind`) and its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireError {
    /// `conflict`, `no_capacity`, `stale_cursor`, ...
    pub kind: String,
    /// The error's message.
    pub message: String,
}

impl From<connreg::Error> for WireError {
    fn from(e: connreg::Error) -> Self {
        WireError {
            kind: e.kind().to_string(),
            message: e.to_string(),
        }
    }
}

/// A registry answer: the contract's result.
pub type Answer<T> = Result<T, WireError>;

/// A request from one host to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Request {
    /// `Routing::route_resolve`.
    Resolve {
        /// The request.
        request: RouteRequest,
    },
    /// `Routing::route_get`.
    RouteGet {
        /// The caller's verified tenant.
        tenant: TenantId,
        /// The action.
        action: ActionId,
    },
    /// `Routing::route_settle`.
    Settle {
        /// The settlement.
        params: SettleParams,
    },
    /// `ReplicaLifecycle::replica_register`.
    Register {
        /// The registration.
        params: RegisterParams,
    },
    /// `ReplicaLifecycle::replica_heartbeat`.
    Heartbeat {
        /// The heartbeat.
        params: HeartbeatParams,
    },
    /// `ReplicaLifecycle::replica_drain`.
    Drain {
        /// The replica.
        replica: ReplicaId,
    },
    /// `ReplicaLifecycle::lease_maintain`.
    Maintain {
        /// The batch bound.
        params: MaintainParams,
    },
    /// `ReplicaLifecycle::circuit_close`.
    CircuitClose {
        /// The operator action.
        params: CircuitCloseParams,
    },
    /// `CatalogAdmin::catalog_publish`.
    Publish {
        /// The publication.
        publication: Publication,
    },
    /// `CatalogRead::catalog_page`.
    Page {
        /// The query.
        query: CatalogQuery,
    },
    /// Dispatcher to replica: run the action under this assignment.
    Execute {
        /// The assignment the registry returned.
        assignment: RouteAssignment,
    },
    /// Dispatcher to replica: stop the action if it is running.
    Cancel {
        /// The action.
        action: ActionId,
        /// The fence of the assignment being cancelled.
        fence: FenceToken,
    },
}

impl Request {
    /// The action the request is about, if any.
    pub fn action(&self) -> Option<&ActionId> {
        match self {
            Request::Resolve { request } => Some(&request.action),
            Request::RouteGet { action, .. } | Request::Cancel { action, .. } => Some(action),
            Request::Settle { params } => Some(&params.assignment.identity.action),
            Request::Execute { assignment } => Some(&assignment.identity.action),
            _ => None,
        }
    }

    /// The operation's name, as faults and the trace name it.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Resolve { .. } => "resolve",
            Request::RouteGet { .. } => "route_get",
            Request::Settle { .. } => "settle",
            Request::Register { .. } => "register",
            Request::Heartbeat { .. } => "heartbeat",
            Request::Drain { .. } => "drain",
            Request::Maintain { .. } => "maintain",
            Request::CircuitClose { .. } => "circuit_close",
            Request::Publish { .. } => "publish",
            Request::Page { .. } => "page",
            Request::Execute { .. } => "execute",
            Request::Cancel { .. } => "cancel",
        }
    }

    /// True for the operations that may change the store.
    pub fn mutates(&self) -> bool {
        !matches!(
            self,
            Request::RouteGet { .. }
                | Request::Page { .. }
                | Request::Execute { .. }
                | Request::Cancel { .. }
        )
    }
}

/// What a replica reports about one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Execution {
    /// The provider finished.
    Completed,
    /// The provider's outcome is unknown.
    Unknown,
    /// Cancelled while running.
    Cancelled,
    /// Refused: the assignment names another replica. No side effect.
    Misdirected,
}

/// An answer to a [`Request`], variant for variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Response {
    /// To `Resolve`.
    Resolve {
        /// The result.
        result: Answer<Resolved>,
    },
    /// To `RouteGet`.
    RouteGet {
        /// The result.
        result: Answer<Option<RouteRecord>>,
    },
    /// To `Settle`.
    Settle {
        /// The result.
        result: Answer<Settled>,
    },
    /// To `Register`.
    Register {
        /// The result.
        result: Answer<Replica>,
    },
    /// To `Heartbeat`.
    Heartbeat {
        /// The result.
        result: Answer<HeartbeatOutcome>,
    },
    /// To `Drain`.
    Drain {
        /// The result.
        result: Answer<Replica>,
    },
    /// To `Maintain`.
    Maintain {
        /// The result.
        result: Answer<Maintained>,
    },
    /// To `CircuitClose`.
    CircuitClose {
        /// The result.
        result: Answer<AuditEntry>,
    },
    /// To `Publish`.
    Publish {
        /// The result.
        result: Answer<Revision>,
    },
    /// To `Page`.
    Page {
        /// The result.
        result: Answer<CatalogPage>,
    },
    /// To `Execute`.
    Execute {
        /// What happened.
        execution: Execution,
    },
    /// To `Cancel`.
    Cancel {
        /// True when the action was running and is now stopped.
        running: bool,
    },
    /// The host does not serve this request.
    Refused {
        /// Why.
        reason: String,
    },
}

impl Response {
    /// The error kind when the answer is a domain error.
    pub fn error_kind(&self) -> Option<&str> {
        let e = match self {
            Response::Resolve { result } => result.as_ref().err(),
            Response::RouteGet { result } => result.as_ref().err(),
            Response::Settle { result } => result.as_ref().err(),
            Response::Register { result } => result.as_ref().err(),
            Response::Heartbeat { result } => result.as_ref().err(),
            Response::Drain { result } => result.as_ref().err(),
            Response::Maintain { result } => result.as_ref().err(),
            Response::CircuitClose { result } => result.as_ref().err(),
            Response::Publish { result } => result.as_ref().err(),
            Response::Page { result } => result.as_ref().err(),
            Response::Execute { .. } | Response::Cancel { .. } | Response::Refused { .. } => None,
        };
        e.map(|e| e.kind.as_str())
    }
}

/// The envelope of one call: who asks, the call's trace ID, the request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The call's ID in the trace.
    pub id: u64,
    /// The calling host.
    pub from: String,
    /// The request.
    pub request: Request,
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    value: &T,
) -> std::io::Result<()> {
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|n| *n <= FRAME_BYTES_MAX)
        .ok_or_else(|| std::io::Error::other("frame too large"))?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame).await?;
    w.flush().await
}

/// Reads one frame.
pub async fn read_frame<R: AsyncRead + Unpin, T: for<'de> Deserialize<'de>>(
    r: &mut R,
) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len);
    if len > FRAME_BYTES_MAX {
        return Err(std::io::Error::other("frame too large"));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(std::io::Error::other)
}

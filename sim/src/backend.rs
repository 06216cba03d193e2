//! The shared store behind every registry host, and how hosts reach it.
//!
//! The store is created outside the simulated hosts, so it outlives any
//! registry host crash, as a database outlives its clients. A backend is
//! anything that implements the whole registry contract and [`Inspect`]:
//! the in-memory backend and the PostgreSQL one plug in the same way.
//!
//! Two ways to call it:
//!
//! - **inline** (the in-memory backend): a registry host awaits the
//!   backend's future on its own simulated runtime and records the answer
//!   in the trace itself. The memory backend never blocks, so calls complete
//!   within the step, in the simulation's host order: the run is
//!   deterministic, and the trace order is the commit order.
//! - **offloaded** (a backend with real I/O, such as PostgreSQL): the call
//!   runs on a real Tokio runtime outside the simulation, where it races
//!   other calls for real. Its answer is recorded the moment the backend
//!   returns it, into a queue the world moves into the trace after the step;
//!   the world waits for every offloaded call before it takes the next
//!   step. So simulated time never runs ahead of the database, and every
//!   answer is in the trace before any snapshot that reflects it. Each
//!   offloaded call runs inside `connreg::postgres::observe_commit`, so its
//!   answer carries the commit sequence of its transaction (if it
//!   committed one); the world puts a step's answers in that order.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use connreg::contracts::Registry;
use connreg::{ChangeCursor, Inspect, ManualClock, Result, StoreChanges};

use crate::plant::PlantedBug;
use crate::trace::{Event, ReleasedRef};
use crate::wire::{Request, Response, WireError};

/// What the PostgreSQL backend tells of a call besides its answer: its
/// commit sequence, the snapshot position of a lock-free read, and whether
/// it ran the call again after a lost connection.
#[cfg(feature = "postgres")]
async fn observe_commit<F: Future>(call: F) -> (F::Output, Observed) {
    let (answer, seen) = connreg::postgres::observe_commit(call).await;
    let seen = Observed {
        commit: seen.commit,
        read_at: seen.read_at,
        read_unseen: seen.read_unseen,
        retried: seen.retried,
    };
    (answer, seen)
}

/// Without the PostgreSQL backend no call has a commit sequence.
#[cfg(not(feature = "postgres"))]
async fn observe_commit<F: Future>(call: F) -> (F::Output, Observed) {
    (call.await, Observed::default())
}

/// See [`Effects`].
#[derive(Debug, Clone, Default)]
struct Observed {
    commit: Option<u64>,
    read_at: Option<u64>,
    read_unseen: Vec<u64>,
    retried: bool,
}

/// A backend the simulator can drive: the whole contract, a snapshot for
/// the checkers, and cheap clones that share one store.
pub trait Backend: Registry + Inspect + Clone + 'static {}
impl<B: Registry + Inspect + Clone + 'static> Backend for B {}

/// Most polls of an inline future before it counts as blocked. Memory
/// backend calls finish in one poll, or two under a plant that yields.
const INLINE_POLLS_MAX: u32 = 16;

/// The shared store and how to call it. Clones share the store.
#[derive(Clone)]
pub struct Store<B> {
    backend: B,
    offload: Option<Offload>,
    /// A bug planted in how the store is called (`silent-release`,
    /// `maintain-overcount`), if any.
    plant: Option<PlantedBug>,
    /// The registry's injected clock, read for each answer.
    clock: Option<ManualClock>,
}

/// What the trace records of a call besides its answer.
#[derive(Debug, Clone, Default)]
pub struct Effects {
    /// The commit sequence of its transaction (offloaded calls that
    /// committed something).
    pub commit: Option<u64>,
    /// The highest commit sequence the snapshot of a lock-free read showed
    /// (offloaded calls answered from a snapshot without locks).
    pub read_at: Option<u64>,
    /// With `read_at`: the sequences below it the snapshot did not show.
    pub read_unseen: Vec<u64>,
    /// True when the backend ran the call again on a fresh connection
    /// after losing the first (offloaded calls).
    pub retried: bool,
    /// The registry clock (ms) when it was decided.
    pub clock: Option<u64>,
    /// The reservations it released, as the answer names them.
    pub released: Option<Vec<ReleasedRef>>,
}

#[derive(Clone)]
struct Offload {
    handle: tokio::runtime::Handle,
    inflight: Arc<AtomicUsize>,
    recorded: Arc<Mutex<Vec<Event>>>,
}

struct InflightGuard(Arc<AtomicUsize>);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<B: Backend> Store<B> {
    /// A store called inline, on the simulated hosts' runtimes.
    pub fn inline(backend: B) -> Store<B> {
        Store {
            backend,
            offload: None,
            plant: None,
            clock: None,
        }
    }

    /// A store whose calls run on `handle`, a real multi-threaded runtime.
    pub fn offloaded(backend: B, handle: tokio::runtime::Handle) -> Store<B> {
        Store {
            backend,
            offload: Some(Offload {
                handle,
                inflight: Arc::new(AtomicUsize::new(0)),
                recorded: Arc::new(Mutex::new(Vec::new())),
            }),
            plant: None,
            clock: None,
        }
    }

    /// The same store, stamping each answer with `clock`'s reading.
    pub fn with_clock(mut self, clock: ManualClock) -> Store<B> {
        self.clock = Some(clock);
        self
    }

    /// The same store with `plant` switched on in how it is called; plants
    /// of other homes are ignored here.
    pub fn with_plant(mut self, plant: Option<PlantedBug>) -> Store<B> {
        self.plant = plant.filter(|p| p.in_store_calls());
        self
    }

    /// True when calls are offloaded (the run is not deterministic).
    pub fn is_offloaded(&self) -> bool {
        self.offload.is_some()
    }

    /// Offloaded calls not finished yet.
    pub fn inflight(&self) -> usize {
        self.offload
            .as_ref()
            .map(|o| o.inflight.load(Ordering::SeqCst))
            .unwrap_or(0)
    }

    /// Answers recorded by offloaded calls since the last call, in the
    /// order the backend returned them.
    pub fn take_recorded(&self) -> Vec<Event> {
        match &self.offload {
            None => Vec::new(),
            Some(o) => std::mem::take(&mut *o.recorded.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }

    /// Answers `request` from a simulated registry host. `reply` makes the
    /// trace event of the answer from the answer and its [`Effects`]: the
    /// event comes back to the caller to record (inline), or `None` when
    /// it was recorded as the backend returned (offloaded; see
    /// [`Store::take_recorded`]).
    pub async fn answer<R>(&self, request: Request, reply: R) -> (Response, Option<Event>)
    where
        R: FnOnce(Response, Effects) -> Event + Send + 'static,
    {
        let backend = self.backend.clone();
        let plant = self.plant;
        let clock = self.clock.as_ref().map(|c| connreg::Clock::now(c).0);
        match &self.offload {
            None => {
                let (response, released) = respond(backend, request, plant).await;
                let effects = Effects {
                    clock,
                    released,
                    ..Effects::default()
                };
                let event = reply(response.clone(), effects);
                (response, Some(event))
            }
            Some(o) => {
                o.inflight.fetch_add(1, Ordering::SeqCst);
                let guard = InflightGuard(o.inflight.clone());
                let recorded = o.recorded.clone();
                let task = o.handle.spawn(async move {
                    let ((response, released), seen) =
                        observe_commit(respond(backend, request, plant)).await;
                    let effects = Effects {
                        commit: seen.commit,
                        read_at: seen.read_at,
                        read_unseen: seen.read_unseen,
                        retried: seen.retried,
                        clock,
                        released,
                    };
                    recorded
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(reply(response.clone(), effects));
                    drop(guard);
                    response
                });
                let response = task.await.unwrap_or_else(|_| Response::Refused {
                    reason: "the backend call panicked or was cancelled".into(),
                });
                (response, None)
            }
        }
    }

    /// Runs a backend future from outside the simulation (setup and
    /// snapshots).
    pub fn block<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(B) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let fut = f(self.backend.clone());
        match &self.offload {
            Some(o) => o.handle.block_on(fut),
            None => poll_inline(fut),
        }
    }

    /// The rows of the store written since `cursor` (every row without
    /// one), for the checkers: the backend's change feed
    /// ([`Inspect::inspect_changes`]), which a backend without one answers
    /// with the whole store.
    pub fn changes(&self, cursor: Option<ChangeCursor>) -> Result<StoreChanges> {
        self.block(move |b| async move { b.inspect_changes(cursor).await })
    }
}

/// The backend's answer to one request (through a planted bug if one is
/// switched on), and the reservations it released: a settlement releases
/// the assignment it presents; a maintenance names its releases in its
/// answer.
async fn respond<B: Backend>(
    b: B,
    request: Request,
    plant: Option<PlantedBug>,
) -> (Response, Option<Vec<ReleasedRef>>) {
    match &request {
        Request::Settle { params } => {
            let named = ReleasedRef::of(&params.assignment);
            let response = respond_planted(b, request, plant).await;
            let released = match &response {
                Response::Settle { result: Ok(s) } if s.released => Some(vec![named]),
                _ => None,
            };
            (response, released)
        }
        Request::Maintain { .. } => {
            let response = respond_planted(b, request, plant).await;
            // The answer names what it released (LEASE-2), on every backend.
            let released = match &response {
                Response::Maintain { result: Ok(m) }
                    if !m.expired.is_empty() || !m.releases.is_empty() =>
                {
                    Some(
                        m.releases
                            .iter()
                            .map(|r| ReleasedRef {
                                action: r.action.clone(),
                                fence: r.fence,
                                replica: r.replica.clone(),
                                scopes: r.scopes.iter().cloned().collect(),
                            })
                            .collect(),
                    )
                }
                _ => None,
            };
            (response, released)
        }
        _ => (respond_planted(b, request, plant).await, None),
    }
}

/// The backend's answer to one request, through a planted bug if one is
/// switched on.
async fn respond_planted<B: Backend>(
    b: B,
    request: Request,
    plant: Option<PlantedBug>,
) -> Response {
    match (plant, request) {
        (Some(PlantedBug::SilentRelease), Request::Heartbeat { params }) => {
            let replica = params.replica.clone();
            let answer = b.replica_heartbeat(params).await;
            if matches!(answer, Ok(connreg::HeartbeatOutcome::Applied)) {
                release_one_silently(&b, &replica).await;
            }
            Response::Heartbeat {
                result: answer.map_err(WireError::from),
            }
        }
        (Some(PlantedBug::MaintainOvercount), Request::Maintain { params }) => {
            let mut answer = b.lease_maintain(params).await;
            if let Ok(m) = &mut answer
                && !m.expired.is_empty()
            {
                m.released += 1;
            }
            Response::Maintain {
                result: answer.map_err(WireError::from),
            }
        }
        (Some(PlantedBug::MaintainPageStopsEarly), Request::Maintain { mut params }) => {
            let page = crate::plant::MAINTENANCE_PAGE;
            params.max = params.max.min(page);
            let mut answer = b.lease_maintain(params).await;
            if let Ok(m) = &mut answer
                && m.expired.len() as u32 == page
            {
                m.more = false;
            }
            Response::Maintain {
                result: answer.map_err(WireError::from),
            }
        }
        (Some(PlantedBug::MaintenanceBatchShrinks), Request::Maintain { mut params }) => {
            params.max = params.max.min(crate::plant::MAINTENANCE_SHRUNK_BATCH);
            Response::Maintain {
                result: b.lease_maintain(params).await.map_err(WireError::from),
            }
        }
        (Some(PlantedBug::DrainLostInCrowd), Request::Drain { replica }) => {
            let crowded = match b.inspect().await {
                Ok(snapshot) => {
                    snapshot
                        .replicas
                        .iter()
                        .filter(|r| r.state == connreg::ReplicaState::Draining)
                        .count()
                        >= crate::plant::DRAINING_TRACKED
                }
                Err(_) => false,
            };
            let found = if crowded {
                b.replica_get(replica.clone()).await
            } else {
                Ok(None)
            };
            let result = match found {
                Ok(Some(mut r)) => {
                    r.state = connreg::ReplicaState::Draining;
                    Ok(r)
                }
                Ok(None) => b.replica_drain(replica).await,
                Err(e) => Err(e),
            };
            Response::Drain {
                result: result.map_err(WireError::from),
            }
        }
        (Some(PlantedBug::CircuitResetInCrowd), Request::Register { params }) => {
            let replica = params.spec.id.clone();
            let crowded = returns_open_in_crowd(&b, &replica).await;
            let mut result = b.replica_register(params).await;
            if crowded
                && let Ok(r) = &mut result
                && r.state == connreg::ReplicaState::Ready
                && r.circuit.open
            {
                let reset = connreg::request::CircuitCloseParams {
                    replica,
                    reason: "registered again".into(),
                };
                if b.circuit_close(reset).await.is_ok() {
                    r.circuit = connreg::Circuit::default();
                }
            }
            Response::Register {
                result: result.map_err(WireError::from),
            }
        }
        (_, request) => respond_plainly(b, request).await,
    }
}

/// For the `circuit-reset-in-crowd` plant: true when `replica` is offline
/// with its circuit open and more than [`crate::plant::OFFLINE_TRACKED`]
/// replicas are offline. The whole store is read only for such a replica.
async fn returns_open_in_crowd<B: Backend>(b: &B, replica: &connreg::ReplicaId) -> bool {
    let offline = |r: &connreg::Replica| r.state == connreg::ReplicaState::Offline;
    match b.replica_get(replica.clone()).await {
        Ok(Some(r)) if offline(&r) && r.circuit.open => {}
        _ => return false,
    }
    match b.inspect().await {
        Ok(snapshot) => {
            snapshot.replicas.iter().filter(|r| offline(r)).count() > crate::plant::OFFLINE_TRACKED
        }
        Err(_) => false,
    }
}

/// The `silent-release` plant: frees the first reservation held on
/// `replica` (route row and counters, through the contract) while the
/// answer the caller gets says nothing of it.
async fn release_one_silently<B: Backend>(b: &B, replica: &connreg::ReplicaId) {
    let Ok(snapshot) = b.inspect().await else {
        return;
    };
    let Some(route) = snapshot
        .routes
        .into_iter()
        .find(|r| r.reserved && &r.assignment.destination.replica == replica)
    else {
        return;
    };
    let _ = b
        .route_settle(connreg::SettleParams {
            assignment: route.assignment,
            outcome: connreg::Outcome::LeaseExpired,
        })
        .await;
}

/// The backend's answer to one request.
pub(crate) async fn respond_plainly<B: Backend>(b: B, request: Request) -> Response {
    fn wire<T>(r: connreg::Result<T>) -> Result<T, WireError> {
        r.map_err(WireError::from)
    }
    match request {
        Request::Resolve { request } => Response::Resolve {
            result: wire(b.route_resolve(request).await),
        },
        Request::RouteGet { tenant, action } => Response::RouteGet {
            result: wire(b.route_get(tenant, action).await),
        },
        Request::Settle { params } => Response::Settle {
            result: wire(b.route_settle(params).await),
        },
        Request::Register { params } => Response::Register {
            result: wire(b.replica_register(params).await),
        },
        Request::Heartbeat { params } => Response::Heartbeat {
            result: wire(b.replica_heartbeat(params).await),
        },
        Request::Drain { replica } => Response::Drain {
            result: wire(b.replica_drain(replica).await),
        },
        Request::Maintain { params } => Response::Maintain {
            result: wire(b.lease_maintain(params).await),
        },
        Request::CircuitClose { params } => Response::CircuitClose {
            result: wire(b.circuit_close(params).await),
        },
        Request::Publish { publication } => Response::Publish {
            result: wire(b.catalog_publish(publication).await),
        },
        Request::Page { query } => Response::Page {
            result: wire(b.catalog_page(query).await),
        },
        Request::Execute { .. } | Request::Cancel { .. } => Response::Refused {
            reason: "a registry does not execute actions".into(),
        },
    }
}

/// Drives a future that never waits on I/O or time to completion without a
/// runtime: the in-memory backend's futures are ready at once.
pub(crate) fn poll_inline<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    for _ in 0..INLINE_POLLS_MAX {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("an inline backend call did not finish: the backend is not an in-memory one")
}

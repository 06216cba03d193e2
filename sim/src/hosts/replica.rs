//! A replica host: registers, heartbeats, executes dispatched actions and
//! records every provider side effect in the ledger.
//!
//! The ledger entry is written by the replica itself, from its own
//! identity (its instance is the provider account), at the moment the side
//! effect starts: it records where an action really ran, whatever the
//! dispatcher believed.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use connreg::{ActionId, FenceToken, HeartbeatParams, RegisterParams, ReplicaSpec};
use rand::Rng;
use rand::rngs::SmallRng;
use tokio::sync::oneshot;

use super::rpc::{call, serve};
use super::{Ctx, backoff_ms, between, sleep_ms};
use crate::trace::Event;
use crate::wire::{Envelope, Execution, REGISTRY_PORT, REPLICA_PORT, Request, Response};

type Running = RefCell<BTreeMap<(ActionId, FenceToken), oneshot::Sender<()>>>;

/// How often a replica heartbeats: every `every_ms`, or a draw from
/// `[every_ms - jitter_ms, every_ms]` when `jitter_ms` is set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Beat {
    pub(crate) every_ms: u64,
    pub(crate) jitter_ms: u64,
}

/// Runs one incarnation of the replica host `me` for `spec`.
pub(crate) async fn run(
    ctx: Rc<Ctx>,
    spec: ReplicaSpec,
    unknown_ratio: f64,
    me: String,
) -> turmoil::Result {
    let beat = Beat {
        every_ms: ctx.scenario.lifecycle.heartbeat_ms,
        jitter_ms: 0,
    };
    serve_replica(ctx, spec, unknown_ratio, me, REPLICA_PORT, beat).await
}

/// Runs one incarnation of a replica: its heartbeats, and its executions
/// on `port`. `me` is its name in the trace; a replica of a group runs on
/// its group's host, one port each.
pub(crate) async fn serve_replica(
    ctx: Rc<Ctx>,
    spec: ReplicaSpec,
    unknown_ratio: f64,
    me: String,
    port: u16,
    beat: Beat,
) -> turmoil::Result {
    let (_, rng) = ctx.start(&me);
    let rng = Rc::new(RefCell::new(rng));
    let running: Rc<Running> = Rc::new(RefCell::new(BTreeMap::new()));
    let heartbeats = tokio::task::spawn_local(lifecycle(
        ctx.clone(),
        spec.clone(),
        me.clone(),
        rng.clone(),
        beat,
    ));
    // The heartbeats stop with this incarnation (a crashed group replica).
    let _stop = AbortOnDrop(heartbeats);
    let handler = Rc::new(move |envelope: Envelope| {
        let ctx = ctx.clone();
        let spec = spec.clone();
        let me = me.clone();
        let rng = rng.clone();
        let running = running.clone();
        async move {
            let response = handle(
                &ctx,
                &spec,
                unknown_ratio,
                &rng,
                &running,
                envelope.id,
                &envelope.request,
            )
            .await;
            ctx.emit(Event::Reply {
                id: envelope.id,
                from: me,
                to: envelope.from,
                resp: response.clone(),
                lost: false,
                commit: None,
                clock: None,
                released: None,
            });
            Some(response)
        }
    });
    serve(port, handler).await
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn handle(
    ctx: &Ctx,
    spec: &ReplicaSpec,
    unknown_ratio: f64,
    rng: &RefCell<SmallRng>,
    running: &Running,
    rpc: u64,
    request: &Request,
) -> Response {
    match request {
        Request::Execute { assignment } => {
            let d = &assignment.destination;
            if d.replica != spec.id || d.instance != spec.instance {
                return Response::Execute {
                    execution: Execution::Misdirected,
                };
            }
            let key = (
                assignment.identity.action.clone(),
                assignment.reservation.fence,
            );
            ctx.emit(Event::Ledger {
                rpc,
                action: key.0.clone(),
                tenant: assignment.identity.tenant.clone(),
                instance: spec.instance.clone(),
                replica: spec.id.clone(),
                account: spec.instance.clone(),
                fence: key.1,
            });
            let (tx, rx) = oneshot::channel();
            running.borrow_mut().insert(key.clone(), tx);
            let exec_ms = between(&mut rng.borrow_mut(), ctx.scenario.workload.exec_ms);
            let cancelled = tokio::time::timeout(Duration::from_millis(exec_ms), rx)
                .await
                .is_ok();
            running.borrow_mut().remove(&key);
            let execution = if cancelled {
                Execution::Cancelled
            } else if unknown_ratio > 0.0 && rng.borrow_mut().random_bool(unknown_ratio) {
                Execution::Unknown
            } else {
                Execution::Completed
            };
            Response::Execute { execution }
        }
        Request::Cancel { action, fence } => {
            let tx = running.borrow_mut().remove(&(action.clone(), *fence));
            let running = tx.map(|tx| tx.send(()).is_ok()).unwrap_or(false);
            Response::Cancel { running }
        }
        _ => Response::Refused {
            reason: "a replica serves only execute and cancel".into(),
        },
    }
}

/// Registers, then heartbeats forever; registers again when the registry
/// has marked it offline (after its lease expired).
async fn lifecycle(
    ctx: Rc<Ctx>,
    spec: ReplicaSpec,
    me: String,
    rng: Rc<RefCell<SmallRng>>,
    beat: Beat,
) {
    let l = ctx.scenario.lifecycle.clone();
    let every = |rng: &RefCell<SmallRng>| {
        if beat.jitter_ms == 0 {
            beat.every_ms
        } else {
            let low = beat.every_ms.saturating_sub(beat.jitter_ms).max(1);
            between(&mut rng.borrow_mut(), [low, beat.every_ms])
        }
    };
    let timeout = ctx.scenario.workload.rpc_timeout_ms;
    let hosts = ctx.registry_hosts.clone();
    let mut target = rng.borrow_mut().random_range(0..hosts.len());
    let mut registered = false;
    let mut failures = 0u32;
    loop {
        // A silenced zone (a fleet-grain fault) sends nothing: its
        // replicas' leases run out while they keep serving.
        if ctx.zone_silenced(spec.zone.as_str()) {
            sleep_ms(every(&rng)).await;
            continue;
        }
        let request = if registered {
            Request::Heartbeat {
                params: HeartbeatParams {
                    replica: spec.id.clone(),
                    health_seq: ctx.next_health_seq(&spec.id),
                    lease_ttl_ms: l.lease_ttl_ms,
                },
            }
        } else {
            Request::Register {
                params: RegisterParams {
                    spec: spec.clone(),
                    health_seq: ctx.next_health_seq(&spec.id),
                    lease_ttl_ms: l.lease_ttl_ms,
                },
            }
        };
        let answer = call(&ctx, &me, &hosts[target], REGISTRY_PORT, request, timeout).await;
        let wait = match answer {
            Ok(Response::Register { result: Ok(_) }) => {
                registered = true;
                failures = 0;
                every(&rng)
            }
            Ok(Response::Heartbeat { result: Ok(_) }) => {
                failures = 0;
                every(&rng)
            }
            Ok(Response::Heartbeat { result: Err(e) }) if e.kind == "replica_unavailable" => {
                // Marked offline while alive: come back at once.
                registered = false;
                0
            }
            _ => {
                failures += 1;
                target = (target + 1) % hosts.len();
                if registered {
                    every(&rng)
                } else {
                    backoff_ms(
                        &mut rng.borrow_mut(),
                        ctx.scenario.workload.backoff_ms,
                        failures,
                    )
                }
            }
        };
        sleep_ms(wait).await;
    }
}

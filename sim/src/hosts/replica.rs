//! A replica host: registers, heartbeats, executes dispatched actions and
//! records every provider side effect in the ledger.
//!
//! The ledger entry is written by the replica itself, from its own
//! identity (its instance is the provider account), at the moment the side
//! effect starts: it records where an action really ran, whatever the
//! dispatcher believed.
//!
//! Each execution has its own stop signal: a second `execute` of the same
//! action and fence (a retry after a timeout, a duplicate) runs beside the
//! first, and a `cancel` stops every running execution of its action and
//! fence. An execution answers `cancelled` only when a cancel stopped it;
//! a stop signal dropped unsent stops nothing.
//!
//! A cancel is also kept (on the replica's disk, so a crash does not lose
//! it), with what the fence's executions that ran their course answered: a
//! later `execute` of a cancelled action and fence does not run, and
//! answers what an earlier execution of that fence answered (`completed`
//! when the work was done), else `cancelled`. With an action ID shared by
//! several dispatchers, one may hold the fence another has cancelled and
//! settled (EVID-9): the work must not start after the registry recorded
//! it cancelled, and a holder must not be told `cancelled` for work that
//! was done.

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
use crate::limits::REPLICA_FENCES_KEPT;
use crate::plant::PlantedBug;
use crate::trace::Event;
use crate::wire::{Envelope, Execution, REGISTRY_PORT, REPLICA_PORT, Request, Response};

/// The running executions' stop signals, by action and fence, then by
/// execution (numbered by this incarnation).
#[derive(Default)]
struct Running {
    next: u64,
    by_fence: BTreeMap<(ActionId, FenceToken), BTreeMap<u64, oneshot::Sender<()>>>,
}

impl Running {
    /// Keeps the stop signal of a new execution; returns its number. The
    /// `shared-stop-signal` plant keeps one signal per action and fence:
    /// the new one drops the one before it.
    fn start(
        &mut self,
        key: &(ActionId, FenceToken),
        tx: oneshot::Sender<()>,
        shared: bool,
    ) -> u64 {
        self.next += 1;
        let signals = self.by_fence.entry(key.clone()).or_default();
        if shared {
            signals.clear();
        }
        signals.insert(self.next, tx);
        self.next
    }

    /// Forgets the signal of an execution that ended (with the plant, the
    /// signal of whatever execution of its action and fence came last).
    fn end(&mut self, key: &(ActionId, FenceToken), execution: u64, shared: bool) {
        if let Some(signals) = self.by_fence.get_mut(key) {
            if shared {
                signals.clear();
            } else {
                signals.remove(&execution);
            }
            if signals.is_empty() {
                self.by_fence.remove(key);
            }
        }
    }

    /// Stops every running execution of an action and fence; true when
    /// one was running and received the signal.
    fn cancel(&mut self, key: &(ActionId, FenceToken)) -> bool {
        let signals = self.by_fence.remove(key).unwrap_or_default();
        let mut stopped = false;
        for tx in signals.into_values() {
            stopped |= tx.send(()).is_ok();
        }
        stopped
    }
}

/// What a replica keeps of the fences it served, at most
/// [`REPLICA_FENCES_KEPT`], the oldest forgotten first: whether a cancel
/// of the fence reached it, and what its executions that ran their course
/// answered.
#[derive(Debug, Default)]
pub(crate) struct FenceLog {
    next: u64,
    by_fence: BTreeMap<(ActionId, FenceToken), (u64, Kept)>,
    by_age: BTreeMap<u64, (ActionId, FenceToken)>,
}

/// One fence in a [`FenceLog`].
#[derive(Debug, Default, Clone, Copy)]
struct Kept {
    cancelled: bool,
    /// Executions started (their side effects begun) and not ended: a
    /// crash may leave some so.
    started: u32,
    ended: u32,
    /// The strongest answer of an execution of the fence that ended:
    /// `completed` over `unknown` over `cancelled`.
    finished: Option<Execution>,
}

impl FenceLog {
    fn entry(&mut self, key: &(ActionId, FenceToken)) -> &mut Kept {
        if !self.by_fence.contains_key(key) {
            self.next += 1;
            self.by_age.insert(self.next, key.clone());
            self.by_fence
                .insert(key.clone(), (self.next, Kept::default()));
            while self.by_age.len() > REPLICA_FENCES_KEPT {
                if let Some((_, old)) = self.by_age.pop_first() {
                    self.by_fence.remove(&old);
                }
            }
        }
        &mut self
            .by_fence
            .get_mut(key)
            .unwrap_or_else(|| unreachable!("just inserted"))
            .1
    }

    /// An execution of `key` started its side effect.
    fn started(&mut self, key: &(ActionId, FenceToken)) {
        self.entry(key).started += 1;
    }

    /// A cancel of `key` reached the replica.
    fn cancel(&mut self, key: &(ActionId, FenceToken)) {
        self.entry(key).cancelled = true;
    }

    /// An execution of `key` ended with `execution`.
    fn finished(&mut self, key: &(ActionId, FenceToken), execution: Execution) {
        let rank = |e: Option<Execution>| match e {
            Some(Execution::Completed) => 3,
            Some(Execution::Unknown) => 2,
            Some(_) => 1,
            None => 0,
        };
        let kept = self.entry(key);
        kept.ended += 1;
        if rank(Some(execution)) > rank(kept.finished) {
            kept.finished = Some(execution);
        }
    }

    /// The answer to a new execute of a cancelled fence, which does not
    /// run: what an earlier execution of it answered (`unknown` when one
    /// was cut short by a crash), else `cancelled`.
    /// `None` when the fence was not cancelled.
    fn refusal(&self, key: &(ActionId, FenceToken)) -> Option<Execution> {
        let (_, kept) = self.by_fence.get(key)?;
        if !kept.cancelled {
            return None;
        }
        // An execution that began its side effect and never ended (the
        // replica crashed under it) may have done the work.
        let interrupted = kept.started > kept.ended;
        Some(match kept.finished {
            Some(Execution::Completed) => Execution::Completed,
            _ if interrupted => Execution::Unknown,
            Some(e) => e,
            None => Execution::Cancelled,
        })
    }
}

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
    let running: Rc<RefCell<Running>> = Rc::new(RefCell::new(Running::default()));
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
                read_at: None,
                read_unseen: Vec::new(),
                retried: false,
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
    running: &RefCell<Running>,
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
            let refusal = ctx
                .fence_logs
                .borrow()
                .get(spec.id.as_str())
                .and_then(|log| log.refusal(&key));
            if let Some(execution) = refusal
                && ctx.plant != Some(PlantedBug::CancelForgotten)
            {
                return Response::Execute { execution };
            }
            ctx.fence_logs
                .borrow_mut()
                .entry(spec.id.to_string())
                .or_default()
                .started(&key);
            let side_effect = Event::Ledger {
                rpc,
                action: key.0.clone(),
                tenant: assignment.identity.tenant.clone(),
                instance: spec.instance.clone(),
                replica: spec.id.clone(),
                account: spec.instance.clone(),
                fence: key.1,
            };
            if ctx.plant == Some(PlantedBug::ExecuteRunsTwice) {
                // Planted: the provider client repeats the call it made.
                ctx.emit(side_effect.clone());
            }
            ctx.emit(side_effect);
            let shared = ctx.plant == Some(PlantedBug::SharedStopSignal);
            let (tx, rx) = oneshot::channel();
            let execution = running.borrow_mut().start(&key, tx, shared);
            let exec_ms = between(&mut rng.borrow_mut(), ctx.scenario.workload.exec_ms);
            let until = tokio::time::Instant::now() + Duration::from_millis(exec_ms); // determinism-ok: turmoil's simulated clock
            let cancelled = match tokio::time::timeout_at(until, rx).await {
                // A cancel stopped it.
                Ok(Ok(())) => true,
                // The signal was dropped unsent: nothing stopped the
                // work, which runs its course. The plant takes the drop
                // for a cancel.
                Ok(Err(_)) if shared => true,
                Ok(Err(_)) => {
                    tokio::time::sleep_until(until).await;
                    false
                }
                Err(_) => false,
            };
            running.borrow_mut().end(&key, execution, shared);
            let execution = if cancelled {
                Execution::Cancelled
            } else if unknown_ratio > 0.0 && rng.borrow_mut().random_bool(unknown_ratio) {
                Execution::Unknown
            } else {
                Execution::Completed
            };
            ctx.fence_logs
                .borrow_mut()
                .entry(spec.id.to_string())
                .or_default()
                .finished(&key, execution);
            Response::Execute { execution }
        }
        Request::Cancel { action, fence } => {
            let key = (action.clone(), *fence);
            ctx.fence_logs
                .borrow_mut()
                .entry(spec.id.to_string())
                .or_default()
                .cancel(&key);
            let running = running.borrow_mut().cancel(&key);
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

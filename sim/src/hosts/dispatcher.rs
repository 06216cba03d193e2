//! A dispatcher host: runs its quota of actions, a few at a time.
//!
//! One action: resolve (possibly as a burst of duplicates), dispatch to
//! the assigned replica only once the route is in hand (ROUTE-8), retry a
//! failed dispatch by resolving the same action ID again (which must return
//! the same route: PIN-2, PIN-4), optionally cancel through the route
//! (PIN-5), and settle with one of the four outcomes, possibly twice
//! (SETTLE-4) or with a stale assignment (SETTLE-2). Every action ends,
//! settled or failed with a typed error, or the liveness check fails.
//!
//! A resolve burst's copies are the action's calls too: before the action
//! ends with a typed error it waits for every copy (each bounded by its
//! timeout), and a copy answered with a route gives the action that route,
//! dispatched and settled as if the main call had got it (ROUTE-8,
//! PIN-7). A copy left unanswered is not read back and settled (with an
//! action ID shared by several dispatchers, the route read may be another
//! dispatcher's live reservation): the action resolves once more under
//! its ID instead, and takes a route it is answered.
//!
//! A journal that survives crashes records each open action (the fence it
//! holds, whether that fence may have been dispatched, and the outcome
//! learnt for it) before the calls it covers are sent; a restarted
//! dispatcher reconciles what its crash left open before it starts
//! anything new (PIN-5, PIN-6, PIN-7).

use std::collections::BTreeSet;
use std::rc::Rc;

use connreg::{
    ActionId, FenceToken, Outcome, RouteAssignment, RouteRequest, SettleParams, Settled,
};
use rand::Rng;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::rpc::{CallError, call, call_at};
use super::{Ctx, Journaled, backoff_ms, between, sleep_ms};
use crate::fleet::MixPlan;
use crate::limits::{DISPATCHER_RELEASED_KEPT, RETRIES_MAX};
use crate::plant::PlantedBug;
use crate::trace::Event;
use crate::wire::{Execution, REGISTRY_PORT, REPLICA_PORT, Request, Response};

/// Where a dispatcher sends an assignment: the endpoint the registry
/// answered, as a careful client dials it, and the trace name of the
/// replica there.
struct Dial {
    host: String,
    port: u16,
    name: String,
}

impl Dial {
    fn of(ctx: &Ctx, a: &RouteAssignment) -> Dial {
        let endpoint = a.destination.endpoint.to_string();
        let (host, port) = match endpoint.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), port.parse().unwrap_or(REPLICA_PORT)),
            None => (endpoint.clone(), REPLICA_PORT),
        };
        Dial {
            host,
            port,
            name: ctx.plan.name_at(&endpoint),
        }
    }
}

/// What one action will do, drawn when it starts.
struct Plan {
    n: u64,
    request: RouteRequest,
    duplicates: u32,
    cancel: bool,
    reconcile: bool,
    repeat_settle: bool,
    stale_settle: bool,
    seed: u64,
}

/// Runs one incarnation of dispatcher `index`.
pub(crate) async fn run(ctx: Rc<Ctx>, index: u32) -> turmoil::Result {
    let me = crate::scenario::dispatcher_host(index);
    let (inc, mut rng) = ctx.start(&me);
    let w = ctx.scenario.workload.clone();
    reconcile_journal(&ctx, &me, inc, &mut rng).await;
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(w.concurrency as usize));
    let mut tasks = Vec::new();
    let now = ctx.now_ms();
    if w.start_ms > now {
        sleep_ms(w.start_ms - now).await;
    }
    loop {
        let started = {
            let mut d = ctx.dispatchers.borrow_mut();
            let p = d.entry(me.clone()).or_default();
            if p.started >= w.actions {
                break;
            }
            p.started += 1;
            p.started
        };
        let permit = permits.clone().acquire_owned().await?;
        sleep_ms(between(&mut rng, w.start_gap_ms)).await;
        let plan = draw(&ctx, &me, inc, u64::from(started), &mut rng);
        if !w.runs(index, started) {
            // Drawn and waited for, so the actions that run keep their
            // plans (`workload.only_actions`).
            continue;
        }
        let ctx = ctx.clone();
        let me = me.clone();
        tasks.push(tokio::task::spawn_local(async move {
            run_action(&ctx, &me, plan).await;
            drop(permit);
        }));
    }
    for t in tasks {
        t.await?;
    }
    if let Some(p) = ctx.dispatchers.borrow_mut().get_mut(&me) {
        p.done = true;
    }
    Ok(())
}

fn draw(ctx: &Ctx, me: &str, inc: u64, n: u64, rng: &mut SmallRng) -> Plan {
    let w = &ctx.scenario.workload;
    let total: u32 = ctx.mix.iter().map(|m| m.weight).sum();
    let mut pick = rng.random_range(0..total.max(1));
    let mut chosen: &MixPlan = &ctx.mix[0];
    for m in &ctx.mix {
        if pick < m.weight {
            chosen = m;
            break;
        }
        pick -= m.weight;
    }
    // A tenant group's tenant; one tenant draws nothing, so scenarios
    // without groups make the same draws as before.
    let tenant = match chosen.tenants.as_slice() {
        [one] => one.clone(),
        many => many[rng.random_range(0..many.len())].clone(),
    };
    let shared = w.shared_pool > 0 && rng.random_bool(w.shared_ratio);
    let action = if shared {
        format!("pool-{}", rng.random_range(0..w.shared_pool))
    } else {
        format!("{me}.{inc}-{n}")
    };
    Plan {
        n,
        request: RouteRequest {
            action: ActionId::new(action)
                .unwrap_or_else(|_| unreachable!("generated ids are valid")),
            tenant: Some(tenant),
            capability: chosen.capability.clone(),
            topology: chosen.topology.clone(),
        },
        duplicates: if rng.random_bool(w.duplicate_ratio) {
            w.duplicates
        } else {
            0
        },
        cancel: rng.random_bool(w.cancel_ratio),
        reconcile: rng.random_bool(w.reconcile_ratio),
        repeat_settle: rng.random_bool(w.repeat_settle_ratio),
        stale_settle: rng.random_bool(w.stale_settle_ratio),
        seed: rng.random(),
    }
}

/// Reconciles the actions a previous incarnation left open (PIN-5,
/// PIN-6): their reservations are held on replicas that may be healthy, so
/// nothing else would ever release them. Waits one call timeout first, so
/// that a call the crashed incarnation sent has arrived or been dropped.
async fn reconcile_journal(ctx: &Rc<Ctx>, me: &str, inc: u64, rng: &mut SmallRng) {
    let journal: Vec<(u64, Journaled)> = ctx
        .dispatchers
        .borrow()
        .get(me)
        .map(|p| p.open.iter().map(|(n, j)| (*n, j.clone())).collect())
        .unwrap_or_default();
    if journal.is_empty() || ctx.plant == Some(PlantedBug::NoReconciliation) {
        return;
    }
    sleep_ms(ctx.scenario.workload.rpc_timeout_ms).await;
    for (n, entry) in journal {
        let mut a = Action {
            ctx: ctx.clone(),
            me: me.to_string(),
            rng: SmallRng::seed_from_u64(rng.random()),
            registry: (n as usize + inc as usize) % ctx.registry_hosts.len(),
            copies: Vec::new(),
            taken: BTreeSet::new(),
        };
        let result = a.reconcile(&entry).await;
        ctx.emit(Event::Reconciled {
            dispatcher: me.to_string(),
            n,
            action: entry.request.action.clone(),
            result,
        });
        if let Some(p) = ctx.dispatchers.borrow_mut().get_mut(me) {
            p.open.remove(&n);
        }
    }
}

/// True when an answer to an action of dispatcher `me` showed `fence` no
/// longer held (EVID-4).
fn knows_released(ctx: &Ctx, me: &str, fence: FenceToken) -> bool {
    ctx.dispatchers
        .borrow()
        .get(me)
        .is_some_and(|p| p.released.contains(&fence))
}

/// The `shared-journal-by-action` plant's read: the fence of the first
/// row another dispatcher's journal (in the store they share) holds for
/// `request`'s action ID and tenant.
fn peer_journaled_fence(ctx: &Ctx, me: &str, request: &RouteRequest) -> Option<FenceToken> {
    ctx.dispatchers
        .borrow()
        .iter()
        .filter(|(name, _)| name.as_str() != me)
        .flat_map(|(_, p)| p.open.values())
        .filter(|j| j.request.action == request.action && j.request.tenant == request.tenant)
        .find_map(|j| j.fence)
}

/// Ties action `n`'s journal entry to `fence` (dropping another fence's
/// evidence), then updates it, if it is open.
fn journal(ctx: &Ctx, me: &str, n: u64, fence: FenceToken, f: impl FnOnce(&mut Journaled)) {
    if let Some(entry) = ctx
        .dispatchers
        .borrow_mut()
        .get_mut(me)
        .and_then(|p| p.open.get_mut(&n))
    {
        if ctx.plant != Some(PlantedBug::ReconcileOtherFenceOutcome) {
            entry.tie(fence);
        }
        f(entry);
    }
}

async fn run_action(ctx: &Rc<Ctx>, me: &str, plan: Plan) {
    let tenant = plan
        .request
        .tenant
        .clone()
        .unwrap_or_else(|| unreachable!("dispatchers always send their verified tenant"));
    if let Some(p) = ctx.dispatchers.borrow_mut().get_mut(me) {
        p.open.insert(plan.n, Journaled::new(plan.request.clone()));
    }
    ctx.emit(Event::ActionStart {
        dispatcher: me.to_string(),
        n: plan.n,
        action: plan.request.action.clone(),
        tenant,
        capability: plan.request.capability.clone(),
    });
    let mut a = Action {
        ctx: ctx.clone(),
        me: me.to_string(),
        rng: SmallRng::seed_from_u64(plan.seed),
        registry: (plan.n as usize) % ctx.registry_hosts.len(),
        copies: Vec::new(),
        taken: BTreeSet::new(),
    };
    let result = match a.body(&plan).await {
        Ok(outcome) => outcome.as_str().to_string(),
        Err(kind) => format!("failed:{kind}"),
    };
    ctx.emit(Event::ActionEnd {
        dispatcher: me.to_string(),
        n: plan.n,
        action: plan.request.action.clone(),
        result,
    });
    // The `shared-journal-by-action` plant keeps a finished action's row,
    // as a shared journal table keeping history does.
    if let Some(p) = ctx.dispatchers.borrow_mut().get_mut(me)
        && ctx.plant != Some(PlantedBug::SharedJournalByAction)
    {
        p.open.remove(&plan.n);
    }
}

struct Action {
    ctx: Rc<Ctx>,
    me: String,
    rng: SmallRng,
    registry: usize,
    /// The copies of the action's resolve bursts not yet awaited, each
    /// answered or given up by its own timeout.
    copies: Vec<tokio::task::JoinHandle<Result<Response, CallError>>>,
    /// The fences the action's own resolves were answered: a copy answered
    /// one of them is the same reservation, not a late one.
    taken: BTreeSet<FenceToken>,
}

impl Action {
    async fn body(&mut self, plan: &Plan) -> Result<Outcome, String> {
        let mut held = self.resolve(&plan.request, plan.duplicates).await?;
        journal(&self.ctx, &self.me, plan.n, held.reservation.fence, |_| {});
        let mut round = 0;
        loop {
            let execution = self
                .dispatch(plan, &mut held, plan.cancel && round == 0)
                .await?;
            let outcome = match execution {
                Execution::Completed => Outcome::Completed,
                // Planted: work whose outcome is unknown taken for done.
                Execution::Unknown
                    if self.ctx.plant == Some(PlantedBug::UnknownSettledCompleted) =>
                {
                    Outcome::Completed
                }
                Execution::Cancelled => Outcome::Cancelled,
                Execution::Unknown | Execution::Misdirected => Outcome::OutcomeUnknown,
            };
            let fence = held.reservation.fence;
            journal(&self.ctx, &self.me, plan.n, fence, |j| {
                j.outcome = Some(outcome);
            });
            self.settle(&held, outcome).await?;
            if self.ctx.plant == Some(PlantedBug::ExecuteAfterSettle)
                && outcome == Outcome::OutcomeUnknown
            {
                // Planted: an execute whose outcome is not known goes to a
                // retry queue that sends it again after the settlement.
                let _ = self.dispatch_once(plan, &held, false).await;
            }
            if plan.repeat_settle {
                // The first settlement was answered: a late resolve may
                // since have reserved the route again under a fresh fence
                // (PIN-3), so this copy may be `fence_lost`, which changes
                // nothing this action did.
                match self.settle(&held, outcome).await {
                    Ok(_) => {}
                    Err(kind) if kind == "fence_lost" => {}
                    Err(kind) => return Err(kind),
                }
            }
            let again = plan.reconcile && round == 0 && outcome != Outcome::Completed;
            if !again {
                return Ok(outcome);
            }
            // Reconciliation: retry the action under its ID. The route is
            // pinned: the same replica, a fresh reservation (PIN-3).
            round += 1;
            let next = self.resolve(&plan.request, 0).await?;
            self.adopt(plan, &mut held, next).await?;
        }
    }

    fn registry_host(&self) -> &str {
        &self.ctx.registry_hosts[self.registry % self.ctx.registry_hosts.len()]
    }

    async fn registry_call(&mut self, request: Request) -> Result<Response, CallError> {
        let timeout = self.ctx.scenario.workload.rpc_timeout_ms;
        let to = self.registry_host().to_string();
        let answer = call(&self.ctx, &self.me, &to, REGISTRY_PORT, request, timeout).await;
        if answer.is_err() {
            // Another registry host may be reachable; the store is shared.
            self.registry += 1;
        }
        answer
    }

    async fn backoff(&mut self, attempt: u32) {
        let base = self.ctx.scenario.workload.backoff_ms;
        sleep_ms(backoff_ms(&mut self.rng, base, attempt)).await;
    }

    /// Resolves until a route, a typed error that ends the action, or the
    /// retry bound. Transport failures and `unavailable` are retried with
    /// the same request (same action ID).
    async fn resolve(
        &mut self,
        request: &RouteRequest,
        duplicates: u32,
    ) -> Result<RouteAssignment, String> {
        let w = self.ctx.scenario.workload.clone();
        let (mut capacity, mut unavailable, mut transient) = (0u32, 0u32, 0u32);
        let mut duplicates = duplicates;
        loop {
            for _ in 0..duplicates {
                // A duplicate storm: the same resolve, at the same time, to
                // the same registry host. Its answer is awaited before the
                // action gives up (`late_route`).
                let ctx = self.ctx.clone();
                let me = self.me.clone();
                let to = self.registry_host().to_string();
                let req = Request::Resolve {
                    request: request.clone(),
                };
                self.copies.push(tokio::task::spawn_local(async move {
                    call(&ctx, &me, &to, REGISTRY_PORT, req, w.rpc_timeout_ms).await
                }));
            }
            duplicates = 0;
            let answer = self
                .registry_call(Request::Resolve {
                    request: request.clone(),
                })
                .await;
            if self.ctx.plant == Some(PlantedBug::CommitReplyLostAsFailure)
                && match &answer {
                    Err(_) => true,
                    Ok(Response::Resolve { result: Err(e) }) => e.kind == "unavailable",
                    Ok(_) => false,
                }
            {
                // Planted: the resolve may have committed, but the action
                // is given up as failed instead of retried under its ID.
                return Err("unavailable".into());
            }
            match answer {
                Ok(Response::Resolve { result: Ok(r) }) => {
                    self.taken.insert(r.assignment.reservation.fence);
                    return Ok(r.assignment);
                }
                Ok(Response::Resolve { result: Err(e) }) => match e.kind.as_str() {
                    "no_capacity" if capacity < w.capacity_retries => {
                        capacity += 1;
                        self.backoff(capacity).await;
                    }
                    "replica_unavailable" if unavailable < w.unavailable_retries => {
                        unavailable += 1;
                        self.backoff(unavailable).await;
                    }
                    "unavailable" if transient < RETRIES_MAX => {
                        transient += 1;
                        self.backoff(transient).await;
                    }
                    kind => return self.late_route(request, kind).await,
                },
                Ok(_) => return self.late_route(request, "refused").await,
                Err(_) if transient < RETRIES_MAX => {
                    transient += 1;
                    self.backoff(transient).await;
                }
                Err(_) => return self.late_route(request, "unavailable").await,
            }
        }
    }

    /// Before a resolve gives up with `kind`, waits for every outstanding
    /// copy of the action's bursts: a copy answered with a route (created
    /// after another copy was refused, say) holds a reservation only this
    /// action can settle, so the action takes it and goes on, unless the
    /// action's own resolves were answered that fence already (that
    /// reservation is the one that failed or was settled; it is not taken
    /// twice). Of several, the newest fence is the route's current
    /// reservation.
    ///
    /// A copy left unanswered may have committed all the same. Its route is
    /// not read back and settled (with a shared action ID it may be another
    /// dispatcher's live reservation): the action resolves once more under
    /// its ID, as after any lost answer, and takes a route it is answered.
    async fn late_route(
        &mut self,
        request: &RouteRequest,
        kind: &str,
    ) -> Result<RouteAssignment, String> {
        let mut late: Option<RouteAssignment> = None;
        let mut unanswered = false;
        for copy in std::mem::take(&mut self.copies) {
            let a = match copy.await {
                Ok(Ok(Response::Resolve { result: Ok(r) })) => r.assignment,
                Ok(Ok(_)) => continue,
                Ok(Err(_)) | Err(_) => {
                    unanswered = true;
                    continue;
                }
            };
            if self.taken.contains(&a.reservation.fence) {
                continue;
            }
            if late
                .as_ref()
                .is_none_or(|l| a.reservation.fence > l.reservation.fence)
            {
                late = Some(a);
            }
        }
        if late.is_none() && unanswered {
            late = self.resolve_again(request).await;
        }
        let late = late.ok_or_else(|| kind.to_string())?;
        self.taken.insert(late.reservation.fence);
        Ok(late)
    }

    /// One more resolve of the action, retried while it fails in transport
    /// or is answered `unavailable`: the route it is answered, if any.
    async fn resolve_again(&mut self, request: &RouteRequest) -> Option<RouteAssignment> {
        let mut attempt = 0u32;
        loop {
            let answer = self
                .registry_call(Request::Resolve {
                    request: request.clone(),
                })
                .await;
            match answer {
                Ok(Response::Resolve { result: Ok(r) }) => return Some(r.assignment),
                Ok(Response::Resolve { result: Err(e) }) if e.kind != "unavailable" => {
                    return None;
                }
                Ok(Response::Resolve { .. }) | Err(_) if attempt < RETRIES_MAX => {
                    attempt += 1;
                    self.backoff(attempt).await;
                }
                _ => return None,
            }
        }
    }

    /// Takes a newer assignment of the same action; on a re-reservation,
    /// maybe settles the previous one too (a stale settlement that must
    /// fail with FenceLost and change nothing).
    async fn adopt(
        &mut self,
        plan: &Plan,
        held: &mut RouteAssignment,
        next: RouteAssignment,
    ) -> Result<(), String> {
        if next.reservation.fence != held.reservation.fence {
            // The new fence starts with no evidence (PIN-7): nothing of it
            // was dispatched, no outcome is known.
            journal(&self.ctx, &self.me, plan.n, next.reservation.fence, |_| {});
            let old = std::mem::replace(held, next);
            if plan.stale_settle {
                let params = SettleParams {
                    assignment: old,
                    outcome: Outcome::Cancelled,
                };
                let _ = self.registry_call(Request::Settle { params }).await;
            }
        }
        Ok(())
    }

    /// Dispatches to the assigned replica, retrying through the registry.
    /// Gives up (an unknown outcome) after `dispatch_retries` failures.
    async fn dispatch(
        &mut self,
        plan: &Plan,
        held: &mut RouteAssignment,
        cancel: bool,
    ) -> Result<Execution, String> {
        let w = self.ctx.scenario.workload.clone();
        let mut failures = 0u32;
        loop {
            // Another action of this dispatcher under the same (shared)
            // action ID may have settled the fence this one holds: it is
            // not dispatched again (EVID-4); a resolve takes the route's
            // fresh reservation instead (PIN-3).
            let attempt = if self.knows_released(held.reservation.fence) {
                Err(CallError::Transport)
            } else {
                self.dispatch_once(plan, held, cancel && failures == 0)
                    .await
            };
            match attempt {
                Ok(execution) => return Ok(execution),
                Err(_) => {
                    failures += 1;
                    if failures > w.dispatch_retries {
                        return Ok(Execution::Unknown);
                    }
                    self.backoff(failures).await;
                    // Retry under the same action ID: the registry must
                    // answer the same route (no silent failover).
                    let next = match self.resolve(&plan.request, 0).await {
                        Ok(next) => next,
                        // ReplicaUnavailable answers a pinned retry only
                        // when the route's reservation was already released
                        // (PIN-3: by lease maintenance as lease_expired, or
                        // by a settlement of another dispatcher sharing the
                        // action ID) and cannot be taken again (replica
                        // offline, lease expired, circuit open, version
                        // withdrawn). Nothing is left to settle, and this
                        // dispatcher cannot tell which of those happened:
                        // it settles nothing rather than claim an outcome
                        // (SETTLE-1). The action fails with the typed error.
                        Err(kind) => return Err(kind),
                    };
                    self.adopt(plan, held, next).await?;
                }
            }
        }
    }

    /// Keeps `fence` as no longer held, for every action of this
    /// dispatcher (EVID-4).
    fn learn_released(&self, fence: FenceToken) {
        if let Some(p) = self.ctx.dispatchers.borrow_mut().get_mut(&self.me) {
            p.released.insert(fence);
            while p.released.len() > DISPATCHER_RELEASED_KEPT {
                p.released.pop_first();
            }
        }
    }

    /// True when an answer to an action of this dispatcher showed `fence`
    /// no longer held.
    fn knows_released(&self, fence: FenceToken) -> bool {
        knows_released(&self.ctx, &self.me, fence)
    }

    /// The fence this action's executes and cancels carry: `own`; with the
    /// `shared-journal-by-action` plant, the fence read back from the
    /// shared journal by action ID, where another dispatcher's row (a
    /// finished action's, perhaps) comes first.
    fn carried_fence(&self, plan: &Plan, own: FenceToken) -> FenceToken {
        if self.ctx.plant != Some(PlantedBug::SharedJournalByAction) {
            return own;
        }
        peer_journaled_fence(&self.ctx, &self.me, &plan.request).unwrap_or(own)
    }

    async fn dispatch_once(
        &mut self,
        plan: &Plan,
        held: &RouteAssignment,
        cancel: bool,
    ) -> Result<Execution, CallError> {
        let w = self.ctx.scenario.workload.clone();
        let to = Dial::of(&self.ctx, held);
        journal(&self.ctx, &self.me, plan.n, held.reservation.fence, |j| {
            j.dispatched = true;
        });
        let mut assignment = held.clone();
        assignment.reservation.fence = self.carried_fence(plan, held.reservation.fence);
        let request = Request::Execute { assignment };
        if !cancel {
            return match call_at(
                &self.ctx,
                &self.me,
                &to.name,
                (&to.host, to.port),
                request,
                w.dispatch_timeout_ms,
            )
            .await?
            {
                Response::Execute { execution } => Ok(execution),
                _ => Ok(Execution::Unknown),
            };
        }
        let ctx = self.ctx.clone();
        let me = self.me.clone();
        let fence = held.reservation.fence;
        let running = tokio::task::spawn_local(async move {
            // The call starts when the task first runs: another action of
            // this dispatcher may have settled the fence in between.
            if knows_released(&ctx, &me, fence) {
                return Err(CallError::Transport);
            }
            call_at(
                &ctx,
                &me,
                &to.name,
                (&to.host, to.port),
                request,
                w.dispatch_timeout_ms,
            )
            .await
        });
        sleep_ms(between(&mut self.rng, [w.exec_ms[0] / 2, w.exec_ms[1] / 2])).await;
        // PIN-5: read the action's route and address its replica.
        let tenant = plan
            .request
            .tenant
            .clone()
            .unwrap_or_else(|| unreachable!());
        let get = Request::RouteGet {
            tenant,
            action: plan.request.action.clone(),
        };
        if let Ok(Response::RouteGet {
            result: Ok(Some(route)),
        }) = self.registry_call(get).await
        {
            if !route.reserved {
                self.learn_released(route.assignment.reservation.fence);
            }
            let a = route.assignment;
            let cancel = Request::Cancel {
                action: a.identity.action.clone(),
                fence: self.carried_fence(plan, a.reservation.fence),
            };
            let target = Dial::of(&self.ctx, &a);
            let _ = call_at(
                &self.ctx,
                &self.me,
                &target.name,
                (&target.host, target.port),
                cancel,
                w.rpc_timeout_ms,
            )
            .await;
        }
        match running.await {
            Ok(Ok(Response::Execute { execution })) => Ok(execution),
            Ok(Ok(_)) => Ok(Execution::Unknown),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(CallError::Transport),
        }
    }

    /// Reconciles an action a crash left open, from its retained route:
    /// no route, or one already settled, holds nothing; a held one is
    /// settled with the outcome the journal learnt from the replica for
    /// that route's fence, or else, if that fence may have been
    /// dispatched, cancelled on the route's replica (PIN-5) and settled as
    /// cancelled when the cancellation stopped it, else as outcome_unknown
    /// (the route names the replica that bound the uncertain outcome,
    /// PIN-6); a fence never dispatched is cancelled on the replica too
    /// (which keeps it, EVID-9) and settles as cancelled once the replica
    /// answered, else as outcome_unknown. Evidence
    /// the journal holds of another fence (an earlier round's) says
    /// nothing of this one (PIN-7). Returns the result the trace records.
    async fn reconcile(&mut self, entry: &Journaled) -> String {
        let request = &entry.request;
        let tenant = request
            .tenant
            .clone()
            .unwrap_or_else(|| unreachable!("dispatchers always send their verified tenant"));
        let get = Request::RouteGet {
            tenant,
            action: request.action.clone(),
        };
        let mut attempt = 0u32;
        let route = loop {
            match self.registry_call(get.clone()).await {
                Ok(Response::RouteGet { result: Ok(route) }) => break route,
                Ok(Response::RouteGet { result: Err(e) }) if e.kind != "unavailable" => {
                    return format!("failed:{}", e.kind);
                }
                Ok(Response::RouteGet { .. }) | Err(_) if attempt < RETRIES_MAX => {
                    attempt += 1;
                    self.backoff(attempt).await;
                }
                Ok(Response::RouteGet { .. }) | Err(_) => return "failed:unavailable".into(),
                Ok(_) => return "failed:refused".into(),
            }
        };
        if let Some(r) = route.as_ref().filter(|r| !r.reserved) {
            self.learn_released(r.assignment.reservation.fence);
        }
        let Some(route) = route.filter(|r| r.reserved) else {
            return "nothing_held".into();
        };
        let held = route.assignment;
        let (dispatched, known) = if self.ctx.plant == Some(PlantedBug::ReconcileOtherFenceOutcome)
        {
            // Planted: the journal's evidence is taken for the held
            // route's, whichever fence it was learnt of.
            (entry.dispatched, entry.outcome)
        } else {
            entry.evidence(held.reservation.fence)
        };
        let mut outcome = known.unwrap_or(Outcome::Cancelled);
        if known.is_none() {
            let cancel = Request::Cancel {
                action: held.identity.action.clone(),
                fence: held.reservation.fence,
            };
            let target = Dial::of(&self.ctx, &held);
            let timeout = self.ctx.scenario.workload.rpc_timeout_ms;
            let stopped = call_at(
                &self.ctx,
                &self.me,
                &target.name,
                (&target.host, target.port),
                cancel,
                timeout,
            )
            .await;
            // A fence this dispatcher dispatched is cancelled only when
            // the cancel stopped it; one it never dispatched, once the
            // replica kept the cancel (another dispatcher sharing the
            // action ID may hold the same fence, EVID-9).
            let kept = match stopped {
                Ok(Response::Cancel { running }) => running || !dispatched,
                _ => false,
            };
            if !kept {
                outcome = Outcome::OutcomeUnknown;
            }
        }
        match self.settle(&held, outcome).await {
            Ok(_) => outcome.as_str().to_string(),
            Err(kind) => format!("failed:{kind}"),
        }
    }

    /// Settles until an answer; transport failures are retried (settling is
    /// idempotent).
    async fn settle(
        &mut self,
        held: &RouteAssignment,
        outcome: Outcome,
    ) -> Result<Settled, String> {
        let mut attempt = 0u32;
        loop {
            let params = SettleParams {
                assignment: held.clone(),
                outcome,
            };
            match self.registry_call(Request::Settle { params }).await {
                Ok(Response::Settle { result: Ok(s) }) => {
                    // Settled now or before: the fence is no longer held.
                    self.learn_released(held.reservation.fence);
                    return Ok(s);
                }
                Ok(Response::Settle { result: Err(e) }) if e.kind != "unavailable" => {
                    return Err(e.kind);
                }
                Err(_) if self.ctx.plant == Some(PlantedBug::SettleWaitsForever) => {
                    // Planted: the answer is waited for, though it will
                    // never come.
                    std::future::pending::<()>().await;
                }
                Ok(Response::Settle { .. }) | Err(_) if attempt < RETRIES_MAX => {
                    attempt += 1;
                    self.backoff(attempt).await;
                }
                Ok(Response::Settle { .. }) | Err(_) => return Err("unavailable".into()),
                Ok(_) => return Err("refused".into()),
            }
        }
    }
}

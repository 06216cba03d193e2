//! The catalog administrator (publications, drains, circuit closes), the
//! lease maintenance job and the catalog readers.

use std::rc::Rc;

use connreg::catalog::{CatalogQuery, Reader};
use connreg::request::CircuitCloseParams;
use connreg::{
    BindingId, CapabilityId, Change, ConnectorTypeId, InstanceId, MaintainParams, Publication,
    ReplicaId, ScopeId, TenantId, VersionId,
};

use rand::Rng;

use super::rpc::call;
use super::{Ctx, sleep_ms};
use crate::fleet::FleetPlan;
use crate::limits::{MAINTENANCE_CALLS_PER_ROUND_MAX, READER_SESSION_PAGES_MAX, RETRIES_MAX};
use crate::scenario::{ADMIN_HOST, MAINTAINER_HOST, Operation, OperationKind};
use crate::wire::{REGISTRY_PORT, Request, Response};

/// Calls registry hosts in turn until one answers, at most `RETRIES_MAX`
/// times. Returns `None` when none did.
pub(crate) async fn call_any(
    ctx: &Ctx,
    me: &str,
    start: &mut usize,
    request: Request,
) -> Option<Response> {
    let timeout = ctx.scenario.workload.rpc_timeout_ms;
    for _ in 0..RETRIES_MAX {
        let to = ctx.registry_hosts[*start % ctx.registry_hosts.len()].clone();
        match call(ctx, me, &to, REGISTRY_PORT, request.clone(), timeout).await {
            Ok(r) => return Some(r),
            Err(_) => {
                *start += 1;
                sleep_ms(ctx.scenario.workload.backoff_ms).await;
            }
        }
    }
    None
}

/// The administrator: scheduled operations and periodic catalog touches,
/// until the end of the workload phase.
pub(crate) async fn admin(ctx: Rc<Ctx>) -> turmoil::Result {
    let me = ADMIN_HOST;
    let (_, _rng) = ctx.start(me);
    let mut records = (*ctx.plan).clone();
    let duration = ctx.scenario.scenario.duration_ms;
    let mut ops: Vec<Operation> = ctx
        .scenario
        .workload
        .operations
        .iter()
        .flat_map(|o| o.get_ref().expand(duration))
        .collect();
    // Stable: operations due at one time run in file order.
    ops.sort_by_key(|o| o.at_ms);
    let every = ctx.scenario.workload.touch_every_ms;
    let end = ctx.scenario.scenario.duration_ms;
    let mut next_touch = if every > 0 { every } else { u64::MAX };
    let mut next_op = 0usize;
    let mut touches = 0u64;
    let mut target = 0usize;
    loop {
        let op_at = ops.get(next_op).map(|o| o.at_ms).unwrap_or(u64::MAX);
        let at = op_at.min(next_touch);
        if at > end {
            return Ok(());
        }
        let now = ctx.now_ms();
        if at > now {
            sleep_ms(at - now).await;
        }
        let request = if op_at <= next_touch {
            next_op += 1;
            operation(&mut records, &ops[next_op - 1])
        } else {
            next_touch = next_touch.saturating_add(every);
            touches += 1;
            Some(touch(&mut records, touches))
        };
        if let Some(request) = request {
            let _ = call_any(&ctx, me, &mut target, request).await;
        }
    }
}

fn publish(changes: Vec<Change>) -> Request {
    Request::Publish {
        publication: Publication { changes },
    }
}

/// Re-publishes one definition with a new summary: a revision bump that
/// changes nothing a route depends on.
fn touch(records: &mut FleetPlan, n: u64) -> Request {
    let count = records.definitions.len().max(1);
    let key = records
        .definitions
        .keys()
        .nth((n as usize) % count)
        .cloned();
    let Some(key) = key else {
        return publish(Vec::new());
    };
    let d = records
        .definitions
        .get_mut(&key)
        .unwrap_or_else(|| unreachable!("the key was just read"));
    d.summary = format!("{key} (simulated, touch {n})");
    publish(vec![Change::UpsertDefinition(d.clone())])
}

fn operation(records: &mut FleetPlan, o: &Operation) -> Option<Request> {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    Some(match o.op {
        OperationKind::Drain => Request::Drain {
            replica: ReplicaId::new(text(&o.replica)).ok()?,
        },
        OperationKind::CircuitClose => Request::CircuitClose {
            params: CircuitCloseParams {
                replica: ReplicaId::new(text(&o.replica)).ok()?,
                reason: "scheduled by the scenario".into(),
            },
        },
        OperationKind::SetBinding => {
            let b = records
                .bindings
                .get_mut(&BindingId::new(text(&o.binding)).ok()?)?;
            b.enabled = o.enabled?;
            publish(vec![Change::UpsertBinding(b.clone())])
        }
        OperationKind::SetInstance => {
            let i = records
                .instances
                .get_mut(&InstanceId::new(text(&o.instance)).ok()?)?;
            i.enabled = o.enabled?;
            publish(vec![Change::UpsertInstance(i.clone())])
        }
        OperationKind::SetType => {
            let t = records
                .types
                .get_mut(&ConnectorTypeId::new(text(&o.connector_type)).ok()?)?;
            t.enabled = o.enabled?;
            publish(vec![Change::UpsertType(t.clone())])
        }
        OperationKind::SetVersion => {
            let id = VersionId::new(text(&o.version)).ok()?;
            let v = records.versions.get_mut(&id)?;
            v.active = o.active?;
            v.qualified = o.qualified?;
            publish(vec![Change::SetVersionStatus {
                version: id,
                active: v.active,
                qualified: v.qualified,
            }])
        }
        OperationKind::Touch => {
            let d = records
                .definitions
                .get_mut(&CapabilityId::new(text(&o.capability)).ok()?)?;
            d.summary = format!("{} (simulated, touched at {} ms)", d.id, o.at_ms);
            publish(vec![Change::UpsertDefinition(d.clone())])
        }
        OperationKind::SetScope => {
            let sc = records
                .scopes
                .get_mut(&ScopeId::new(text(&o.scope)).ok()?)?;
            sc.limit = o.limit?;
            publish(vec![Change::UpsertScope(sc.clone())])
        }
    })
}

/// Lease maintenance: a bounded batch every interval, repeated while the
/// registry says more replicas are due (LEASE-2).
pub(crate) async fn maintainer(ctx: Rc<Ctx>) -> turmoil::Result {
    let me = MAINTAINER_HOST;
    let (_, _rng) = ctx.start(me);
    let l = ctx.scenario.lifecycle.clone();
    let timeout = ctx.scenario.workload.rpc_timeout_ms;
    let mut target = 0usize;
    loop {
        sleep_ms(l.maintenance_ms).await;
        for _ in 0..MAINTENANCE_CALLS_PER_ROUND_MAX {
            let to = ctx.registry_hosts[target % ctx.registry_hosts.len()].clone();
            let request = Request::Maintain {
                params: MaintainParams {
                    max: l.maintenance_batch,
                },
            };
            match call(&ctx, me, &to, REGISTRY_PORT, request, timeout).await {
                Ok(Response::Maintain { result: Ok(m) }) if m.more => continue,
                Ok(_) => break,
                Err(_) => {
                    target += 1;
                    break;
                }
            }
        }
    }
}

/// A catalog reader: pages through the whole catalog every interval,
/// restarting from the first page on StaleCursor (CAT-9).
pub(crate) async fn reader(ctx: Rc<Ctx>, index: usize) -> turmoil::Result {
    let me = crate::scenario::reader_host(index);
    let (_, mut rng) = ctx.start(&me);
    let spec = ctx.scenario.workload.readers[index].get_ref().clone();
    let group: Vec<TenantId> = match &spec.tenants {
        Some(g) => ctx
            .scenario
            .group_tenants(g)
            .iter()
            .map(|t| TenantId::new(t.clone()))
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let fixed = match spec.reader.as_str() {
        "" => None,
        "internal" => Some(Reader::Internal {
            include_unbound: false,
        }),
        "internal-unbound" => Some(Reader::Internal {
            include_unbound: true,
        }),
        "anonymous" => Some(Reader::Anonymous),
        tenant => Some(Reader::Tenant(TenantId::new(tenant)?)),
    };
    let timeout = ctx.scenario.workload.rpc_timeout_ms;
    let mut target = index;
    loop {
        sleep_ms(spec.every_ms).await;
        // A tenant group's reader reads as one of its tenants a session.
        let reader = match &fixed {
            Some(r) => r.clone(),
            None => Reader::Tenant(group[rng.random_range(0..group.len())].clone()),
        };
        let mut cursor = None;
        for _ in 0..READER_SESSION_PAGES_MAX {
            let query = CatalogQuery {
                page_items: Some(spec.page_items),
                cursor: cursor.take(),
                ..CatalogQuery::first_page(reader.clone())
            };
            let to = ctx.registry_hosts[target % ctx.registry_hosts.len()].clone();
            match call(
                &ctx,
                &me,
                &to,
                REGISTRY_PORT,
                Request::Page { query },
                timeout,
            )
            .await
            {
                Ok(Response::Page { result: Ok(page) }) => match page.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                },
                Ok(Response::Page { result: Err(e) }) if e.kind == "stale_cursor" => {
                    cursor = None;
                }
                Ok(_) => break,
                Err(_) => {
                    target += 1;
                    break;
                }
            }
        }
    }
}

//! The host of a replica group: each replica of the group runs here as
//! it would on its own host (registration, heartbeats, executions, side
//! effects in the ledger), answering on its own port and named in the
//! trace by its own name, so checkers cannot tell the two apart. What one
//! host adds is the fleet grain: a fault can crash, restart or drain a
//! part of the group at once.

use std::collections::BTreeMap;
use std::rc::Rc;

use connreg::ReplicaId;
use tokio::task::JoinHandle;

use super::operators::call_any;
use super::replica::{Beat, serve_replica};
use super::{Ctx, GroupOrder, sleep_ms};
use crate::fleet::GroupPlan;
use crate::scenario::replica_host;
use crate::wire::Request;

/// Runs one incarnation of the host of group `index`.
pub(crate) async fn run(ctx: Rc<Ctx>, index: usize) -> turmoil::Result {
    let group = ctx.plan.groups[index].clone();
    let (_, _rng) = ctx.start(&group.host);
    let mut running: BTreeMap<u32, JoinHandle<()>> = BTreeMap::new();
    for i in 0..group.members.len() as u32 {
        running.insert(i, start(&ctx, &group, i));
    }
    let tick = ctx.scenario.scenario.tick_ms;
    loop {
        sleep_ms(tick).await;
        let orders = ctx
            .fleet
            .borrow_mut()
            .orders
            .remove(&group.name)
            .unwrap_or_default();
        for order in orders {
            match order {
                GroupOrder::Crash(members) => {
                    for i in members {
                        if let Some(task) = running.remove(&i) {
                            task.abort();
                        }
                    }
                }
                GroupOrder::Restart(members) => {
                    for i in members {
                        if (i as usize) < group.members.len() && !running.contains_key(&i) {
                            running.insert(i, start(&ctx, &group, i));
                        }
                    }
                }
                GroupOrder::Drain(members) => {
                    for i in members {
                        if running.contains_key(&i) {
                            tokio::task::spawn_local(drain(
                                ctx.clone(),
                                group.members[i as usize].spec.id.clone(),
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// Starts member `i`: its heartbeats and its port.
fn start(ctx: &Rc<Ctx>, group: &GroupPlan, i: u32) -> JoinHandle<()> {
    let member = &group.members[i as usize];
    let beat = Beat {
        every_ms: group.heartbeat_ms,
        jitter_ms: group.jitter_ms,
    };
    let serving = serve_replica(
        ctx.clone(),
        member.spec.clone(),
        group.unknown_ratio,
        replica_host(member.spec.id.as_str()),
        member.port,
        beat,
    );
    tokio::task::spawn_local(async move {
        // Binding cannot fail: each member has its own port.
        let _ = serving.await;
    })
}

/// A replica announcing its drain, as a real one does before it stops.
async fn drain(ctx: Rc<Ctx>, replica: ReplicaId) {
    let me = replica_host(replica.as_str());
    let mut target = 0;
    let _ = call_any(&ctx, &me, &mut target, Request::Drain { replica }).await;
}

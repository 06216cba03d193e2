//! A registry host: the contracts over the simulated network, in front of
//! the one shared store.
//!
//! Each answer is recorded in the trace before it is sent (offloaded calls:
//! as soon as the store returns it, see `backend`). A
//! `lose_answers` fault (or chaos) drops the answer after the store
//! committed: the caller times out and must retry with the same action ID.

use std::rc::Rc;

use super::Ctx;
use super::rpc::serve;
use crate::backend::{Backend, Store};
use crate::trace::Event;
use crate::wire::{Envelope, REGISTRY_PORT, Request, Response};

/// Runs one incarnation of registry host `me`.
pub(crate) async fn run<B: Backend>(ctx: Rc<Ctx>, store: Store<B>, me: String) -> turmoil::Result {
    let (_, rng) = ctx.start(&me);
    let rng = Rc::new(std::cell::RefCell::new(rng));
    let handler = Rc::new(move |envelope: Envelope| {
        let ctx = ctx.clone();
        let store = store.clone();
        let me = me.clone();
        let rng = rng.clone();
        async move { handle(&ctx, &store, &me, &rng, envelope).await }
    });
    serve(REGISTRY_PORT, handler).await
}

async fn handle<B: Backend>(
    ctx: &Ctx,
    store: &Store<B>,
    me: &str,
    rng: &std::cell::RefCell<rand::rngs::SmallRng>,
    envelope: Envelope,
) -> Option<Response> {
    let Envelope { id, from, request } = envelope;
    let op = request.op();
    let mutates = request.mutates();
    // Offloaded calls complete in real time, in any order. Serializing the
    // calls of one action (resolves share, settlements exclude) keeps the
    // trace order of its answers equal to their commit order, which the
    // settlement checks rely on. Resolves of one action still race.
    let lock = match (&request, store.is_offloaded()) {
        (Request::Resolve { request: r }, true) => Some((action_lock(ctx, &r.action), false)),
        (Request::Settle { params }, true) => {
            Some((action_lock(ctx, &params.assignment.identity.action), true))
        }
        _ => None,
    };
    let _shared = match &lock {
        Some((l, false)) => Some(l.read().await),
        _ => None,
    };
    let _exclusive = match &lock {
        Some((l, true)) => Some(l.write().await),
        _ => None,
    };
    let lost = ctx.lose_answer(op, &mut rng.borrow_mut());
    let me = me.to_string();
    let (response, reply) = store
        .answer(request, move |resp| Event::Reply {
            id,
            from: me,
            to: from,
            resp,
            lost,
        })
        .await;
    if mutates {
        ctx.dirty.set(true);
    }
    if let Some(reply) = reply {
        ctx.emit(reply);
    }
    if lost { None } else { Some(response) }
}

fn action_lock(ctx: &Ctx, action: &connreg::ActionId) -> Rc<tokio::sync::RwLock<()>> {
    ctx.action_locks
        .borrow_mut()
        .entry(action.clone())
        .or_default()
        .clone()
}

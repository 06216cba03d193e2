//! A registry host: the contracts over the simulated network, in front of
//! the one shared store.
//!
//! Each answer is recorded in the trace before it is sent (offloaded calls:
//! as soon as the store returns it, see `backend`). A
//! `lose_answers` fault (or chaos) drops the answer after the store
//! committed: the caller times out and must retry with the same action ID.
//!
//! The calls of one action are not serialized here. On the in-memory
//! backend the store serializes them; on PostgreSQL they race for real,
//! and the trace is still in commit order because the world orders each
//! step's answers by their commit sequence (`sim/TRACE.md`).

use std::rc::Rc;

use rand::Rng;

use super::Ctx;
use super::rpc::serve;
use crate::backend::{Backend, Store};
use crate::plant::PlantedBug;
use crate::trace::Event;
use crate::wire::{Envelope, REGISTRY_PORT, Request, Response, WireError};

/// Share of resolves the `spurious-unavailable` plant answers `unavailable`.
const SPURIOUS_UNAVAILABLE_RATIO: f64 = 0.1;

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
    if ctx.plant == Some(PlantedBug::SpuriousUnavailable)
        && matches!(request, Request::Resolve { .. })
        && rng.borrow_mut().random_bool(SPURIOUS_UNAVAILABLE_RATIO)
    {
        let resp = Response::Resolve {
            result: Err(WireError {
                kind: "unavailable".into(),
                message: "the registry is unavailable".into(),
            }),
        };
        ctx.emit(Event::Reply {
            id,
            from: me.to_string(),
            to: from,
            resp: resp.clone(),
            lost: false,
            commit: None,
            clock: None,
            released: None,
        });
        return Some(resp);
    }
    let lost = ctx.lose_answer(op, &mut rng.borrow_mut());
    let me = me.to_string();
    let (response, reply) = store
        .answer(request, move |resp, effects| Event::Reply {
            id,
            from: me,
            to: from,
            resp,
            lost,
            commit: effects.commit,
            clock: effects.clock,
            released: effects.released,
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

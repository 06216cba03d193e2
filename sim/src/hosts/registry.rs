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
    let last_resolve = Rc::new(std::cell::Cell::new(0u64));
    let handler = Rc::new(move |envelope: Envelope| {
        let ctx = ctx.clone();
        let store = store.clone();
        let me = me.clone();
        let rng = rng.clone();
        let last_resolve = last_resolve.clone();
        async move {
            if ctx.plant == Some(PlantedBug::PublicationStarves) {
                starve(&ctx, &last_resolve, &envelope.request).await;
            }
            handle(&ctx, &store, &me, &rng, envelope).await
        }
    });
    serve(REGISTRY_PORT, handler).await
}

/// The `publication-starves` plant: a resolve notes when it arrived; a
/// publication waits, a tick at a time, until no resolve has arrived for
/// [`crate::plant::STARVING_QUIET_MS`] (at most
/// [`crate::plant::STARVING_WAIT_MS_MAX`]).
async fn starve(ctx: &Ctx, last_resolve: &std::cell::Cell<u64>, request: &Request) {
    use crate::plant::{STARVING_QUIET_MS, STARVING_WAIT_MS_MAX};
    match request {
        Request::Resolve { .. } => last_resolve.set(ctx.now_ms()),
        Request::Publish { .. } => {
            let since = ctx.now_ms();
            let tick = ctx.scenario.scenario.tick_ms.max(1);
            while ctx.now_ms() < last_resolve.get().saturating_add(STARVING_QUIET_MS)
                && ctx.now_ms() < since.saturating_add(STARVING_WAIT_MS_MAX)
            {
                super::sleep_ms(tick).await;
            }
        }
        _ => {}
    }
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
            read_at: None,
            read_unseen: Vec::new(),
            retried: false,
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
            read_at: effects.read_at,
            read_unseen: effects.read_unseen,
            retried: effects.retried,
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

//! The reference state machine proptest drives: the initial state, the
//! weighted strategies that draw each next transition, and the
//! preconditions that keep shrunk sequences valid.

use connreg::*;
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest_state_machine::ReferenceStateMachine;

use super::{
    ACTIONS, ADVANCES_MS, BINDINGS, CAPABILITIES, Copy, INSTANCES, ModelState, OUTCOMES, PublishOp,
    SCOPES, TENANTS, Transition,
};

/// The reference state machine.
#[derive(Debug, Clone, Copy)]
pub struct Model;

impl ReferenceStateMachine for Model {
    type State = ModelState;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<ModelState> {
        Just(ModelState::initial()).boxed()
    }

    fn transitions(state: &ModelState) -> BoxedStrategy<Transition> {
        let replicas = state.replicas.len();
        let mut options: Vec<(u32, BoxedStrategy<Transition>)> = vec![
            (
                30,
                (0..ACTIONS, 0..TENANTS.len(), 0..CAPABILITIES.len())
                    // New actions, duplicates and other tenants' or other
                    // capabilities' requests for assigned actions alike.
                    .prop_map(|(action, tenant, capability)| Transition::Resolve {
                        action,
                        tenant,
                        capability,
                    })
                    .boxed(),
            ),
            (
                10,
                (0..replicas, any::<bool>())
                    .prop_map(|(replica, newer)| Transition::Heartbeat { replica, newer })
                    .boxed(),
            ),
            (
                8,
                proptest::sample::select(ADVANCES_MS.to_vec())
                    .prop_map(|ms| Transition::Advance { ms })
                    .boxed(),
            ),
            (7, Just(Transition::Maintain).boxed()),
            (
                10,
                prop_oneof![
                    (0..BINDINGS.len()).prop_map(PublishOp::ToggleBinding),
                    (0..INSTANCES.len()).prop_map(PublishOp::ToggleInstance),
                    (0..SCOPES.len(), 0..=3u32).prop_map(|(s, l)| PublishOp::SetScopeLimit(s, l)),
                ]
                .prop_map(Transition::Publish)
                .boxed(),
            ),
            (
                4,
                (0..replicas)
                    .prop_map(|replica| Transition::Drain { replica })
                    .boxed(),
            ),
            (
                3,
                (0..replicas)
                    .prop_map(|replica| Transition::CircuitClose { replica })
                    .boxed(),
            ),
        ];
        let routed: Vec<usize> = state.routes.keys().copied().collect();
        if !routed.is_empty() {
            // Retries of routed actions by their own tenant and capability,
            // so re-reservations (and stale copies) are common.
            let retries: Vec<Transition> = state
                .routes
                .iter()
                .map(|(action, r)| Transition::Resolve {
                    action: *action,
                    tenant: r.tenant,
                    capability: r.capability,
                })
                .collect();
            options.push((20, proptest::sample::select(retries).boxed()));
            let copy = prop_oneof![
                5 => Just(Copy::Back(0)),
                3 => (1..3usize).prop_map(Copy::Back),
                1 => Just(Copy::Tampered),
            ];
            options.push((
                25,
                (
                    proptest::sample::select(routed),
                    proptest::sample::select(OUTCOMES.to_vec()),
                    copy,
                )
                    .prop_map(|(action, outcome, copy)| Transition::Settle {
                        action,
                        outcome,
                        copy,
                    })
                    .boxed(),
            ));
        }
        let offline: Vec<usize> = state
            .replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state == ReplicaState::Offline)
            .map(|(i, _)| i)
            .collect();
        if !offline.is_empty() {
            options.push((
                6,
                proptest::sample::select(offline)
                    .prop_map(|replica| Transition::Register { replica })
                    .boxed(),
            ));
        }
        Union::new_weighted(options).boxed()
    }

    fn preconditions(state: &ModelState, t: &Transition) -> bool {
        match t {
            // A retry whose creating resolve was shrunk away is simply a
            // first resolve, so resolves need no precondition.
            Transition::Settle { action, .. } => state.routes.contains_key(action),
            Transition::Register { replica } => {
                state.replicas[*replica].state == ReplicaState::Offline
            }
            _ => true,
        }
    }

    fn apply(state: ModelState, t: &Transition) -> ModelState {
        state.apply(t)
    }
}

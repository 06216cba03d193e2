//! The commit order of one step's answers (the PostgreSQL tier).

use crate::trace::Event;

/// Puts the answers of one step's offloaded calls in commit order.
///
/// Answers that carry a commit sequence are sorted by it, into the places
/// such answers hold in return order; an answer without one (a call that
/// committed nothing: a read, or an error that rolled back) keeps its
/// place. Every call of a step finished before the step ended and none of
/// the next step's began, so across steps the trace is in commit order
/// already.
pub(crate) fn commit_order(events: Vec<Event>) -> Vec<Event> {
    let sequence = |e: &Event| match e {
        Event::Reply { commit, .. } => *commit,
        _ => None,
    };
    let mut committed: Vec<(u64, usize)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| sequence(e).map(|s| (s, i)))
        .collect();
    let places: Vec<usize> = committed.iter().map(|(_, i)| *i).collect();
    committed.sort_unstable();
    let mut slots: Vec<Option<Event>> = events.into_iter().map(Some).collect();
    let mut out: Vec<Option<Event>> = slots.iter().map(|_| None).collect();
    for (place, (_, from)) in places.iter().zip(&committed) {
        out[*place] = slots[*from].take();
    }
    for (i, slot) in slots.into_iter().enumerate() {
        if slot.is_some() {
            out[i] = slot;
        }
    }
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Response;

    fn reply(id: u64, commit: Option<u64>) -> Event {
        Event::Reply {
            id,
            from: "registry-0".into(),
            to: "dispatcher-0".into(),
            resp: Response::Refused {
                reason: String::new(),
            },
            lost: false,
            commit,
            clock: None,
            released: None,
        }
    }

    fn ids(events: &[Event]) -> Vec<u64> {
        events
            .iter()
            .map(|e| match e {
                Event::Reply { id, .. } => *id,
                _ => 0,
            })
            .collect()
    }

    #[test]
    fn committed_answers_take_commit_order_and_the_others_keep_their_place() {
        let events = vec![
            reply(1, Some(30)),
            reply(2, None),
            reply(3, Some(10)),
            reply(4, Some(20)),
            reply(5, None),
        ];
        assert_eq!(ids(&commit_order(events)), vec![3, 2, 4, 1, 5]);
    }
}

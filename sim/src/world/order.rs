//! The commit order of one step's answers (the PostgreSQL tier).

use crate::trace::Event;

/// Puts the answers of one step's offloaded calls in commit order.
///
/// Answers that carry a commit sequence are sorted by it, into the places
/// such answers hold in return order. A lock-free read (`read_at`: the
/// highest commit its snapshot showed) joins them right after that
/// commit, or, when its snapshot missed one of the step's commits below
/// it (`read_unseen`), right before the first such: a commit the snapshot
/// missed and a later one it showed touch no common row (the later one
/// would have waited for the first), so the read's place between them
/// changes nothing either decided. Any other answer without a sequence (a
/// call that committed nothing: an error that rolled back, another read)
/// keeps its place. Every call of a step finished before the step ended
/// and none of the next step's began, so across steps the trace is in
/// commit order already.
pub(crate) fn commit_order(events: Vec<Event>) -> Vec<Event> {
    let commits: std::collections::BTreeSet<u64> = (events.iter())
        .filter_map(|e| match e {
            Event::Reply { commit, .. } => *commit,
            _ => None,
        })
        .collect();
    // Twice the sequence for a commit; odd keys fall between two commits.
    let sequence = |e: &Event| match e {
        Event::Reply {
            commit: Some(c), ..
        } => Some(c.saturating_mul(2)),
        Event::Reply {
            commit: None,
            read_at: Some(r),
            read_unseen,
            ..
        } => Some(
            match read_unseen.iter().filter(|u| commits.contains(u)).min() {
                Some(u) => u.saturating_mul(2).saturating_sub(1),
                None => r.saturating_mul(2).saturating_add(1),
            },
        ),
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
            read_at: None,
            read_unseen: Vec::new(),
            retried: false,
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

    fn read(id: u64, read_at: u64, read_unseen: Vec<u64>) -> Event {
        let mut e = reply(id, None);
        if let Event::Reply {
            read_at: r,
            read_unseen: u,
            ..
        } = &mut e
        {
            *r = Some(read_at);
            *u = read_unseen;
        }
        e
    }

    #[test]
    fn a_lock_free_read_follows_the_commits_its_snapshot_showed() {
        // spec: LOCK-5, ROUTE-3
        let events = vec![
            read(1, 20, vec![]),
            reply(2, Some(30)),
            reply(3, Some(10)),
            reply(4, Some(20)),
            reply(5, None),
        ];
        assert_eq!(ids(&commit_order(events)), vec![3, 4, 1, 2, 5]);
        // The snapshot showed 30 but not 20 (still committing): before 20.
        // An unseen sequence of no answer of the step (rolled back, or an
        // earlier step's) does not move it.
        let events = vec![
            read(1, 30, vec![5, 20]),
            reply(2, Some(30)),
            reply(3, Some(10)),
            reply(4, Some(20)),
        ];
        assert_eq!(ids(&commit_order(events)), vec![3, 1, 4, 2]);
    }
}

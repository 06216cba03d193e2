//! The order of eligible replicas for a new route (ROUTE-10).
//!
//! Candidates sort by, in turn: lower binding priority; preferred region
//! match; preferred zone match; fewer active reservations; the route hash of
//! (action, replica); then instance ID and replica ID, as bytes.
//!
//! The route hash is the first 16 hex digits of
//! `md5(action_id || "/" || replica_id)`, compared as text. MD5 is used as a
//! fixed, well-known mixing function, not for security: it is the same on
//! every process and release, and PostgreSQL computes the same value with
//! `substr(md5(action || '/' || replica), 1, 16)`, so both backends order
//! identically. `/` cannot appear in an identifier, so the input is
//! unambiguous.

mod lanes;

use md5::{Digest, Md5};

use crate::id::{ActionId, InstanceId, ReplicaId};

/// Candidates whose route hashes [`route_hash_keys`] computes side by
/// side.
pub const ROUTE_HASH_LANES: usize = lanes::LANES;

/// The route hash of (action, replica): 16 lowercase hex digits.
pub fn route_hash(action: &ActionId, replica: &ReplicaId) -> String {
    format!("{:016x}", route_hash_key(action, replica))
}

/// The MD5 input of the longest route hash a fast path takes in one call
/// of the compression function: five 64-byte blocks less the padding's
/// end marker and length. Two identifiers of [`crate::limits::ID_BYTES_MAX`]
/// bytes and the separator fit.
const ROUTE_HASH_INPUT_FAST_MAX: usize = 5 * 64 - 9;

/// MD5's initial state (RFC 1321, 3.3).
const MD5_INIT: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// The route hash of (action, replica) as a number: the first 8 bytes of
/// the digest, big-endian. It orders exactly as [`route_hash`]'s text does
/// (16 fixed-width lowercase hex digits of the same bytes), without the
/// text.
///
/// A resolve computes it for every candidate that ties on everything
/// before it, so the message is padded here (RFC 1321, 3.1 and 3.2) into
/// a buffer on the stack and compressed in one call, without the
/// incremental hasher's buffering; the digest is the same.
pub fn route_hash_key(action: &ActionId, replica: &ReplicaId) -> u64 {
    let (a, r) = (action.as_str().as_bytes(), replica.as_str().as_bytes());
    let len = a.len() + 1 + r.len();
    if len > ROUTE_HASH_INPUT_FAST_MAX {
        return route_hash_key_incremental(a, r);
    }
    let mut buf = [0u8; 5 * 64];
    buf[..a.len()].copy_from_slice(a);
    buf[a.len()] = b'/';
    buf[a.len() + 1..len].copy_from_slice(r);
    buf[len] = 0x80;
    let blocks = (len + 8) / 64 + 1;
    let end = blocks * 64;
    buf[end - 8..end].copy_from_slice(&((len as u64) * 8).to_le_bytes());
    let (blocks, _) = buf[..end].as_chunks::<64>();
    let mut state = MD5_INIT;
    md5::block_api::compress(&mut state, blocks);
    // The digest is the state's words, each little-endian.
    (u64::from(state[0].swap_bytes()) << 32) | u64::from(state[1].swap_bytes())
}

/// The route hash keys of (action, each of `replicas`) into `keys`, as
/// [`route_hash_key`] gives them one by one; up to [`ROUTE_HASH_LANES`]
/// inputs that fit one MD5 block are hashed side by side.
///
/// # Panics
///
/// When `keys` is shorter than `replicas`.
pub fn route_hash_keys(action: &ActionId, replicas: &[&ReplicaId], keys: &mut [u64]) {
    assert!(keys.len() >= replicas.len(), "a key for every replica");
    let a = action.as_str().as_bytes();
    for (chunk, keys) in replicas
        .chunks(ROUTE_HASH_LANES)
        .zip(keys.chunks_mut(ROUTE_HASH_LANES))
    {
        if chunk.len() == 1 {
            keys[0] = route_hash_key(action, chunk[0]);
            continue;
        }
        let mut blocks = [[0u8; 64]; lanes::LANES];
        let mut one_block = [false; lanes::LANES];
        for (l, replica) in chunk.iter().enumerate() {
            one_block[l] = lanes::pad_one_block(&mut blocks[l], a, replica.as_str().as_bytes());
        }
        // As many lanes as the chunk has inputs: a lane costs its share
        // of the work whether or not its digest is used.
        let mut hashed = [0; lanes::LANES];
        let n = chunk.len();
        match n {
            2 => hashed[..n].copy_from_slice(&lanes::hash_blocks::<2>(first(&blocks))),
            3 => hashed[..n].copy_from_slice(&lanes::hash_blocks::<3>(first(&blocks))),
            4 => hashed[..n].copy_from_slice(&lanes::hash_blocks::<4>(first(&blocks))),
            5 => hashed[..n].copy_from_slice(&lanes::hash_blocks::<5>(first(&blocks))),
            6 => hashed[..n].copy_from_slice(&lanes::hash_blocks::<6>(first(&blocks))),
            7 => hashed[..n].copy_from_slice(&lanes::hash_blocks::<7>(first(&blocks))),
            _ => hashed = lanes::hash_blocks(&blocks),
        }
        for (l, replica) in chunk.iter().enumerate() {
            keys[l] = if one_block[l] {
                hashed[l]
            } else {
                route_hash_key(action, replica)
            };
        }
    }
}

/// The first `N` of `blocks`.
fn first<const N: usize>(blocks: &[lanes::Block; lanes::LANES]) -> &[lanes::Block; N] {
    blocks[..N].try_into().expect("N is at most LANES")
}

/// [`route_hash_key`] through the incremental hasher, for any length.
fn route_hash_key_incremental(action: &[u8], replica: &[u8]) -> u64 {
    let mut h = Md5::new();
    h.update(action);
    h.update(b"/");
    h.update(replica);
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The sort key of one eligible candidate; smaller sorts first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CandidateKey {
    /// Binding priority, lower first.
    pub priority: u32,
    /// False (0) when the region matches the preference, so matches sort first.
    pub region_mismatch: bool,
    /// False when the zone matches the preference.
    pub zone_mismatch: bool,
    /// Active reservations, fewer first.
    pub active: u32,
    /// The route hash.
    pub hash: String,
    /// Instance tie-breaker.
    pub instance: InstanceId,
    /// Replica tie-breaker.
    pub replica: ReplicaId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_hash_is_a_fixed_function() {
        // spec: ROUTE-10 (the hash never depends on the process)
        let a = ActionId::new("act-1").unwrap();
        let r = ReplicaId::new("rep-1").unwrap();
        // md5("act-1/rep-1"), first 8 bytes.
        assert_eq!(route_hash(&a, &r), "d77839c7a51b2c57");
        assert_eq!(route_hash_key(&a, &r), 0xd778_39c7_a51b_2c57);
    }

    #[test]
    fn the_one_call_route_hash_is_the_incremental_digest_at_every_length() {
        // spec: ROUTE-10 (the padding written by hand gives MD5's digest:
        // every input length from 3 bytes to two identifiers of the
        // largest size, across each block boundary)
        let max = crate::limits::ID_BYTES_MAX;
        for a_len in 1..=max {
            for r_len in [1, 2, 7, 54 - a_len.min(53), 55 - a_len.min(54), 63, 64, max] {
                let r_len = r_len.clamp(1, max);
                let a: String = (0..a_len)
                    .map(|i| (b'a' + (i % 26) as u8) as char)
                    .collect();
                let r: String = (0..r_len)
                    .map(|i| (b'0' + (i % 10) as u8) as char)
                    .collect();
                let (action, replica) = (ActionId::new(&a).unwrap(), ReplicaId::new(&r).unwrap());
                assert_eq!(
                    route_hash_key(&action, &replica),
                    route_hash_key_incremental(a.as_bytes(), r.as_bytes()),
                    "{a_len} + 1 + {r_len} bytes"
                );
            }
        }
        assert!(
            2 * max < ROUTE_HASH_INPUT_FAST_MAX,
            "two identifiers and the separator fit"
        );
    }

    #[test]
    fn the_side_by_side_route_hashes_are_each_the_digest_alone() {
        // spec: ROUTE-10 (hashing candidates side by side changes no
        // hash: every count of candidates up to two batches, inputs of
        // one and of two blocks mixed, across the one-block boundary)
        let max = crate::limits::ID_BYTES_MAX;
        let ids = |prefix: char, len: usize| -> String {
            std::iter::once(prefix)
                .chain((1..len).map(|i| (b'a' + (i * 7 % 26) as u8) as char))
                .collect()
        };
        for a_len in [1, 5, 20, 40, 53, 54, 55, max] {
            let action = ActionId::new(ids('x', a_len)).unwrap();
            let replicas: Vec<ReplicaId> = (0..2 * ROUTE_HASH_LANES + 3)
                .map(|i| {
                    let len = [1, 3, 10, 54 - a_len.min(53), 55 - a_len.min(54), 64, max][i % 7];
                    ReplicaId::new(ids(char::from(b'a' + i as u8), len.clamp(1, max))).unwrap()
                })
                .collect();
            let refs: Vec<&ReplicaId> = replicas.iter().collect();
            for n in 0..=refs.len() {
                let mut keys = vec![0; n];
                route_hash_keys(&action, &refs[..n], &mut keys);
                for (r, key) in refs[..n].iter().zip(&keys) {
                    assert_eq!(
                        *key,
                        route_hash_key_incremental(
                            action.as_str().as_bytes(),
                            r.as_str().as_bytes()
                        ),
                        "{a_len}-byte action, {} of {n}",
                        r.as_str()
                    );
                }
            }
        }
    }

    #[test]
    fn the_numeric_route_hash_orders_like_its_text() {
        // spec: ROUTE-10 (the memory backend compares the number, PostgreSQL
        // the text; both must pick the same candidate)
        let actions = ["act-1", "a2", "x", "a-very-long-action-id:0042"];
        let replicas = ["rep-1", "r2", "eu-west.z1.r_03", "r:9", "zz"];
        let mut pairs = Vec::new();
        for a in actions {
            for r in replicas {
                let a = ActionId::new(a).unwrap();
                let r = ReplicaId::new(r).unwrap();
                let text = route_hash(&a, &r);
                let key = route_hash_key(&a, &r);
                assert_eq!(text, format!("{key:016x}"));
                pairs.push((text, key));
            }
        }
        for (ta, ka) in &pairs {
            for (tb, kb) in &pairs {
                assert_eq!(ta.cmp(tb), ka.cmp(kb), "{ta} vs {tb}");
            }
        }
        // Leading zero digits and the top bit, where a signed or a
        // variable-width rendering would go wrong.
        for (a, b) in [
            (0x0000_0000_0000_0001u64, 0x0000_0000_0000_0010),
            (0x7fff_ffff_ffff_ffff, 0x8000_0000_0000_0000),
            (0x0fff_ffff_ffff_ffff, 0xf000_0000_0000_0000),
        ] {
            assert!(a < b);
            assert!(format!("{a:016x}") < format!("{b:016x}"));
        }
    }
}

//! A hash map for lookups whose iteration order cannot reach a result.
//!
//! The in-memory backend keeps ordered maps wherever it lists. The few
//! maps a resolve searches by a long key among many (routes by action,
//! resolve plans by tenant and capability) are hash maps instead: one
//! hash and one probe where an ordered map compares a dozen texts. This
//! wrapper is the reviewed exception to the crate's ban on hash maps: its
//! hasher has fixed keys, and it offers no iteration but [`LookupMap::sorted`].
//!
//! The hasher is FxHash ([rustc-hash](https://docs.rs/rustc-hash)): a few
//! multiplications per word where SipHash runs rounds per eight bytes. Its
//! keys are fixed, as SipHash's were here: neither resists keys chosen to
//! collide, and both keep a map's layout the same from run to run.

#![allow(clippy::disallowed_types)] // the one reviewed use: lookups, sorted listing

use std::collections::HashMap;
use std::hash::Hash;

use rustc_hash::FxBuildHasher;

/// A map searched by key and listed only in key order.
#[derive(Debug, Clone)]
pub(crate) struct LookupMap<K, V>(HashMap<K, V, FxBuildHasher>);

impl<K, V> Default for LookupMap<K, V> {
    fn default() -> Self {
        LookupMap(HashMap::default())
    }
}

impl<K: Hash + Ord, V> LookupMap<K, V> {
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.0.get(key)
    }

    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.0.insert(key, value)
    }

    /// The entry of `key`, to read or fill with one search.
    pub(crate) fn entry(&mut self, key: K) -> std::collections::hash_map::Entry<'_, K, V> {
        self.0.entry(key)
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Every entry, in key order.
    pub(crate) fn sorted(&self) -> Vec<(&K, &V)> {
        let mut entries: Vec<(&K, &V)> = self.0.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::LookupMap;

    #[test]
    fn sorted_lists_in_key_order_whatever_the_insertion_order() {
        let mut map = LookupMap::default();
        for k in [5u32, 1, 9, 3, 7] {
            assert_eq!(map.insert(k, k * 10), None);
        }
        assert_eq!(map.insert(3, 31), Some(30));
        let keys: Vec<(u32, u32)> = map.sorted().into_iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(keys, vec![(1, 10), (3, 31), (5, 50), (7, 70), (9, 90)]);
        assert_eq!(map.len(), 5);
        assert_eq!(map.get(&9), Some(&90));
        *map.entry(9).or_insert(0) += 1;
        assert_eq!(*map.entry(11).or_insert(110), 110);
        assert_eq!(map.get(&9), Some(&91));
        assert_eq!(map.len(), 6);
        map.clear();
        assert_eq!(map.len(), 0);
        assert_eq!(map.get(&1), None);
    }
}

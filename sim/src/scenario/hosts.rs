//! The host names of a scenario's world (registries, replicas,
//! dispatchers, readers, the administrator and the lease maintainer), and
//! the selectors faults name them with.

use super::Scenario;

impl Scenario {
    /// Every host name of this scenario's world, in creation order.
    pub fn host_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        names.extend((0..self.registry.hosts).map(registry_host));
        names.extend(
            self.fleet
                .replicas
                .iter()
                .map(|r| replica_host(&r.get_ref().id)),
        );
        names.extend(
            self.fleet
                .replica_groups
                .iter()
                .map(|g| super::group_host(&g.get_ref().name)),
        );
        names.extend((0..self.workload.dispatchers).map(dispatcher_host));
        names.extend((0..self.workload.readers.len()).map(reader_host));
        names.push(ADMIN_HOST.to_string());
        names.push(MAINTAINER_HOST.to_string());
        names
    }
}

impl Scenario {
    /// Every zone a replica runs in, listed or in a group.
    pub fn zones(&self) -> std::collections::BTreeSet<String> {
        self.fleet
            .replicas
            .iter()
            .map(|r| r.get_ref().zone.clone())
            .chain(
                self.fleet
                    .replica_groups
                    .iter()
                    .flat_map(|g| g.get_ref().spread.iter().map(|p| p.zone.clone())),
            )
            .collect()
    }
}

/// The registry host with index `i`.
pub fn registry_host(i: u32) -> String {
    format!("registry-{i}")
}
/// The dispatcher host with index `i`.
pub fn dispatcher_host(i: u32) -> String {
    format!("dispatcher-{i}")
}
/// The catalog reader host with index `i`.
pub fn reader_host(i: usize) -> String {
    format!("reader-{i}")
}
/// The host of replica `id`.
pub fn replica_host(id: &str) -> String {
    format!("replica-{id}")
}
/// The catalog administrator and operator host.
pub const ADMIN_HOST: &str = "admin";
/// The lease maintenance host.
pub const MAINTAINER_HOST: &str = "maintainer";

/// Expands host selectors (`name` or `prefix*`) against `hosts`, in host
/// order, without duplicates.
pub fn select_hosts(selectors: &[String], hosts: &[String]) -> Vec<String> {
    hosts
        .iter()
        .filter(|h| selectors.iter().any(|s| selector_matches(s, h)))
        .cloned()
        .collect()
}

fn selector_matches(selector: &str, host: &str) -> bool {
    match selector.strip_suffix('*') {
        Some(prefix) => host.starts_with(prefix),
        None => selector == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_names_and_prefixes() {
        let hosts = vec![
            "registry-0".to_string(),
            "registry-1".into(),
            "admin".into(),
        ];
        assert_eq!(select_hosts(&["registry-*".into()], &hosts).len(), 2);
        assert_eq!(
            select_hosts(&["admin".into()], &hosts),
            vec!["admin".to_string()]
        );
        assert!(select_hosts(&["nope".into()], &hosts).is_empty());
    }
}

//! A primary and a streaming standby, both throwaway local clusters, for
//! failover tests: the standby is a base backup of the primary that
//! streams its WAL, synchronously or not, and can be promoted once the
//! primary is stopped as a crash would stop it.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cluster;
use crate::cluster::LocalOptions;
use crate::error::ProvisionError;
use crate::local::{self, Cluster, LOCAL_HOST, LOCAL_SUPERUSER, Settings};

/// The `application_name` the standby streams under, as
/// `synchronous_standby_names` lists it.
pub const STANDBY_NAME: &str = "connreg_standby";

/// How the primary waits for the standby at commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// `synchronous_standby_names` names the standby and
    /// `synchronous_commit = remote_apply`: a commit returns once the
    /// standby has applied it, so a promoted standby holds every commit a
    /// client saw succeed.
    Synchronous,
    /// No synchronous standby: a commit returns once it is on the
    /// primary's disk, and the standby may lag; a promotion can lose
    /// commits a client saw succeed.
    Asynchronous,
}

impl Replication {
    /// `synchronous` or `asynchronous`.
    pub fn as_str(self) -> &'static str {
        match self {
            Replication::Synchronous => "synchronous",
            Replication::Asynchronous => "asynchronous",
        }
    }
}

/// Which server of a [`ReplicatedPair`] is the primary now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The server started as the primary still is.
    Original,
    /// The standby was promoted; the original primary is stopped.
    Promoted,
}

/// A primary and its streaming standby, each a throwaway cluster of its
/// own (see [`LocalCluster`](crate::LocalCluster)); dropping the value
/// stops both and deletes their folders.
///
/// ```no_run
/// use connreg_pgtest::{LocalOptions, ReplicatedPair, Replication};
///
/// # fn example() -> Result<(), connreg_pgtest::ProvisionError> {
/// let pair = ReplicatedPair::start(LocalOptions::default(), Replication::Synchronous)?;
/// // ... write through pair.primary_url() ...
/// let without_primary = pair.fail_over()?;
/// // ... pair.primary_url() now names the promoted standby ...
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ReplicatedPair {
    primary: Cluster,
    standby: Cluster,
    replication: Replication,
    role: Mutex<Role>,
}

impl ReplicatedPair {
    /// Starts a primary with `options`, then a standby from a base backup
    /// of it, streaming as `replication` says; returns once the primary
    /// sees the standby streaming (and, when synchronous, as its
    /// synchronous standby). Blocks the calling thread (a few seconds).
    ///
    /// # Errors
    ///
    /// As [`LocalCluster::start`](crate::LocalCluster::start), and why the
    /// base backup, the standby's start or its streaming failed.
    pub fn start(
        options: LocalOptions,
        replication: Replication,
    ) -> Result<ReplicatedPair, ProvisionError> {
        let bindir = cluster::checked_bindir(options)?;
        let primary = local::start(
            &bindir,
            Settings {
                fsync: options.fsync,
                connections_max: options.connections_max,
            },
        )?;
        let standby = local::start_standby(&primary, STANDBY_NAME)?;
        if replication == Replication::Synchronous {
            primary.set_and_reload(&format!(
                "\nsynchronous_standby_names = '{STANDBY_NAME}'\nsynchronous_commit = remote_apply\n"
            ))?;
            let deadline =
                Instant::now() + Duration::from_secs(crate::limits::LOCAL_START_TIMEOUT_S);
            while primary
                .query(&format!(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = '{STANDBY_NAME}'"
                ))?
                .trim()
                != "sync"
            {
                if Instant::now() > deadline {
                    return Err(ProvisionError::TimedOut {
                        action: "the standby becoming synchronous".to_owned(),
                        timeout_s: crate::limits::LOCAL_START_TIMEOUT_S,
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(ReplicatedPair {
            primary,
            standby,
            replication,
            role: Mutex::new(Role::Original),
        })
    }

    /// How the pair replicates.
    pub fn replication(&self) -> Replication {
        self.replication
    }

    /// Which server is the primary now.
    pub fn role(&self) -> Role {
        *self.role.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn current(&self) -> &Cluster {
        match self.role() {
            Role::Original => &self.primary,
            Role::Promoted => &self.standby,
        }
    }

    /// The TCP port of the server that is the primary now.
    pub fn primary_port(&self) -> u16 {
        self.current().port
    }

    /// Superuser URL of database `database` on the primary now.
    pub fn primary_database_url(&self, database: &str) -> String {
        url(self.primary_port(), database)
    }

    /// Superuser URL of the maintenance database on the primary now.
    pub fn primary_url(&self) -> String {
        self.primary_database_url("postgres")
    }

    /// Superuser URL of database `database` on the standby (read only until
    /// a failover, the primary after it).
    pub fn standby_database_url(&self, database: &str) -> String {
        url(self.standby.port, database)
    }

    /// The original primary's port (refusing connections after a
    /// failover).
    pub fn original_primary_port(&self) -> u16 {
        self.primary.port
    }

    /// The standby's port.
    pub fn standby_port(&self) -> u16 {
        self.standby.port
    }

    /// Fails over: stops the primary at once (`pg_ctl stop -m immediate`,
    /// as a crash would), then promotes the standby and waits until it
    /// accepts writes. Returns how long no primary accepted writes. A
    /// second failover is refused: the old primary is not rebuilt as a
    /// standby.
    ///
    /// # Errors
    ///
    /// [`ProvisionError::InvalidSetting`] after a failover; why the stop or
    /// the promotion failed.
    pub fn fail_over(&self) -> Result<Duration, ProvisionError> {
        let mut role = self.role.lock().unwrap_or_else(PoisonError::into_inner);
        if *role == Role::Promoted {
            return Err(ProvisionError::InvalidSetting {
                variable: "ReplicatedPair::fail_over",
                value: "a second failover".to_owned(),
                reason: "the pair has failed over already; its old primary is stopped and is \
                         not rebuilt as a standby"
                    .to_owned(),
            });
        }
        let began = Instant::now();
        self.primary.stop_immediate()?;
        self.standby.promote()?;
        *role = Role::Promoted;
        Ok(began.elapsed())
    }

    /// Cuts the standby off from the primary's WAL, as a network fault
    /// between them would: its `primary_conninfo` is pointed at a port
    /// that refuses it and its WAL receiver ends, so commits from now on are
    /// on the primary only, and a failover loses them. Asynchronous pairs
    /// only: a synchronous primary would hold every commit waiting for the
    /// standby.
    ///
    /// # Errors
    ///
    /// [`ProvisionError::InvalidSetting`] on a synchronous pair or after a
    /// failover; why the standby could not be cut off.
    pub fn detach_standby(&self) -> Result<(), ProvisionError> {
        if self.replication == Replication::Synchronous || self.role() == Role::Promoted {
            return Err(ProvisionError::InvalidSetting {
                variable: "ReplicatedPair::detach_standby",
                value: format!("a {} pair, {:?}", self.replication.as_str(), self.role()),
                reason: "only an asynchronous pair's standby can be cut off before a failover"
                    .to_owned(),
            });
        }
        // A primary_conninfo change restarts the WAL receiver (PostgreSQL
        // 13 and later); port 1 on the loopback refuses it.
        self.standby.set_and_reload(&format!(
            "\nprimary_conninfo = 'host={LOCAL_HOST} port=1 user={LOCAL_SUPERUSER} application_name={STANDBY_NAME}'\n"
        ))?;
        let deadline = Instant::now() + Duration::from_secs(crate::limits::LOCAL_START_TIMEOUT_S);
        loop {
            self.standby.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE backend_type = 'walreceiver'",
            )?;
            let streaming = self.primary.query(&format!(
                "SELECT count(*) FROM pg_stat_replication WHERE application_name = '{STANDBY_NAME}'"
            ))?;
            if streaming.trim() == "0" {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ProvisionError::TimedOut {
                    action: "cutting the standby off".to_owned(),
                    timeout_s: crate::limits::LOCAL_START_TIMEOUT_S,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The primary's replication settings and its connected standbys, one
    /// `name=value` line each, as a qualification report records them.
    ///
    /// # Errors
    ///
    /// Why the query failed.
    pub fn replication_report(&self) -> Result<String, ProvisionError> {
        self.current().query(
            "SELECT 'synchronous_commit=' || current_setting('synchronous_commit') \
             UNION ALL SELECT 'synchronous_standby_names=' || current_setting('synchronous_standby_names') \
             UNION ALL SELECT 'standby=' || application_name || ' state=' || state || ' sync_state=' || sync_state \
               || ' replay_lag=' || coalesce(replay_lag::text, '0') FROM pg_stat_replication",
        )
    }
}

fn url(port: u16, database: &str) -> String {
    format!("postgres://{LOCAL_SUPERUSER}@{LOCAL_HOST}:{port}/{database}")
}

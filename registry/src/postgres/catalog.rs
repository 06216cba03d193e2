//! Catalog publication and reads (CAT-1..CAT-10).
//!
//! A publication runs in one control-pool transaction under the exclusive
//! publication lock. It applies its changes in order, each checked against
//! the state the earlier ones left (immutability conflicts, the bindings
//! limit), then checks every change's references against the final state,
//! then adds one to the revision: the same order of checks, and so the same
//! first error, as the in-memory backend. Any error rolls the whole
//! transaction back (CAT-2).
//!
//! A read is one statement of the data role's `connreg.data_catalog_page`:
//! the revision and the page from one snapshot, so from one publication
//! (CAT-4), with no lock. Filters, search text and ordering run in the
//! database; the byte budget is applied to the rows read, at most
//! `page_items + 1` of them.

use std::time::Duration;

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool};

use super::codec::{col, id, to_i64, u64_of};
use super::data::Data;
use super::error::db;
use super::locks;
use super::tx;
use crate::catalog::{CatalogPage, CatalogQuery, PlannedQuery, Reader};
use crate::error::{Error, Result};
use crate::limits::{
    PUBLICATION_LOCK_ATTEMPTS_MAX, PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT,
    PUBLICATION_LOCK_WAIT_MS, TENANT_CAPABILITY_BINDINGS_MAX,
};
use crate::records::{
    AdmissionScope, Binding, CapabilityDefinition, ConnectorVersion, Instance, Revision, ScopeKind,
};
use crate::request::{Change, Publication};

/// One page of definitions and the revision it was read at, one statement
/// (migration 0008): those some eligible binding offers (CAT-5, the chain
/// as `connreg.eligible_bindings` defines it for routing too), or for an
/// internal read that asks, active unbound ones (CAT-6). $1 tenant (null:
/// any tenant, for internal reads), $2 after, $3 exact capability, $4
/// lowercased search text, $5 profile, $6 include unbound definitions, $7
/// rows to read. No definition: one row with the revision and nulls.
const PAGE: &str = "SELECT * FROM connreg.data_catalog_page($1, $2, $3, $4, $5, $6, $7)";

const REVISION: &str = "SELECT connreg.data_catalog_revision()";

impl Data {
    /// CAT-4..CAT-10.
    pub(crate) async fn catalog_page(&self, query: CatalogQuery) -> Result<CatalogPage> {
        let planned = PlannedQuery::plan(&query, &self.config.cursor_keys)?;
        let (tenant, include_unbound) = match &planned.reader {
            // CAT-7: neither a tenant nor the internal permission: nothing.
            Reader::Anonymous => {
                let revision = self.catalog_revision().await?;
                planned.check_revision(revision)?;
                return Ok(planned.paginate(revision, std::iter::empty()));
            }
            Reader::Tenant(t) => (Some(t.as_str()), false),
            Reader::Internal { include_unbound } => (None, *include_unbound),
        };
        let rows = tx::read_one(&self.pool, async |conn: &mut PgConnection| {
            sqlx::query(PAGE)
                .bind(tenant)
                .bind(planned.after_capability().map(|c| c.as_str()))
                .bind(planned.capability.as_ref().map(|c| c.as_str()))
                .bind(planned.search.as_deref())
                .bind(planned.profile.as_ref().map(|p| p.as_str()))
                .bind(include_unbound)
                .bind(i64::from(planned.page_items) + 1)
                .fetch_all(conn)
                .await
                .map_err(db)
        })
        .await?;
        let Some(first) = rows.first() else {
            return Err(super::error::corrupt("data_catalog_page"));
        };
        let revision = Revision(u64_of("revision", col(first, "revision")?)?);
        planned.check_revision(revision)?;
        let mut definitions = Vec::with_capacity(rows.len());
        for row in &rows {
            if col::<Option<String>>(row, "capability_id")?.is_some() {
                definitions.push(definition(row)?);
            }
        }
        Ok(planned.paginate(revision, definitions))
    }

    /// The current revision.
    pub(crate) async fn catalog_revision(&self) -> Result<Revision> {
        let v: i64 = tx::read_one(&self.pool, async |conn: &mut PgConnection| {
            sqlx::query_scalar(REVISION)
                .fetch_one(conn)
                .await
                .map_err(db)
        })
        .await?;
        Ok(Revision(u64_of("revision", v)?))
    }
}

fn definition(row: &PgRow) -> Result<CapabilityDefinition> {
    Ok(CapabilityDefinition {
        id: id(row, "capability_id")?,
        summary: col(row, "summary")?,
        schema: col(row, "schema_json")?,
        active: col(row, "active")?,
    })
}

/// CAT-1..CAT-4: one transaction under the exclusive lock; the new
/// revision is exactly one above the old.
///
/// LOCK-4: PostgreSQL queues new shared requests behind a waiting
/// exclusive one, so a publisher that waited for the catalog lock as long
/// as readers held it would hold every resolve behind it. Each attempt
/// waits at most [`PUBLICATION_LOCK_WAIT_MS`]; a publisher that did not get
/// the lock leaves the queue (its transaction rolled back, nothing
/// written), lets routing run for a pause that grows with each attempt, and
/// queues again, up to [`PUBLICATION_LOCK_ATTEMPTS_MAX`] times. A resolve
/// therefore waits behind a queued publication at most
/// `PUBLICATION_LOCK_WAIT_MS`, plus the publication's own run time once it
/// holds the lock. Resolves hold the shared lock only for a decision round
/// that waits for no row longer than 1 ms (migrations 0013 and 0018),
/// never while they queue for a
/// counter, so the publication waits only for the rounds in progress.
pub(crate) async fn publish(control: &PgPool, publication: Publication) -> Result<Revision> {
    publication.validate_shape()?;
    for attempt in 1..=PUBLICATION_LOCK_ATTEMPTS_MAX {
        let published = tx::transaction(control, async |tx: &mut PgConnection| {
            if !locks::catalog_exclusive_within(&mut *tx, PUBLICATION_LOCK_WAIT_MS).await? {
                return Ok(None);
            }
            for change in &publication.changes {
                apply(&mut *tx, change).await?;
            }
            for change in &publication.changes {
                check_references(&mut *tx, change).await?;
            }
            let v: i64 = sqlx::query_scalar(
                "UPDATE connreg.catalog_state SET revision = revision + 1 RETURNING revision",
            )
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            Ok(Some(Revision(u64_of("revision", v)?)))
        })
        .await?;
        if let Some(revision) = published {
            return Ok(revision);
        }
        tokio::time::sleep(Duration::from_millis(u64::from(
            PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT * attempt,
        )))
        .await;
    }
    Err(Error::Unavailable {
        reason: format!(
            "the catalog stayed busy: no publication lock in {PUBLICATION_LOCK_ATTEMPTS_MAX} attempts; retry"
        ),
    })
}

async fn apply(tx: &mut PgConnection, change: &Change) -> Result<()> {
    match change {
        Change::UpsertType(t) => {
            sqlx::query(
                "INSERT INTO connreg.connector_types (type_id, family, owner, enabled)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (type_id) DO UPDATE
                 SET family = EXCLUDED.family, owner = EXCLUDED.owner,
                     enabled = EXCLUDED.enabled",
            )
            .bind(t.id.as_str())
            .bind(&t.family)
            .bind(&t.owner)
            .bind(t.enabled)
            .execute(tx)
            .await
            .map_err(db)?;
        }
        Change::AdmitVersion(v) => admit_version(tx, v).await?,
        Change::SetVersionStatus {
            version,
            active,
            qualified,
        } => {
            let done = sqlx::query(
                "UPDATE connreg.connector_versions SET active = $2, qualified = $3
                 WHERE version_id = $1",
            )
            .bind(version.as_str())
            .bind(active)
            .bind(qualified)
            .execute(tx)
            .await
            .map_err(db)?;
            if done.rows_affected() == 0 {
                return Err(Error::NotFound {
                    what: "version",
                    id: version.to_string(),
                });
            }
        }
        Change::UpsertDefinition(d) => {
            sqlx::query(
                "INSERT INTO connreg.capability_definitions
                    (capability_id, summary, schema_json, active)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (capability_id) DO UPDATE
                 SET summary = EXCLUDED.summary, schema_json = EXCLUDED.schema_json,
                     active = EXCLUDED.active",
            )
            .bind(d.id.as_str())
            .bind(&d.summary)
            .bind(&d.schema)
            .bind(d.active)
            .execute(tx)
            .await
            .map_err(db)?;
        }
        Change::UpsertInstance(i) => upsert_instance(tx, i).await?,
        Change::UpsertBinding(b) => upsert_binding(tx, b).await?,
        Change::UpsertScope(s) => upsert_scope(tx, s).await?,
    }
    Ok(())
}

/// REC-2: a version is admitted once; admitting it again is allowed only
/// with the same artifact, and then sets its status.
async fn admit_version(tx: &mut PgConnection, v: &ConnectorVersion) -> Result<()> {
    let old = sqlx::query(
        "SELECT v.type_id, v.artifact_digest, v.manifest, v.attestation,
                ARRAY(SELECT vc.capability_id FROM connreg.version_capabilities vc
                      WHERE vc.version_id = v.version_id ORDER BY vc.capability_id)
                    AS capabilities,
                ARRAY(SELECT vp.profile_id FROM connreg.version_profiles vp
                      WHERE vp.version_id = v.version_id ORDER BY vp.profile_id) AS profiles
         FROM connreg.connector_versions v WHERE v.version_id = $1",
    )
    .bind(v.id.as_str())
    .fetch_optional(&mut *tx)
    .await
    .map_err(db)?;
    let capabilities: Vec<&str> = v.capabilities.iter().map(|c| c.as_str()).collect();
    let profiles: Vec<&str> = v.profiles.iter().map(|p| p.as_str()).collect();
    if let Some(old) = old {
        let same = col::<String>(&old, "type_id")? == v.connector_type.as_str()
            && col::<String>(&old, "artifact_digest")? == v.artifact_digest
            && col::<String>(&old, "manifest")? == v.manifest
            && col::<String>(&old, "attestation")? == v.attestation
            && col::<Vec<String>>(&old, "capabilities")? == capabilities
            && col::<Vec<String>>(&old, "profiles")? == profiles;
        if !same {
            return Err(Error::Conflict {
                reason: "an admitted version is immutable",
            });
        }
        sqlx::query(
            "UPDATE connreg.connector_versions SET active = $2, qualified = $3
             WHERE version_id = $1",
        )
        .bind(v.id.as_str())
        .bind(v.active)
        .bind(v.qualified)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        return Ok(());
    }
    sqlx::query(
        "WITH version AS (
            INSERT INTO connreg.connector_versions (version_id, type_id, artifact_digest,
                manifest, attestation, active, qualified)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
        ), capabilities AS (
            INSERT INTO connreg.version_capabilities (version_id, capability_id)
            SELECT $1, c FROM unnest($8::text[]) AS c
        )
        INSERT INTO connreg.version_profiles (version_id, profile_id)
        SELECT $1, p FROM unnest($9::text[]) AS p",
    )
    .bind(v.id.as_str())
    .bind(v.connector_type.as_str())
    .bind(&v.artifact_digest)
    .bind(&v.manifest)
    .bind(&v.attestation)
    .bind(v.active)
    .bind(v.qualified)
    .bind(&capabilities)
    .bind(&profiles)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    Ok(())
}

async fn upsert_instance(tx: &mut PgConnection, i: &Instance) -> Result<()> {
    let old: Option<String> =
        sqlx::query_scalar("SELECT tenant_id FROM connreg.instances WHERE instance_id = $1")
            .bind(i.id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
    if old.is_some_and(|t| t != i.tenant.as_str()) {
        return Err(Error::Conflict {
            reason: "an instance cannot move to another tenant",
        });
    }
    sqlx::query(
        "INSERT INTO connreg.instances (instance_id, tenant_id, version_id, config_ref,
             config_revision, secret_provider_ref, secret_provider_revision, enabled)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (instance_id) DO UPDATE
         SET version_id = EXCLUDED.version_id, config_ref = EXCLUDED.config_ref,
             config_revision = EXCLUDED.config_revision,
             secret_provider_ref = EXCLUDED.secret_provider_ref,
             secret_provider_revision = EXCLUDED.secret_provider_revision,
             enabled = EXCLUDED.enabled",
    )
    .bind(i.id.as_str())
    .bind(i.tenant.as_str())
    .bind(i.version.as_str())
    .bind(&i.config.reference)
    .bind(to_i64("instance config revision", i.config.revision)?)
    .bind(&i.secret_provider.reference)
    .bind(to_i64(
        "instance secret provider revision",
        i.secret_provider.revision,
    )?)
    .bind(i.enabled)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    Ok(())
}

async fn upsert_binding(tx: &mut PgConnection, b: &Binding) -> Result<()> {
    let old =
        sqlx::query("SELECT tenant_id, capability_id FROM connreg.bindings WHERE binding_id = $1")
            .bind(b.id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
    if let Some(old) = old
        && (col::<String>(&old, "tenant_id")? != b.tenant.as_str()
            || col::<String>(&old, "capability_id")? != b.capability.as_str())
    {
        return Err(Error::Conflict {
            reason: "a binding cannot change its tenant or capability",
        });
    }
    let others: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM connreg.bindings
         WHERE tenant_id = $1 AND capability_id = $2 AND binding_id <> $3",
    )
    .bind(b.tenant.as_str())
    .bind(b.capability.as_str())
    .bind(b.id.as_str())
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    if others + 1 > TENANT_CAPABILITY_BINDINGS_MAX as i64 {
        return Err(Error::LimitExceeded {
            what: "bindings per tenant and capability",
            max: TENANT_CAPABILITY_BINDINGS_MAX as u64,
        });
    }
    let scopes: Vec<&str> = b.admission_scopes.iter().map(|s| s.as_str()).collect();
    sqlx::query(
        "WITH binding AS (
            INSERT INTO connreg.bindings (binding_id, tenant_id, capability_id, instance_id,
                priority, policy_revision, credential_ref, credential_revision,
                quota_policy_ref, quota_policy_revision, enabled)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
            ON CONFLICT (binding_id) DO UPDATE
            SET instance_id = EXCLUDED.instance_id, priority = EXCLUDED.priority,
                policy_revision = EXCLUDED.policy_revision,
                credential_ref = EXCLUDED.credential_ref,
                credential_revision = EXCLUDED.credential_revision,
                quota_policy_ref = EXCLUDED.quota_policy_ref,
                quota_policy_revision = EXCLUDED.quota_policy_revision,
                enabled = EXCLUDED.enabled
        ), dropped AS (
            DELETE FROM connreg.binding_scopes WHERE binding_id = $1
                AND NOT (scope_id = ANY($12::text[]))
        )
        INSERT INTO connreg.binding_scopes (binding_id, scope_id, tenant_id)
        SELECT $1, s, $2 FROM unnest($12::text[]) AS s
        ON CONFLICT (binding_id, scope_id) DO NOTHING",
    )
    .bind(b.id.as_str())
    .bind(b.tenant.as_str())
    .bind(b.capability.as_str())
    .bind(b.instance.as_str())
    .bind(i64::from(b.priority))
    .bind(to_i64("binding policy revision", b.policy_revision)?)
    .bind(&b.credential.reference)
    .bind(to_i64(
        "binding credential revision",
        b.credential.revision,
    )?)
    .bind(b.quota_policy.as_ref().map(|q| &q.reference))
    .bind(
        b.quota_policy
            .as_ref()
            .map(|q| to_i64("binding quota policy revision", q.revision))
            .transpose()?,
    )
    .bind(b.enabled)
    .bind(&scopes)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    Ok(())
}

async fn upsert_scope(tx: &mut PgConnection, s: &AdmissionScope) -> Result<()> {
    let old: Option<String> =
        sqlx::query_scalar("SELECT tenant_id FROM connreg.admission_scopes WHERE scope_id = $1")
            .bind(s.id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
    if old.is_some_and(|t| t != s.tenant.as_str()) {
        return Err(Error::Conflict {
            reason: "an admission scope cannot move to another tenant",
        });
    }
    sqlx::query(
        "WITH scope AS (
            INSERT INTO connreg.admission_scopes (scope_id, tenant_id, kind, scope_limit)
            VALUES ($1, $2, $3, $4)
            ON CONFLICT (scope_id) DO UPDATE
            SET kind = EXCLUDED.kind, scope_limit = EXCLUDED.scope_limit
            RETURNING scope_id
        )
        INSERT INTO connreg.admission_counters (scope_id, in_use)
        SELECT scope_id, 0 FROM scope
        ON CONFLICT (scope_id) DO NOTHING",
    )
    .bind(s.id.as_str())
    .bind(s.tenant.as_str())
    .bind(scope_kind(s.kind))
    .bind(i64::from(s.limit))
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    Ok(())
}

pub(crate) fn scope_kind(kind: ScopeKind) -> &'static str {
    match kind {
        ScopeKind::Tenant => "tenant",
        ScopeKind::Binding => "binding",
        ScopeKind::Instance => "instance",
        ScopeKind::Custom => "custom",
    }
}

pub(crate) fn parse_scope_kind(kind: &str) -> Option<ScopeKind> {
    Some(match kind {
        "tenant" => ScopeKind::Tenant,
        "binding" => ScopeKind::Binding,
        "instance" => ScopeKind::Instance,
        "custom" => ScopeKind::Custom,
        _ => return None,
    })
}

/// The references of one change, against the publication's final state.
async fn check_references(tx: &mut PgConnection, change: &Change) -> Result<()> {
    let missing = |what: &'static str, id: &str| Error::NotFound {
        what,
        id: id.to_string(),
    };
    match change {
        Change::UpsertType(_)
        | Change::UpsertScope(_)
        | Change::SetVersionStatus { .. }
        | Change::UpsertDefinition(_) => {}
        Change::AdmitVersion(v) => {
            let capabilities: Vec<&str> = v.capabilities.iter().map(|c| c.as_str()).collect();
            let row = sqlx::query(
                "SELECT EXISTS (SELECT 1 FROM connreg.connector_types WHERE type_id = $1)
                            AS type_found,
                        (SELECT c FROM unnest($2::text[]) WITH ORDINALITY AS u(c, n)
                         WHERE NOT EXISTS (SELECT 1 FROM connreg.capability_definitions d
                                           WHERE d.capability_id = u.c)
                         ORDER BY n LIMIT 1) AS missing_capability",
            )
            .bind(v.connector_type.as_str())
            .bind(&capabilities)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            if !col::<bool>(&row, "type_found")? {
                return Err(missing("connector type", v.connector_type.as_str()));
            }
            if let Some(c) = col::<Option<String>>(&row, "missing_capability")? {
                return Err(missing("capability definition", &c));
            }
        }
        Change::UpsertInstance(i) => {
            let found: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM connreg.connector_versions WHERE version_id = $1)",
            )
            .bind(i.version.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            if !found {
                return Err(missing("version", i.version.as_str()));
            }
        }
        Change::UpsertBinding(b) => {
            let scopes: Vec<&str> = b.admission_scopes.iter().map(|s| s.as_str()).collect();
            let row = sqlx::query(
                "SELECT (SELECT i.tenant_id FROM connreg.instances i WHERE i.instance_id = $1)
                            AS instance_tenant,
                        EXISTS (SELECT 1 FROM connreg.capability_definitions
                                WHERE capability_id = $2) AS definition_found,
                        ARRAY(SELECT s.tenant_id
                              FROM unnest($3::text[]) WITH ORDINALITY AS u(scope, n)
                              LEFT JOIN connreg.admission_scopes s ON s.scope_id = u.scope
                              ORDER BY u.n) AS scope_tenants",
            )
            .bind(b.instance.as_str())
            .bind(b.capability.as_str())
            .bind(&scopes)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            let Some(instance_tenant) = col::<Option<String>>(&row, "instance_tenant")? else {
                return Err(missing("instance", b.instance.as_str()));
            };
            if instance_tenant != b.tenant.as_str() {
                return Err(Error::InvalidRequest {
                    what: "binding",
                    reason: "the binding's tenant must own its instance".into(),
                });
            }
            if !col::<bool>(&row, "definition_found")? {
                return Err(missing("capability definition", b.capability.as_str()));
            }
            let tenants: Vec<Option<String>> = col(&row, "scope_tenants")?;
            for (scope, tenant) in scopes.iter().zip(tenants) {
                let Some(tenant) = tenant else {
                    return Err(missing("admission scope", scope));
                };
                if tenant != b.tenant.as_str() {
                    return Err(Error::InvalidRequest {
                        what: "binding",
                        reason: "an admission scope must belong to the binding's tenant".into(),
                    });
                }
            }
        }
    }
    Ok(())
}

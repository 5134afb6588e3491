//! Rows as the backends read them, and their one conversion to the store's records.
//!
//! The backends keep times differently (PostgreSQL as `timestamptz`, SQLite as integer
//! microseconds since the epoch), so each row is generic over its time column, [`StoredTime`].
//! Everything else about a row, and how it becomes a record, is the same on every backend.

use chrono::{DateTime, Utc};
use svc_core::permissions::Permissions;
use uuid::Uuid;

use super::{
    Agent, AgentDetail, AgentStatus, AuditEvent, Budget, StoreError, TokenLimits, TokenMetadata,
    TokenRecord, User,
};

/// The columns of a [`TokenRow`].
pub(super) const TOKEN_COLUMNS: &str = "token_id, org_id, user_id, agent_id, permissions, name, \
                                        created_at, expires_at, revoked_at, issuer_token_id, \
                                        rpm_limit, tpm_limit";
/// The columns of a [`ValidationRow`].
pub(super) const VALIDATION_COLUMNS: &str = "token_id, org_id, user_id, agent_id, permissions, secret_hash, expires_at, revoked_at, \
     rpm_limit, tpm_limit";
/// The columns of an [`AgentRow`].
pub(super) const AGENT_COLUMNS: &str = "agent_id, org_id, status, name, created_at, tools";
/// The columns of an [`AgentDetailRow`].
pub(super) const AGENT_DETAIL_COLUMNS: &str =
    "agent_id, org_id, status, name, created_at, tools, updated_at, status_reason";
/// The columns of a [`UserRow`], for a query that joins `users` as `u`.
pub(super) const USER_COLUMNS: &str = "u.user_id, u.display_name AS name, u.created_at";
/// The columns of an [`AuditRow`] but `detail`, whose text form each backend selects itself.
pub(super) const AUDIT_COLUMNS: &str =
    "event_id, org_id, occurred_at, actor_token_id, action, target_id, outcome";

/// A time column as a backend decodes it.
pub(super) trait StoredTime {
    /// The time it stands for; an error when the stored value is no time at all.
    fn into_time(self) -> Result<DateTime<Utc>, StoreError>;
}

impl StoredTime for DateTime<Utc> {
    fn into_time(self) -> Result<DateTime<Utc>, StoreError> {
        Ok(self)
    }
}

/// Microseconds since the epoch.
impl StoredTime for i64 {
    fn into_time(self) -> Result<DateTime<Utc>, StoreError> {
        DateTime::from_timestamp_micros(self)
            .ok_or_else(|| StoreError::Query("a stored time is out of range".into()))
    }
}

fn optional_time<T: StoredTime>(time: Option<T>) -> Result<Option<DateTime<Utc>>, StoreError> {
    time.map(StoredTime::into_time).transpose()
}

/// A token's metadata row ([`TOKEN_COLUMNS`]).
#[derive(sqlx::FromRow)]
pub(super) struct TokenRow<T> {
    token_id: Uuid,
    org_id: Uuid,
    user_id: Option<Uuid>,
    agent_id: Option<Uuid>,
    permissions: i64,
    name: Option<String>,
    created_at: T,
    expires_at: Option<T>,
    revoked_at: Option<T>,
    issuer_token_id: Option<Uuid>,
    rpm_limit: Option<i64>,
    tpm_limit: Option<i64>,
}

impl<T: StoredTime> TryFrom<TokenRow<T>> for TokenMetadata {
    type Error = StoreError;

    fn try_from(row: TokenRow<T>) -> Result<Self, StoreError> {
        Ok(TokenMetadata {
            token_id: row.token_id,
            org_id: row.org_id,
            user_id: row.user_id,
            agent_id: row.agent_id,
            permissions: Permissions::from_bits(row.permissions),
            name: row.name,
            created_at: row.created_at.into_time()?,
            expires_at: optional_time(row.expires_at)?,
            revoked_at: optional_time(row.revoked_at)?,
            issuer_token_id: row.issuer_token_id,
            limits: TokenLimits::from_columns(row.rpm_limit, row.tpm_limit)?,
        })
    }
}

/// What ValidateToken reads ([`VALIDATION_COLUMNS`]).
#[derive(sqlx::FromRow)]
pub(super) struct ValidationRow<T> {
    token_id: Uuid,
    org_id: Uuid,
    user_id: Option<Uuid>,
    agent_id: Option<Uuid>,
    permissions: i64,
    secret_hash: String,
    expires_at: Option<T>,
    revoked_at: Option<T>,
    rpm_limit: Option<i64>,
    tpm_limit: Option<i64>,
}

impl<T: StoredTime> TryFrom<ValidationRow<T>> for TokenRecord {
    type Error = StoreError;

    fn try_from(row: ValidationRow<T>) -> Result<Self, StoreError> {
        Ok(TokenRecord {
            token_id: row.token_id,
            org_id: row.org_id,
            user_id: row.user_id,
            agent_id: row.agent_id,
            permissions: Permissions::from_bits(row.permissions),
            secret_hash: row.secret_hash,
            expires_at: optional_time(row.expires_at)?,
            revoked_at: optional_time(row.revoked_at)?,
            limits: TokenLimits::from_columns(row.rpm_limit, row.tpm_limit)?,
            budgets: Vec::new(),
        })
    }
}

/// The budgets of a call as `budgets_for_call` writes them: `scope target limit period`,
/// comma-separated; NULL when there are none.
pub(super) fn call_budgets(text: Option<&str>) -> Result<Vec<Budget>, StoreError> {
    let Some(text) = text.filter(|text| !text.is_empty()) else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(|budget| {
            let unreadable = || StoreError::Query(format!("unreadable budget {budget:?}").into());
            let mut words = budget.split(' ');
            let (Some(scope), Some(key), Some(limit), Some(period), None) = (
                words.next(),
                words.next(),
                words.next(),
                words.next(),
                words.next(),
            ) else {
                return Err(unreadable());
            };
            let key = Uuid::try_parse(key).map_err(|_| unreadable())?;
            let rows = vec![(
                scope.to_owned(),
                key,
                limit.parse().map_err(|_| unreadable())?,
                period.to_owned(),
            )];
            super::budgets::from_rows(rows)?
                .pop()
                .ok_or_else(unreadable)
        })
        .collect()
}

/// ValidateToken's row with an agent of the token's org beside it: [`VALIDATION_COLUMNS`]
/// and the agent's, prefixed `asked_` and NULL when the org has no such agent.
#[derive(sqlx::FromRow)]
pub(super) struct ValidationWithAgentRow<T> {
    #[sqlx(flatten)]
    token: ValidationRow<T>,
    asked_agent_id: Option<Uuid>,
    asked_org_id: Option<Uuid>,
    asked_status: Option<String>,
    asked_name: Option<String>,
    asked_created_at: Option<T>,
    asked_tools: Option<String>,
    /// `budgets_for_call`'s answer.
    budgets: Option<String>,
}

impl<T: StoredTime> TryFrom<ValidationWithAgentRow<T>> for (TokenRecord, Option<Agent>) {
    type Error = StoreError;

    fn try_from(row: ValidationWithAgentRow<T>) -> Result<Self, StoreError> {
        let agent = match (
            row.asked_agent_id,
            row.asked_org_id,
            row.asked_status,
            row.asked_created_at,
        ) {
            (Some(agent_id), Some(org_id), Some(status), Some(created_at)) => {
                Some(Agent::try_from(AgentRow {
                    agent_id,
                    org_id,
                    status,
                    name: row.asked_name,
                    created_at,
                    tools: row.asked_tools.unwrap_or_default(),
                })?)
            }
            _ => None,
        };
        let mut token = TokenRecord::try_from(row.token)?;
        token.budgets = call_budgets(row.budgets.as_deref())?;
        Ok((token, agent))
    }
}

/// An agent row ([`AGENT_COLUMNS`]).
#[derive(sqlx::FromRow)]
pub(super) struct AgentRow<T> {
    agent_id: Uuid,
    org_id: Uuid,
    status: String,
    name: Option<String>,
    created_at: T,
    /// The tool grants, one space between patterns.
    tools: String,
}

impl<T: StoredTime> TryFrom<AgentRow<T>> for Agent {
    type Error = StoreError;

    fn try_from(row: AgentRow<T>) -> Result<Self, StoreError> {
        // A word outside the four statuses means the row was written by something else; it
        // must not pass as any status, least of all `active`.
        let status: AgentStatus = row
            .status
            .parse()
            .map_err(|e| StoreError::Query(Box::new(e)))?;
        Ok(Agent {
            agent_id: row.agent_id,
            org_id: row.org_id,
            status,
            name: row.name,
            created_at: row.created_at.into_time()?,
            tools: super::agent_tools::split(&row.tools),
        })
    }
}

/// An agent with its administration's columns ([`AGENT_DETAIL_COLUMNS`]).
#[derive(sqlx::FromRow)]
pub(super) struct AgentDetailRow<T> {
    #[sqlx(flatten)]
    agent: AgentRow<T>,
    updated_at: T,
    status_reason: Option<String>,
}

impl<T: StoredTime> TryFrom<AgentDetailRow<T>> for AgentDetail {
    type Error = StoreError;

    fn try_from(row: AgentDetailRow<T>) -> Result<Self, StoreError> {
        Ok(AgentDetail {
            agent: Agent::try_from(row.agent)?,
            updated_at: row.updated_at.into_time()?,
            status_reason: row.status_reason,
        })
    }
}

/// A user ([`USER_COLUMNS`]).
#[derive(sqlx::FromRow)]
pub(super) struct UserRow<T> {
    user_id: Uuid,
    name: Option<String>,
    created_at: T,
}

impl<T: StoredTime> TryFrom<UserRow<T>> for User {
    type Error = StoreError;

    fn try_from(row: UserRow<T>) -> Result<Self, StoreError> {
        Ok(User {
            user_id: row.user_id,
            name: row.name,
            created_at: row.created_at.into_time()?,
        })
    }
}

/// An audit event ([`AUDIT_COLUMNS`] and `detail` as JSON text).
#[derive(sqlx::FromRow)]
pub(super) struct AuditRow<T> {
    event_id: Uuid,
    org_id: Uuid,
    occurred_at: T,
    actor_token_id: Option<Uuid>,
    action: String,
    target_id: Option<String>,
    outcome: String,
    detail: String,
}

impl<T: StoredTime> TryFrom<AuditRow<T>> for AuditEvent {
    type Error = StoreError;

    fn try_from(row: AuditRow<T>) -> Result<Self, StoreError> {
        let detail = serde_json::from_str(&row.detail)
            .map_err(|e| StoreError::Query(format!("a stored audit detail: {e}").into()))?;
        Ok(AuditEvent {
            event_id: row.event_id,
            org_id: row.org_id,
            occurred_at: row.occurred_at.into_time()?,
            actor_token_id: row.actor_token_id,
            action: row.action,
            target_id: row.target_id,
            outcome: row.outcome,
            detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_convert_and_out_of_range_is_a_query_error() {
        let time = DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        assert_eq!(time.timestamp_micros().into_time().unwrap(), time);
        assert_eq!(time.into_time().unwrap(), time);
        let error = i64::MAX.into_time().expect_err("out of range");
        assert!(matches!(error, StoreError::Query(_)), "{error:?}");
    }

    #[test]
    fn an_unknown_agent_status_is_refused() {
        let row = AgentRow {
            agent_id: Uuid::new_v4(),
            org_id: Uuid::new_v4(),
            status: "enabled".to_owned(),
            name: None,
            created_at: 0_i64,
            tools: String::new(),
        };
        let error = Agent::try_from(row).expect_err("not a status");
        assert!(matches!(error, StoreError::Query(_)), "{error:?}");
    }

    #[test]
    fn unknown_permission_bits_are_kept() {
        let bits = (1 << 40) | Permissions::CHAT_COMPLETIONS.bits();
        let row = TokenRow {
            token_id: Uuid::new_v4(),
            org_id: Uuid::new_v4(),
            user_id: None,
            agent_id: None,
            permissions: bits,
            name: None,
            created_at: 0_i64,
            expires_at: None,
            revoked_at: Some(1_i64),
            issuer_token_id: None,
            rpm_limit: Some(5),
            tpm_limit: None,
        };
        let token = TokenMetadata::try_from(row).unwrap();
        assert_eq!(token.permissions.bits(), bits);
        assert_eq!(token.revoked_at.map(|t| t.timestamp_micros()), Some(1));
    }
}

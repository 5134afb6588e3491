//! The identity store: one trait, a PostgreSQL backend, an embedded SQLite backend, and a test
//! suite every backend passes.
//!
//! The gRPC service is a thin adapter over [`Store`]. Every tenant method takes the org first
//! and sees only that org's rows; a backend enforces that twice (an explicit `org_id` in every
//! query, and row-level security keyed on a transaction-local org setting in PostgreSQL). The
//! single exception is [`Store::token_for_validation`], which must find a token before anyone
//! knows its org.
//!
//! Each backend writes its own SQL; what does not depend on the SQL is written once and shared:
//! the rows and their conversion to records (`rows`), the rule a new token's references follow
//! (`references`), the sorting of driver errors (`driver_error`) and the query timer (`timer`).

use std::future::Future;

use uuid::Uuid;

mod agent_moves;
mod agent_tools;
pub mod budgets;
mod driver_error;
mod model;
pub mod postgres;
mod references;
mod revocation;
mod rows;
pub mod sqlite;
#[cfg(test)]
pub(crate) mod suite;
mod timer;
pub(crate) mod usage;

pub use budgets::{Budget, BudgetPeriod, BudgetSpend, BudgetTarget};
pub use model::{
    Agent, AgentDetail, AgentStatus, AuditAction, AuditEntry, AuditEvent, AuditOutcome, AuditQuery,
    BootstrapOrg, Cursor, MembershipRole, NewAgent, NewToken, NewUser, Organization, Reference,
    Revocation, Revoked, TokenLimits, TokenMetadata, TokenRecord, UnknownAgentStatus, User,
};
pub use postgres::PgStore;
pub use sqlite::SqliteStore;
pub use usage::{UsageGroup, UsageQuery, UsageTotals};

/// A boxed future borrowing a connection: the shape of a transaction's work in a backend.
type BoxFuture<'c, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'c>>;

/// An error from a backend, boxed so backends keep their driver types to themselves.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store call failed. Messages name no SQL, DSN or secret.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A referenced agent or user is not in the org (or does not exist at all: the caller
    /// cannot tell, so existence in other orgs is not revealed).
    #[error("the {0} does not belong to this org")]
    NotInOrg(Reference),
    /// A row with this id exists already.
    #[error("the {0} already exists")]
    AlreadyExists(&'static str),
    /// The caller may not do this to the row (a narrower token revoking a wider one).
    #[error("{0}")]
    Forbidden(&'static str),
    /// The change is not allowed from the row's current state (an archived agent moves no
    /// more; a token cannot bind an archived agent).
    #[error("{0}")]
    Precondition(&'static str),
    /// The backend could not be reached in time (connect, acquire or I/O failure).
    #[error("the identity store is unavailable")]
    Unavailable(#[source] BoxError),
    /// The backend answered with an error.
    #[error("an identity store query failed")]
    Query(#[source] BoxError),
}

/// Storage for orgs, users, agents and tokens.
///
/// Backends are cheap to clone (a pool handle). Every future is `Send` so the gRPC server can
/// drive it from any worker.
pub trait Store: Clone + Send + Sync + 'static {
    /// Checks the backend answers a trivial query.
    fn ping(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The token row with its hash, whatever its org; `None` if no such token exists.
    fn token_for_validation(
        &self,
        token_id: Uuid,
    ) -> impl Future<Output = Result<Option<TokenRecord>, StoreError>> + Send;

    /// The token row with its hash, and `agent_id` looked up in that token's org: what
    /// ValidateToken reads when it is asked about an agent too. The default reads them one
    /// after the other; a backend may read both at once.
    fn token_with_agent(
        &self,
        token_id: Uuid,
        agent_id: Uuid,
    ) -> impl Future<Output = Result<Option<(TokenRecord, Option<Agent>)>, StoreError>> + Send {
        async move {
            let Some(token) = self.token_for_validation(token_id).await? else {
                return Ok(None);
            };
            let agent = self.agent(token.org_id, agent_id).await?;
            Ok(Some((token, agent)))
        }
    }

    /// The agent if it exists in `org_id`; `None` if unknown or in another org.
    fn agent(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> impl Future<Output = Result<Option<Agent>, StoreError>> + Send;

    /// Creates the org if it does not exist yet, and returns it.
    fn ensure_organization(
        &self,
        org_id: Uuid,
    ) -> impl Future<Output = Result<Organization, StoreError>> + Send;

    /// Creates an org and an admin token in it, or (for [`BootstrapOrg::Existing`]) a new
    /// admin token in an org that exists, writing `audit` in the same transaction. `None` when
    /// the existing org is not there; [`StoreError::AlreadyExists`] when a new org's id is
    /// taken.
    fn bootstrap(
        &self,
        org: BootstrapOrg,
        token: NewToken,
        audit: AuditEntry,
    ) -> impl Future<Output = Result<Option<(Organization, TokenMetadata)>, StoreError>> + Send;

    /// Creates a user as a member of `org_id`, writing `audit` with it when given.
    fn create_user(
        &self,
        org_id: Uuid,
        user: NewUser,
        audit: Option<AuditEntry>,
    ) -> impl Future<Output = Result<User, StoreError>> + Send;

    /// Up to `limit` users of `org_id` ordered by `(created_at, user_id)`, after `after`.
    fn list_users(
        &self,
        org_id: Uuid,
        after: Option<Cursor>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<User>, StoreError>> + Send;

    /// Whether `user_id` is a member of `org_id`.
    fn is_member(
        &self,
        org_id: Uuid,
        user_id: Uuid,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Creates an agent in `org_id`, writing `audit` with it when given.
    fn create_agent(
        &self,
        org_id: Uuid,
        agent: NewAgent,
        audit: Option<AuditEntry>,
    ) -> impl Future<Output = Result<AgentDetail, StoreError>> + Send;

    /// The agent with its administration's columns, if it exists in `org_id`.
    fn agent_detail(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> impl Future<Output = Result<Option<AgentDetail>, StoreError>> + Send;

    /// Up to `limit` agents of `org_id` (of `status` only, when given) ordered by
    /// `(created_at, agent_id)`, after `after`.
    fn list_agents(
        &self,
        org_id: Uuid,
        status: Option<AgentStatus>,
        after: Option<Cursor>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<AgentDetail>, StoreError>> + Send;

    /// Moves an agent of `org_id` to `status` with `reason`, and writes `audit` with the
    /// `from` and `to` of the move added to its detail, in one transaction. The status it has
    /// already changes nothing but is recorded; an archived agent moves no more
    /// ([`StoreError::Precondition`]). `None` if no such agent is visible in `org_id`.
    fn set_agent_status(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
        status: AgentStatus,
        reason: Option<String>,
        audit: AuditEntry,
    ) -> impl Future<Output = Result<Option<AgentDetail>, StoreError>> + Send;

    /// Replaces the tool grants of an agent of `org_id` and writes `audit` with the new list
    /// added to its detail (`tools`), in one transaction. `None` if no such agent is visible
    /// in `org_id`.
    fn set_agent_tools(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
        tools: Vec<String>,
        audit: AuditEntry,
    ) -> impl Future<Output = Result<Option<AgentDetail>, StoreError>> + Send;

    /// Stores a token in `org_id`, writing `audit` with it when given. Its user must be a
    /// member and its agent must belong to the org, else [`StoreError::NotInOrg`]; an archived
    /// agent is [`StoreError::Precondition`].
    fn create_token(
        &self,
        org_id: Uuid,
        token: NewToken,
        audit: Option<AuditEntry>,
    ) -> impl Future<Output = Result<TokenMetadata, StoreError>> + Send;

    /// Marks a token of `org_id` revoked (keeping the first revocation time) and, unless
    /// `keep_issued`, every token it issued, transitively, in one transaction; writes `audit`
    /// for the token named and one like it for each token revoked with it. `None` (and nothing
    /// written) if no such token is visible in `org_id`.
    fn revoke(
        &self,
        org_id: Uuid,
        revocation: Revocation,
        audit: Option<AuditEntry>,
    ) -> impl Future<Output = Result<Option<Revoked>, StoreError>> + Send;

    /// [`Store::revoke`] of one token and what it issued, checking no permissions; the token
    /// as it is now.
    fn revoke_token(
        &self,
        org_id: Uuid,
        token_id: Uuid,
        audit: Option<AuditEntry>,
    ) -> impl Future<Output = Result<Option<TokenMetadata>, StoreError>> + Send {
        async move {
            let revocation = Revocation {
                token_id,
                keep_issued: false,
                revoker: None,
            };
            Ok(self
                .revoke(org_id, revocation, audit)
                .await?
                .map(|revoked| revoked.token))
        }
    }

    /// Up to `limit` tokens of `org_id` ordered by `(created_at, token_id)`, after `after`.
    fn list_tokens(
        &self,
        org_id: Uuid,
        after: Option<Cursor>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<TokenMetadata>, StoreError>> + Send;

    /// Writes one audit event of `org_id` on its own (a refused call, which changes nothing
    /// else).
    fn record_audit(
        &self,
        org_id: Uuid,
        audit: AuditEntry,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// One page of `org_id`'s audit events, newest first.
    fn audit_events(
        &self,
        org_id: Uuid,
        query: &AuditQuery,
    ) -> impl Future<Output = Result<Vec<AuditEvent>, StoreError>> + Send;

    /// The usage ledger's totals of `org_id`, one page ordered by key.
    fn usage(
        &self,
        org_id: Uuid,
        query: &UsageQuery,
    ) -> impl Future<Output = Result<Vec<UsageTotals>, StoreError>> + Send;

    // Money budgets.

    /// Sets the budget of its target in `org_id` (replacing the one it has), writing `audit`
    /// in the same transaction. An agent or token not in the org is [`StoreError::NotInOrg`].
    fn set_budget(
        &self,
        org_id: Uuid,
        budget: Budget,
        audit: AuditEntry,
    ) -> impl Future<Output = Result<Budget, StoreError>> + Send;

    /// Deletes the budget of `target` in `org_id`, writing `audit` with it; false (and nothing
    /// written) when it has none.
    fn delete_budget(
        &self,
        org_id: Uuid,
        target: BudgetTarget,
        audit: AuditEntry,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Every budget of `org_id` with its spend, from the ledger, in the period holding `now`.
    fn list_budgets(
        &self,
        org_id: Uuid,
        now: chrono::DateTime<chrono::Utc>,
    ) -> impl Future<Output = Result<Vec<BudgetSpend>, StoreError>> + Send;

    /// `budgets` of `org_id` with their spend, from the ledger, in the period holding `now`.
    fn budget_spend(
        &self,
        org_id: Uuid,
        budgets: Vec<Budget>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> impl Future<Output = Result<Vec<BudgetSpend>, StoreError>> + Send;
}

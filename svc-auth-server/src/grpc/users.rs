//! CreateUser and ListUsers: the org's human operators.

use svc_core::permissions::Permissions;
use svc_proto::v1;
use tonic::Status;
use uuid::Uuid;

use super::access::{Op, own_org};
use super::convert::{encode_cursor, optional_text, page_cursor, user};
use super::{MAX_DISPLAY_NAME_CHARS, next_page, page_size, status};
use crate::store::{AuditAction, AuditEntry, MembershipRole, NewUser, Store};
use crate::verify::ValidToken;

pub(super) const CREATE: Op = Op::act(
    "CreateUser",
    Permissions::USER_MANAGE,
    "USER_MANAGE",
    AuditAction::UserCreate,
);
pub(super) const LIST: Op = Op::read("ListUsers", Permissions::USER_MANAGE, "USER_MANAGE");

/// Creates a member of the caller's org.
pub(super) async fn create<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: v1::CreateUserRequest,
) -> Result<v1::User, Status> {
    let org_id = own_org(caller, &req.org_id)?;
    let name = optional_text("name", req.name, MAX_DISPLAY_NAME_CHARS)?;
    let user_id = Uuid::new_v4();
    let audit = AuditEntry::ok(Some(caller.token_id), AuditAction::UserCreate).target(user_id);
    let created = store
        .create_user(
            org_id,
            NewUser {
                user_id,
                display_name: name,
                role: MembershipRole::Member,
            },
            Some(audit),
        )
        .await
        .map_err(|e| status::store_error(CREATE.name, e))?;
    tracing::info!(%user_id, %org_id, created_by = %caller.token_id, "user created");
    Ok(user(org_id, created))
}

/// One page of the caller's org's users, oldest first.
pub(super) async fn list<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: &v1::ListUsersRequest,
) -> Result<v1::ListUsersResponse, Status> {
    let size = page_size(req.page_size);
    let after = page_cursor(&req.page_token)?;
    let users = store
        .list_users(caller.org_id, after, size + 1)
        .await
        .map_err(|e| status::store_error(LIST.name, e))?;
    let (users, next_page_token) = next_page(users, size, |last| encode_cursor(last.cursor()));
    Ok(v1::ListUsersResponse {
        users: users
            .into_iter()
            .map(|found| user(caller.org_id, found))
            .collect(),
        next_page_token,
    })
}

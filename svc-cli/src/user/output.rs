//! What `svc user` prints: one aligned line per user, or the user (or `{"users": [...]}`) as
//! JSON with the proto's field names.

use serde_json::{Value, json};
use svc_proto::v1::User;

use crate::output::{Format, Table, json_line, time, time_or};

fn json(user: &User) -> Value {
    json!({
        "user_id": user.user_id,
        "org_id": user.org_id,
        "name": user.name,
        "created_at": time(user.created_at.as_ref()),
    })
}

fn table<'a>(users: impl IntoIterator<Item = &'a User>, next: Option<&str>) -> String {
    let mut table = Table::new(&[("USER ID", 36), ("NAME", 20), ("CREATED", 0)]);
    for user in users {
        table.row(&[
            user.user_id.as_str(),
            user.name.as_deref().unwrap_or("-"),
            &time_or(user.created_at.as_ref(), "-"),
        ]);
    }
    table.finish(next)
}

/// One user, just created.
pub(crate) fn user(user: &User, format: Format) -> String {
    match format {
        Format::Json => json_line(&json(user)),
        Format::Human => table([user], None),
    }
}

/// `list`.
pub(crate) fn listed(users: &[User], next: Option<&str>, format: Format) -> String {
    match format {
        Format::Json => json_line(&json!({
            "users": users.iter().map(json).collect::<Vec<_>>(),
            "next_page_token": next,
        })),
        Format::Human => table(users, next),
    }
}

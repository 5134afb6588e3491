//! `svc usage` on an org that has made no calls yet: every grouping answers, in JSON, zeros.

use super::{auth_server, items};

#[tokio::test(flavor = "multi_thread")]
async fn an_org_without_calls_has_zero_totals() {
    let auth = auth_server().await;
    for by in ["token", "agent", "model", "day"] {
        let totals = auth
            .json(&["usage", "--by", by, "--since", "24h", "--json"])
            .await;
        assert_eq!(totals["group_by"], by);
        assert!(items(&totals, "groups").is_empty(), "{totals}");
        assert_eq!(totals["total"]["requests"], 0, "{totals}");
    }
}

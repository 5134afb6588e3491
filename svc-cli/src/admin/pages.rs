//! Listings page after page: every list call takes `page_size` and `page_token` and answers
//! items with a `next_page_token`, so one loop serves them all.

use std::future::Future;

use svc_proto::v1::{
    Agent, AuditEvent, GetUsageRequest, GetUsageResponse, ListAgentsRequest, ListAgentsResponse,
    ListAuditEventsRequest, ListAuditEventsResponse, ListTokensRequest, ListTokensResponse,
    ListUsersRequest, ListUsersResponse, TokenMetadata, UsageTotals, User,
};
use tonic::Status;

use super::Failure;
use crate::args::PageArgs;

/// The most pages a listing reads before it stops trusting the cursor.
const MAX_PAGES: usize = 10_000;

/// A list request: the same request, at another page.
pub(crate) trait PagedRequest: Clone {
    fn at_page(self, page_size: i32, page_token: String) -> Self;
}

/// A list answer: one page of items and the cursor of the next (empty at the end).
pub(crate) trait PagedResponse {
    type Item;
    fn into_page(self) -> (Vec<Self::Item>, String);
}

macro_rules! paged {
    ($($request:ty => $response:ty { $items:ident: $item:ty }),* $(,)?) => {$(
        impl PagedRequest for $request {
            fn at_page(mut self, page_size: i32, page_token: String) -> Self {
                self.page_size = page_size;
                self.page_token = page_token;
                self
            }
        }

        impl PagedResponse for $response {
            type Item = $item;
            fn into_page(self) -> (Vec<$item>, String) {
                (self.$items, self.next_page_token)
            }
        }
    )*};
}

paged! {
    ListTokensRequest => ListTokensResponse { tokens: TokenMetadata },
    GetUsageRequest => GetUsageResponse { groups: UsageTotals },
    ListAgentsRequest => ListAgentsResponse { agents: Agent },
    ListUsersRequest => ListUsersResponse { users: User },
    ListAuditEventsRequest => ListAuditEventsResponse { events: AuditEvent },
}

/// One page when either paging option is given (and the next page's cursor, if any), else
/// every page up to `most` items, following each `next_page_token` from `fetch`; the cursor
/// returned is where the reading stopped, if more remain.
pub(crate) async fn pages<T, F, Fut>(
    rpc: &'static str,
    paging: &PageArgs,
    most: usize,
    mut fetch: F,
) -> Result<(Vec<T>, Option<String>), Failure>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String), Failure>>,
{
    let one_page = paging.page_size.is_some() || paging.page_token.is_some();
    let mut cursor = paging.page_token.clone().unwrap_or_default();
    let mut items = Vec::new();
    for _ in 0..MAX_PAGES {
        let (page, next) = fetch(cursor).await?;
        items.extend(page);
        match Some(next).filter(|next| !next.is_empty()) {
            Some(next) if !one_page && items.len() < most => cursor = next,
            next => return Ok((items, next)),
        }
    }
    Err(Failure::Call(
        rpc,
        Status::internal("the cursor never ended"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of two from `0..total`, the cursor being the next index.
    async fn read(paging: PageArgs, most: usize, total: usize) -> (Vec<usize>, Option<String>) {
        pages("List", &paging, most, |cursor| async move {
            let from: usize = cursor.parse().unwrap_or(0);
            let to = (from + 2).min(total);
            let next = if to < total {
                to.to_string()
            } else {
                String::new()
            };
            Ok(((from..to).collect(), next))
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn every_page_one_page_or_up_to_a_bound() {
        assert_eq!(
            read(PageArgs::default(), usize::MAX, 5).await,
            ((0..5).collect(), None)
        );
        let one = PageArgs {
            page_token: Some("2".into()),
            ..PageArgs::default()
        };
        assert_eq!(
            read(one, usize::MAX, 5).await,
            (vec![2, 3], Some("4".into()))
        );
        assert_eq!(
            read(PageArgs::default(), 3, 9).await,
            ((0..4).collect(), Some("4".into()))
        );
    }

    #[test]
    fn a_request_moves_to_another_page_and_keeps_its_filters() {
        let request = ListAgentsRequest {
            status: Some("paused".into()),
            ..ListAgentsRequest::default()
        };
        let moved = request.at_page(7, "c".into());
        assert_eq!(
            (
                moved.page_size,
                moved.page_token.as_str(),
                moved.status.as_deref()
            ),
            (7, "c", Some("paused"))
        );
    }
}

//! The RequirePermission guard.

use std::future::Ready;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use crate::body::ResponseBody;
use crate::check::ResponseFuture;
use crate::context::{OrgContext, Permissions};
use crate::error::{ApiError, ErrorCode};

/// Applies [`RequirePermission`]; see the [module docs](super).
#[derive(Debug, Clone, Copy)]
pub struct RequirePermissionLayer {
    required: Permissions,
}

impl RequirePermissionLayer {
    /// Requires every bit of `required` on the request's token.
    pub fn new(required: Permissions) -> RequirePermissionLayer {
        RequirePermissionLayer { required }
    }

    /// Requires [`Permissions::CHAT_COMPLETIONS`].
    pub fn chat_completions() -> RequirePermissionLayer {
        RequirePermissionLayer::new(Permissions::CHAT_COMPLETIONS)
    }
}

impl<S> Layer<S> for RequirePermissionLayer {
    type Service = RequirePermission<S>;

    fn layer(&self, inner: S) -> RequirePermission<S> {
        RequirePermission {
            inner,
            required: self.required,
        }
    }
}

/// Refuses tokens lacking a permission with 403 `INSUFFICIENT_PERMISSIONS`; see the
/// [module docs](super).
#[derive(Debug, Clone, Copy)]
pub struct RequirePermission<S> {
    inner: S,
    required: Permissions,
}

impl<S> RequirePermission<S> {
    /// A [`RequirePermissionLayer`] requiring `required`.
    pub fn layer(required: Permissions) -> RequirePermissionLayer {
        RequirePermissionLayer::new(required)
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RequirePermission<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<(), Ready<Result<(), ApiError>>, ReqBody, S, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        match req.extensions().get::<OrgContext>() {
            // Without PatAuth in front there is no identity at all.
            None => ResponseFuture::reject(ApiError::new(ErrorCode::MissingToken)),
            Some(context) if !context.permissions.contains(self.required) => {
                ResponseFuture::reject(ApiError::new(ErrorCode::InsufficientPermissions))
            }
            Some(_) => ResponseFuture::call(self.inner.call(req)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http::StatusCode;
    use tower::{ServiceExt, service_fn};
    use uuid::Uuid;

    use super::*;

    async fn ok(_: Request<()>) -> Result<Response<String>, Infallible> {
        Ok(Response::new("ok".to_owned()))
    }

    fn with_permissions(bits: i64) -> Request<()> {
        let mut req = Request::new(());
        req.extensions_mut().insert(OrgContext::new(
            Uuid::new_v4(),
            Permissions::from_bits(bits),
            Uuid::new_v4(),
        ));
        req
    }

    fn code<B>(response: &Response<B>) -> Option<&str> {
        response
            .extensions()
            .get::<ApiError>()
            .map(|e| e.code().as_str())
    }

    #[tokio::test]
    async fn a_token_with_the_bits_passes() {
        let svc = RequirePermissionLayer::chat_completions().layer(service_fn(ok));
        let response = svc.oneshot(with_permissions(0b1001)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn a_token_lacking_a_bit_is_insufficient_permissions() {
        let required = Permissions::TOKEN_CREATE | Permissions::TOKEN_LIST;
        let svc = RequirePermissionLayer::new(required).layer(service_fn(ok));
        // Unknown high bits grant nothing.
        let response = svc
            .oneshot(with_permissions(0b0010 | 1 << 40))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(code(&response), Some("INSUFFICIENT_PERMISSIONS"));
    }

    #[tokio::test]
    async fn no_org_context_is_missing_token() {
        let svc = RequirePermissionLayer::chat_completions().layer(service_fn(ok));
        let response = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(code(&response), Some("MISSING_TOKEN"));
    }
}

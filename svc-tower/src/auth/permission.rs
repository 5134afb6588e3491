//! The RequirePermission guard.

use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use super::future::ResponseFuture;
use crate::body::ResponseBody;
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
    type Future = ResponseFuture<(), ReqBody, S, S::Future>;

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

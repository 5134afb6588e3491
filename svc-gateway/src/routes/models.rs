//! `GET /v1/models` and `GET /v1/models/{model}`: the registry in OpenAI's list and model
//! shapes, what the SDKs' `models.list()` and `models.retrieve()` read. Many tools call the
//! list first to test a connection.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use svc_tower::error::{ApiError, ErrorCode};

use crate::provider::Registry;

/// What the model routes need.
#[derive(Clone, Debug)]
pub(crate) struct ModelsState {
    pub(crate) registry: Registry,
    /// When the gateway started (Unix seconds): the `created` of every model.
    pub(crate) created: i64,
}

#[derive(Debug, Serialize)]
struct Model<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    owned_by: &'a str,
}

#[derive(Debug, Serialize)]
struct ModelList<'a> {
    object: &'static str,
    data: Vec<Model<'a>>,
}

impl ModelsState {
    fn model<'a>(&'a self, id: &'a str) -> Model<'a> {
        Model {
            id,
            object: "model",
            created: self.created,
            owned_by: self.registry.provider_name(),
        }
    }
}

pub(crate) async fn list(State(state): State<ModelsState>) -> Response {
    let data = state.registry.models().map(|id| state.model(id)).collect();
    Json(ModelList {
        object: "list",
        data,
    })
    .into_response()
}

pub(crate) async fn retrieve(
    State(state): State<ModelsState>,
    Path(model): Path<String>,
) -> Response {
    if !state.registry.models().any(|m| m == model) {
        return ApiError::new(ErrorCode::NotFound)
            .with_message("The model is not registered with this gateway.")
            .into_response_with(Body::empty());
    }
    Json(state.model(&model)).into_response()
}

//! The typed pieces of [`Config`](super::Config).

use std::time::Duration;

/// `SVC_LLM_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmMode {
    /// The deterministic in-process provider.
    Mock,
    /// An OpenAI-compatible upstream at `SVC_PROVIDER_BASE_URL`.
    Live,
}

/// The provider registry and how to reach a live provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// Mock or live.
    pub mode: LlmMode,
    /// The live provider's base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: Option<String>,
    /// The live provider's key, sent as `Authorization: Bearer`.
    pub api_key: Option<svc_runtime::Secret>,
    /// The deadline of one provider call (the response head, then each streamed chunk).
    pub timeout: Duration,
    /// The registered models. Empty only in live mode without `SVC_PROVIDER_MODELS`, where
    /// every model is forwarded and the provider's own registry decides.
    pub models: Vec<String>,
    /// `SVC_PROVIDERS_FILE`, checked; when set it is the whole registry.
    pub file: Option<super::providers::RegistryFile>,
}

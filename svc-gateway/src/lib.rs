//! The svc reference gateway: svc-tower layers stacked over a provider-forwarding service.

pub mod config;
pub mod provider;
pub mod validate;

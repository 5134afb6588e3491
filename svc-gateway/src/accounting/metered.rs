//! The answer's body, wrapped so that where it ends (or is dropped: a client that left
//! mid-stream) the call is accounted: its usage counted, its cost priced, its hold settled and
//! its ledger row and session checkpoint written.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::Books;
use super::hold::Hold;
use crate::call::Call;
use crate::forward::AnswerBody;
use crate::ledger::UsageRecord;
use crate::session::{Checkpoint, Entry};
use crate::usage::Report;

/// A call's answer body that accounts for the call once it ends.
pub struct Metered {
    inner: AnswerBody,
    settlement: Option<Settlement>,
}

impl Metered {
    /// Wraps `inner`; `settlement` runs once, where it ends.
    pub fn new(inner: AnswerBody, settlement: Settlement) -> Metered {
        Metered {
            inner,
            settlement: Some(settlement),
        }
    }

    fn settle(&mut self) {
        if let Some(settlement) = self.settlement.take() {
            settlement.run(self.inner.report());
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        // A client that leaves mid-stream still has what it was sent counted.
        self.settle();
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            this.settle();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What accounting one call needs once its usage is known.
pub struct Settlement {
    pub(super) books: Arc<Books>,
    pub(super) call: Call,
    pub(super) hold: Hold,
    /// The status the client was answered.
    pub(super) status: u16,
    /// From the handler's start to the answer's head.
    pub(super) latency_ms: i32,
    pub(super) at: chrono::DateTime<chrono::Utc>,
}

impl Settlement {
    /// Accounts for the call that used `report`. Runs where the body ends, inside a poll:
    /// what waits on a store (the settlement) goes to a task of its own, the ledger and the
    /// checkpoint to their writers' queues.
    fn run(self, report: Report) {
        let Settlement {
            books,
            call,
            hold,
            status,
            latency_ms,
            at,
        } = self;
        let api = &call.api;
        if let Some(usage) = &report.usage {
            books.tokens.record(usage);
        }
        books.cost.observe(&api.model, &report);
        // One reading of what the call used serves the metrics' cost, the settlement and the
        // ledger; a stream cut short is charged the prompt the hold estimated.
        let usage = crate::budget::CallUsage::of(&report, || {
            hold.prompt_estimate().unwrap_or_else(|| {
                crate::token_estimate::prompt_tokens(&api.json, api.message_count)
            })
        });
        let cost_usd_micros = books.cost.cost(&api.model, usage);
        let Some(org) = &call.org else {
            return;
        };
        // A call no provider answered used nothing: its hold is given back whole.
        if hold.holds_anything() {
            let cost = u64::try_from(cost_usd_micros).unwrap_or(0);
            books.holder.settle(&hold, usage, cost);
        }
        if let Some(ledger) = &books.ledger {
            ledger.record(UsageRecord {
                record_id: svc_core::id::uuid_v7(),
                org_id: org.org_id,
                token_id: org.token_id,
                agent_id: org.agent_id,
                model: api.model.clone(),
                provider: report.provider.clone(),
                prompt_tokens: report.usage.map_or(0, |u| u.prompt_tokens),
                completion_tokens: report.usage.map_or(0, |u| u.completion_tokens),
                status,
                latency_ms: u32::try_from(latency_ms).unwrap_or(0),
                at,
                tool: None,
                cost_usd_micros,
            });
        }
        if let (Some(writer), Some(session)) = (&books.checkpoints, &call.session) {
            writer.submit(Entry {
                org_id: org.org_id,
                agent_id: org.agent_id,
                session_id: session.as_str().to_owned(),
                checkpoint: Checkpoint {
                    request_id: call.request_id.uuid(),
                    model: api.model.clone(),
                    message_count: i32::try_from(api.message_count).unwrap_or(i32::MAX),
                    status,
                    latency_ms,
                    stream: api.stream,
                    usage: report.usage,
                },
            });
        }
    }
}

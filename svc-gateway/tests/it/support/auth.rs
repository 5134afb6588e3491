//! One org, its tokens and its agents, served by `svc_testkit::fake_auth` on loopback and
//! answering as the real server does. The end-to-end suite runs the real auth server instead.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use svc_testkit::fake_auth::{AGENT_SUSPENDED, AgentAnswer, FakeAuth, Grant, TokenAnswer};
use tonic::Code;
use uuid::Uuid;

/// One org: a chat token, a token without permissions, an active and a suspended agent.
#[derive(Clone, Debug)]
pub struct World {
    pub org_id: Uuid,
    pub chat_token: String,
    pub chat_token_id: Uuid,
    pub bare_token: String,
    pub agent_id: Uuid,
    pub suspended_agent_id: Uuid,
    /// ValidateAgent answers Unavailable for this one, as when the store is down.
    pub unavailable_agent_id: Uuid,
    /// ValidateToken answers Internal for this one.
    pub failing_token: String,
}

impl World {
    pub fn random() -> World {
        let token = || format!("svc_pat_{}_{}", Uuid::new_v4(), Uuid::new_v4().simple());
        World {
            org_id: Uuid::new_v4(),
            chat_token: token(),
            chat_token_id: Uuid::new_v4(),
            bare_token: token(),
            agent_id: Uuid::new_v4(),
            suspended_agent_id: Uuid::new_v4(),
            unavailable_agent_id: Uuid::new_v4(),
            failing_token: token(),
        }
    }

    /// The fake's script for this world.
    fn fake_auth(&self) -> FakeAuth {
        let chat = Grant::chat().token_id(self.chat_token_id);
        FakeAuth::for_org(self.org_id)
            .token(&self.chat_token, TokenAnswer::Valid(chat))
            .token(&self.bare_token, TokenAnswer::Valid(Grant::new(0)))
            .token(&self.failing_token, TokenAnswer::Fail(Code::Internal))
            .agent(self.agent_id, AgentAnswer::Active)
            .agent(
                self.suspended_agent_id,
                AgentAnswer::Denied(AGENT_SUSPENDED),
            )
            .agent(
                self.unavailable_agent_id,
                AgentAnswer::Fail(Code::Unavailable),
            )
    }
}

/// The method and `traceparent` metadata of each validation call, in arrival order.
pub type Calls = Arc<Mutex<Vec<(&'static str, Option<String>)>>>;

/// Serves the world on 127.0.0.1 until the test ends.
pub async fn start(world: &World) -> SocketAddr {
    world.fake_auth().start().await.addr()
}

/// Like [`start`], also returning the validation calls as they arrive.
pub async fn start_recording(world: &World) -> (SocketAddr, Calls) {
    let calls = Calls::default();
    let sink = Arc::clone(&calls);
    let auth = world
        .fake_auth()
        .on_call(move |call| {
            let traceparent = call.metadata_str("traceparent").map(str::to_owned);
            sink.lock().unwrap().push((call.method.name(), traceparent));
        })
        .start()
        .await;
    (auth.addr(), calls)
}

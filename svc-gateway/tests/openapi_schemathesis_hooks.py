"""Schemathesis hooks for tests/it/openapi_schemathesis.rs: what the document cannot know about
one deployment.

- Its model registry. A generated model names no registered model, and the gateway answers
  501 PROVIDER_NOT_CONFIGURED as SPEC requires. A valid model string (1 to 256 characters) is
  replaced with the registered model SVC_SCHEMATHESIS_MODEL, so the rest of each generated
  body reaches validation and the provider; a model that is not a valid string is left as is.
- The token's org. Every generated org id in a path would meet 403; about half of those that
  are UUIDs become the token's own org, SVC_SCHEMATHESIS_ORG_ID, so the 200 is tested too.
"""

import os
import uuid

import schemathesis

MODEL = os.environ["SVC_SCHEMATHESIS_MODEL"]
ORG_ID = os.environ["SVC_SCHEMATHESIS_ORG_ID"]


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if isinstance(body, dict):
        model = body.get("model")
        if isinstance(model, str) and 0 < len(model) <= 256:
            body["model"] = MODEL
    parameters = case.path_parameters
    if isinstance(parameters, dict) and isinstance(parameters.get("org_id"), str):
        try:
            generated = uuid.UUID(parameters["org_id"])
        except ValueError:
            return
        if generated.int % 2 == 0:
            parameters["org_id"] = ORG_ID

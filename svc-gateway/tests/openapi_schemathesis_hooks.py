"""Schemathesis hooks for tests/openapi_schemathesis.rs.

The document cannot know a deployment's model registry, so a generated model names no
registered model and the gateway answers 501 PROVIDER_NOT_CONFIGURED, as SPEC requires. A valid
model string (1 to 256 characters) is replaced with the registered model named by
SVC_SCHEMATHESIS_MODEL, so the rest of each generated body reaches validation and the
provider; a model that is not a valid string is left as generated.
"""

import os

import schemathesis

MODEL = os.environ["SVC_SCHEMATHESIS_MODEL"]


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if isinstance(body, dict):
        model = body.get("model")
        if isinstance(model, str) and 0 < len(model) <= 256:
            body["model"] = MODEL

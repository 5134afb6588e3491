//! Structured output to a Claude model as a forced tool.
//!
//! A JSON schema format (chat's `response_format`, the Responses API's `text.format`) becomes
//! one more tool, named after the schema, whose `input_schema` is the schema; the model is
//! made to call it (`tool_choice` of that tool, or `any` when the client's own tools may be
//! called too). Its input is the answer: it comes back as the message text, JSON, with the
//! finish reason `stop`. `json_object` is the same with a schema that allows any object. A
//! forced tool works on every Claude model and through any proxy, where Anthropic's own
//! structured output needs a recent model and a beta header.

use serde_json::{Map, Value, json};

use crate::provider::ProviderError;

/// The tool name of a `json_object` format, and of a schema that names none.
pub(crate) const JSON_OBJECT_TOOL: &str = "json_output";

/// A format's forced tool: its definition, and its name to find the answer by.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OutputTool {
    pub(crate) name: String,
    pub(crate) definition: Value,
}

/// The forced tool of a format object `format` at `field`: `{"type": "json_schema", ...}`
/// with `name`, `schema` and `description` in `spec` (chat nests them, the Responses API does
/// not), `{"type": "json_object"}`, or `{"type": "text"}` and none for no tool.
pub(crate) fn output_tool(
    format: Option<&Value>,
    spec: Option<&Value>,
    field: &str,
) -> Result<Option<OutputTool>, ProviderError> {
    let Some(format) = format.filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    let (name, schema, description) = match format["type"].as_str() {
        Some("text") => return Ok(None),
        Some("json_object") => (
            JSON_OBJECT_TOOL.to_owned(),
            json!({"type": "object", "additionalProperties": true}),
            Some(json!("Answer with a JSON object.")),
        ),
        Some("json_schema") => {
            let spec = spec.unwrap_or(&Value::Null);
            let schema = spec
                .get("schema")
                .filter(|s| s.is_object())
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            if schema.get("type").is_some_and(|t| t != "object") {
                return Err(ProviderError::untranslatable(
                    format!("{field}.schema.type"),
                    "a JSON schema answer for this model must be an object",
                ));
            }
            let name = spec["name"].as_str().unwrap_or(JSON_OBJECT_TOOL).to_owned();
            let description = spec.get("description").cloned().or_else(|| {
                Some(json!(
                    "Answer by calling this tool with the answer as its input."
                ))
            });
            (name, schema, description)
        }
        _ => {
            return Err(ProviderError::untranslatable(
                format!("{field}.type"),
                "this format cannot be sent to this model",
            ));
        }
    };
    let mut definition = Map::new();
    definition.insert("name".into(), json!(name));
    if let Some(description) = description {
        definition.insert("description".into(), description);
    }
    definition.insert("input_schema".into(), schema);
    Ok(Some(OutputTool {
        name,
        definition: Value::Object(definition),
    }))
}

/// Adds `output` to the Messages `tools` and makes the model call a tool: that one alone
/// when the client gave no tools of its own or said `none`, any of them when the model may
/// choose, the client's choice when it named one. `tools_field` names the client's tools for a
/// clash of names.
pub(crate) fn force(
    body: &mut Map<String, Value>,
    output: OutputTool,
    tools_field: &str,
) -> Result<(), ProviderError> {
    let choice = body.get("tool_choice").cloned().unwrap_or(Value::Null);
    let tools = body
        .entry("tools")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(tools) = tools else {
        return Ok(());
    };
    if tools.iter().any(|t| t["name"] == output.name.as_str()) {
        return Err(ProviderError::untranslatable(
            tools_field,
            "a tool has the name of the JSON schema answer",
        ));
    }
    let own_tools = !tools.is_empty();
    tools.push(output.definition);
    let forced = match choice["type"].as_str() {
        Some("tool") => return Ok(()),
        Some("auto" | "any") | None if own_tools => {
            let mut any = json!({"type": "any"});
            if let Some(disable) = choice.get("disable_parallel_tool_use") {
                any["disable_parallel_tool_use"] = disable.clone();
            }
            any
        }
        _ => {
            // Only the answer may be called.
            tools.retain(|t| t["name"] == output.name.as_str());
            json!({"type": "tool", "name": output.name})
        }
    };
    body.insert("tool_choice".into(), forced);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_becomes_a_tool_named_after_it() {
        let format = json!({"type": "json_schema"});
        let spec = json!({"name": "Person", "schema": {"type": "object", "properties": {"a": {}}}});
        let tool = output_tool(Some(&format), Some(&spec), "response_format")
            .unwrap()
            .unwrap();
        assert_eq!(tool.name, "Person");
        assert_eq!(tool.definition["input_schema"], spec["schema"]);
        let plain = output_tool(Some(&json!({"type": "text"})), None, "x").unwrap();
        assert_eq!(plain, None);
        let object = output_tool(Some(&json!({"type": "json_object"})), None, "x")
            .unwrap()
            .unwrap();
        assert_eq!(object.name, JSON_OBJECT_TOOL);
    }

    #[test]
    fn what_a_tool_cannot_carry_is_named() {
        let format = json!({"type": "json_schema"});
        let spec = json!({"name": "List", "schema": {"type": "array"}});
        let Err(ProviderError::Untranslatable(error)) =
            output_tool(Some(&format), Some(&spec), "response_format.json_schema")
        else {
            panic!("refused")
        };
        assert_eq!(error.field, "response_format.json_schema.schema.type");
        let Err(ProviderError::Untranslatable(error)) =
            output_tool(Some(&json!({"type": "grammar"})), None, "text.format")
        else {
            panic!("refused")
        };
        assert_eq!(error.field, "text.format.type");
    }

    #[test]
    fn the_model_is_made_to_call_a_tool() {
        let tool = || OutputTool {
            name: "out".into(),
            definition: json!({"name": "out", "input_schema": {"type": "object"}}),
        };
        let mut alone = Map::new();
        force(&mut alone, tool(), "tools").unwrap();
        assert_eq!(alone["tool_choice"], json!({"type": "tool", "name": "out"}));

        let mut with_tools = Map::new();
        with_tools.insert("tools".into(), json!([{"name": "f", "input_schema": {}}]));
        with_tools.insert(
            "tool_choice".into(),
            json!({"type": "auto", "disable_parallel_tool_use": true}),
        );
        force(&mut with_tools, tool(), "tools").unwrap();
        assert_eq!(
            with_tools["tool_choice"],
            json!({"type": "any", "disable_parallel_tool_use": true})
        );
        assert_eq!(with_tools["tools"].as_array().unwrap().len(), 2);

        let mut none = with_tools.clone();
        none.insert("tool_choice".into(), json!({"type": "none"}));
        force(
            &mut none,
            OutputTool {
                name: "other".into(),
                definition: json!({"name": "other"}),
            },
            "tools",
        )
        .unwrap();
        assert_eq!(none["tools"], json!([{"name": "other"}]));

        let Err(ProviderError::Untranslatable(clash)) = force(&mut with_tools, tool(), "tools")
        else {
            panic!("refused")
        };
        assert_eq!(clash.field, "tools");
    }
}

//! Discord payloads checked against Discord's OpenAPI spec (tests/fixtures/reference).

use serde_json::Value;

use crate::feeds::reference_dir;

/// Validates `value` against a schema of Discord's OpenAPI spec (the subset of JSON Schema
/// the spec uses: type, properties, required, maxLength, maxItems, minimum, maximum, oneOf,
/// items, $ref). Unknown properties are reported too.
pub fn schema_problems(spec: &Value, schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let schema = resolve(spec, schema);
    let mut out = Vec::new();
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        if !options
            .iter()
            .any(|o| schema_problems(spec, o, value, path).is_empty())
        {
            out.push(format!("{path}: matches no oneOf option"));
        }
        return out;
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !types
            .iter()
            .any(|t| *t == actual || (*t == "number" && actual == "integer"))
        {
            out.push(format!("{path}: {actual} is not {types:?}"));
            return out;
        }
    }
    if let (Some(max), Some(s)) = (
        schema.get("maxLength").and_then(Value::as_u64),
        value.as_str(),
    ) && s.chars().count() as u64 > max
    {
        out.push(format!("{path}: {} characters > {max}", s.chars().count()));
    }
    if let (Some(n), Some(v)) = (
        value.as_f64(),
        schema.get("minimum").and_then(Value::as_f64),
    ) && n < v
    {
        out.push(format!("{path}: {n} < {v}"));
    }
    if let (Some(n), Some(v)) = (
        value.as_f64(),
        schema.get("maximum").and_then(Value::as_f64),
    ) && n > v
    {
        out.push(format!("{path}: {n} > {v}"));
    }
    if let Some(items) = value.as_array() {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            out.push(format!("{path}: {} items > {max}", items.len()));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                out.extend(schema_problems(
                    spec,
                    item_schema,
                    item,
                    &format!("{path}[{i}]"),
                ));
            }
        }
    }
    if let Some(obj) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => out.extend(schema_problems(spec, s, v, &format!("{path}.{k}"))),
                None if props.is_some() => {
                    out.push(format!("{path}.{k}: not a property of the schema"))
                }
                None => {}
            }
        }
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = r.as_str()
                && !obj.contains_key(name)
            {
                out.push(format!("{path}.{name}: required"));
            }
        }
    }
    out
}

fn resolve<'a>(spec: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.trim_start_matches('#');
            resolve(
                spec,
                spec.pointer(pointer)
                    .unwrap_or_else(|| panic!("unresolved $ref {r}")),
            )
        }
        None => schema,
    }
}

pub fn discord_spec() -> Value {
    let text =
        std::fs::read_to_string(reference_dir().join("platform/discord-openapi.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

//! JSON Schema → grammar (feature `json`): the schema subset structured-output APIs use,
//! so that every finished output is JSON the schema accepts.
//!
//! Supported: `type` (one or a list), `properties` (written in their order), `required`,
//! `additionalProperties` (`false`, `true` or a schema; absent allows any other key, as
//! JSON Schema says), `items`, `prefixItems`, `minItems`/`maxItems`, `enum`, `const`,
//! `anyOf`/`oneOf` (as alternatives), `allOf` of object schemas, `$ref` to any part of
//! the document (`#/$defs/...` as pydantic writes, `#/definitions/...`, `#`),
//! `minLength`/`maxLength`, `pattern` (see `json_pattern`), `format` `date`, `time`,
//! `date-time` and `uuid` (other formats are annotations), integer bounds
//! (`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`) and whole-number bounds
//! on `number`. Annotations (`title`, `description`, `default`, `examples`, ...) and
//! keywords JSON Schema does not define are ignored.
//!
//! Refused with [`LlmError::JsonSchema`] naming the JSON pointer: assertion keywords
//! tempra cannot enforce by grammar (`multipleOf`, `uniqueItems: true`, `not`,
//! `if`/`then`/`else`, `patternProperties`, `propertyNames`, `minProperties`,
//! `maxProperties`, `contains`, `dependentRequired`, `unevaluatedProperties`, ...), and
//! malformed schemas (a `type` that is not a type name, `required` that is not a list of
//! strings, an `enum` with no values, a `$ref` that points nowhere, ...).
//!
//! Strings allow every character JSON can hold, with `\uXXXX` escapes that are never
//! lone surrogates; numbers have at most 16 digits before and after the point and two
//! in the exponent, so every JSON parser reads them; whitespace between tokens is one
//! space or a newline and up to 20 spaces or tabs.

use std::collections::HashMap;

use crate::error::{LlmError, Result};
use crate::grammar::gbnf_writer::{GbnfWriter, literal};
use crate::grammar::json_numbers::{Bound, int_range, number_range};
use crate::grammar::json_pattern::pattern_grammar;
use crate::grammar::rules::Grammar;
use crate::json::JsonValue;

/// Keywords JSON Schema defines that this converter cannot enforce.
const UNSUPPORTED: &[&str] = &[
    "multipleOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "$dynamicRef",
    "$recursiveRef",
];

/// Keywords that constrain values (as opposed to annotations), for the checks around
/// `$ref`, `anyOf` and `allOf`.
const ASSERTIONS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
];

const SPACE: &str = r#"| " " | "\n" [ \t]{0,20}"#;
const VALUE: &str = "object | array | string | number | boolean | null";
const OBJECT: &str =
    r#""{" space ( string ":" space value ( "," space string ":" space value )* )? "}" space"#;
const ARRAY: &str = r#""[" space ( value ( "," space value )* )? "]" space"#;
const STRING: &str = r#""\"" char* "\"" space"#;
const CHAR: &str = r#"[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} | [dD] [89abAB] hex{2} "\\u" [dD] [c-fC-F] hex{2} ) )"#;
const HEX: &str = "[0-9a-fA-F]";
const INTEGRAL: &str = r#""0" | [1-9] [0-9]{0,15}"#;
const NUMBER: &str = r#""-"? integral ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )? space"#;
const INTEGER: &str = r#""-"? integral space"#;
const BOOLEAN: &str = r#"( "true" | "false" ) space"#;
const NULL: &str = r#""null" space"#;
const DATE: &str = r#"[0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )"#;
const TIME: &str = r#"( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )"#;
const UUID: &str = "hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}";

impl Grammar {
    /// The grammar of the JSON values `schema` accepts (see the module docs for the
    /// subset).
    ///
    /// Errors: [`LlmError::JsonSchema`] with the JSON pointer of an unsupported keyword
    /// or a malformed part.
    ///
    /// ```
    /// use tempra_llm::grammar::Grammar;
    /// use tempra_llm::json::JsonValue;
    ///
    /// let schema = JsonValue::parse(r#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}"#)?;
    /// assert!(Grammar::from_json_schema(&schema).is_ok());
    /// let bad = JsonValue::parse(r#"{"properties": {"n": {"type": "integer", "multipleOf": 3}}}"#)?;
    /// assert_eq!(
    ///     Grammar::from_json_schema(&bad).unwrap_err().to_string(),
    ///     "JSON schema at `#/properties/n/multipleOf`: `multipleOf` is not supported (a grammar cannot enforce it)"
    /// );
    /// # Ok::<(), tempra_llm::LlmError>(())
    /// ```
    pub fn from_json_schema(schema: &JsonValue) -> Result<Grammar> {
        let text = json_schema_gbnf(schema)?;
        Grammar::parse(&text)
    }

    /// The grammar of any JSON object (`response_format: {"type": "json_object"}`).
    pub fn json_object() -> Grammar {
        let schema = JsonValue::Object(vec![("type".into(), JsonValue::String("object".into()))]);
        // The schema is fixed and supported: this cannot fail.
        Grammar::from_json_schema(&schema).unwrap_or_else(|_| Grammar {
            rules: Vec::new(),
            root: 0,
        })
    }
}

/// The GBNF text of [`Grammar::from_json_schema`].
///
/// Errors: as [`Grammar::from_json_schema`].
pub fn json_schema_gbnf(schema: &JsonValue) -> Result<String> {
    let mut c = Converter {
        root: schema,
        w: GbnfWriter::default(),
        refs: HashMap::new(),
    };
    let root = c.w.reserve("root");
    let body = c.visit(schema, "#", "root")?;
    c.w.define(&root, body);
    Ok(c.w.finish())
}

/// The values `schema` accepts as an expression in the grammar `w` is writing (its rules
/// added to `w`): for grammars that embed JSON, such as tool calls.
///
/// Errors: as [`Grammar::from_json_schema`].
pub(crate) fn schema_rule(w: &mut GbnfWriter, schema: &JsonValue, hint: &str) -> Result<String> {
    let mut c = Converter {
        root: schema,
        w: std::mem::take(w),
        refs: HashMap::new(),
    };
    let result = c.visit(schema, "#", hint);
    *w = c.w;
    result
}

/// The rule `space` of JSON grammars, added to `w`: what may separate JSON tokens.
pub(crate) fn space_rule(w: &mut GbnfWriter) -> String {
    w.fixed("space", SPACE)
}

struct Converter<'s> {
    root: &'s JsonValue,
    w: GbnfWriter,
    /// `$ref` targets already given a rule.
    refs: HashMap<String, String>,
}

fn error(pointer: &str, what: impl Into<String>) -> LlmError {
    LlmError::JsonSchema {
        pointer: pointer.to_owned(),
        what: what.into(),
    }
}

/// `pointer` with `key` appended (escaped as JSON Pointer says).
fn child(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"))
}

impl<'s> Converter<'s> {
    fn primitive(&mut self, name: &str) -> String {
        let (body, needs): (&str, &[&str]) = match name {
            "value" => (
                VALUE,
                &["object", "array", "string", "number", "boolean", "null"],
            ),
            "object" => (OBJECT, &["string", "value", "space"]),
            "array" => (ARRAY, &["value", "space"]),
            "string" => (STRING, &["char", "space"]),
            "char" => (CHAR, &["hex"]),
            "hex" => (HEX, &[]),
            "number" => (NUMBER, &["integral", "space"]),
            "integer" => (INTEGER, &["integral", "space"]),
            "integral" => (INTEGRAL, &[]),
            "boolean" => (BOOLEAN, &["space"]),
            "null" => (NULL, &["space"]),
            "space" => (SPACE, &[]),
            "date" => (DATE, &[]),
            "time" => (TIME, &[]),
            "uuid" => (UUID, &["hex"]),
            "date-time" => ("date \"T\" time", &["date", "time"]),
            _ => return self.primitive("value"),
        };
        if self.w.has(name) {
            return name.to_owned();
        }
        self.w.fixed(name, body);
        for n in needs {
            self.primitive(n);
        }
        name.to_owned()
    }

    /// The GBNF expression of the values `schema` (at `pointer`) accepts.
    fn visit(&mut self, schema: &JsonValue, pointer: &str, hint: &str) -> Result<String> {
        let obj = match schema {
            JsonValue::Bool(true) => return Ok(self.primitive("value")),
            JsonValue::Bool(false) => {
                return Err(error(pointer, "the schema `false` accepts no value"));
            }
            JsonValue::Object(obj) => obj,
            other => {
                return Err(error(
                    pointer,
                    format!(
                        "a schema must be an object or a boolean, not {}",
                        other.type_name()
                    ),
                ));
            }
        };
        for (key, value) in obj {
            if UNSUPPORTED.contains(&key.as_str()) {
                return Err(error(
                    &child(pointer, key),
                    format!("`{key}` is not supported (a grammar cannot enforce it)"),
                ));
            }
            if key == "uniqueItems" && value.as_bool() == Some(true) {
                return Err(error(
                    &child(pointer, key),
                    "`uniqueItems: true` is not supported (a grammar cannot enforce it)",
                ));
            }
        }
        let has = |k: &str| schema.get(k).is_some();
        let others = |except: &[&str]| -> Option<&str> {
            obj.iter()
                .map(|(k, _)| k.as_str())
                .find(|k| ASSERTIONS.contains(k) && !except.contains(k))
        };
        if let Some(target) = schema.get("$ref") {
            if let Some(k) = others(&["$ref"]) {
                return Err(error(
                    &child(pointer, k),
                    format!("`{k}` beside `$ref` is not supported"),
                ));
            }
            return self.reference(target, &child(pointer, "$ref"));
        }
        if let Some(value) = schema.get("const") {
            self.primitive("space");
            return Ok(self.w.rule(
                &format!("{hint}-const"),
                format!("{} space", literal(&value.to_json())),
            ));
        }
        if let Some(values) = schema.get("enum") {
            let p = child(pointer, "enum");
            let values = values
                .as_array()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| error(&p, "`enum` must be a list of at least one value"))?;
            self.primitive("space");
            let alts: Vec<String> = values.iter().map(|v| literal(&v.to_json())).collect();
            return Ok(self.w.rule(
                &format!("{hint}-enum"),
                format!("( {} ) space", alts.join(" | ")),
            ));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = schema.get(key) {
                if let Some(k) = others(&[key]) {
                    return Err(error(
                        &child(pointer, k),
                        format!("`{k}` beside `{key}` is not supported"),
                    ));
                }
                let p = child(pointer, key);
                let list = list.as_array().filter(|l| !l.is_empty()).ok_or_else(|| {
                    error(&p, format!("`{key}` must be a list of at least one schema"))
                })?;
                let mut alts = Vec::with_capacity(list.len());
                for (i, s) in list.iter().enumerate() {
                    alts.push(self.visit(s, &child(&p, &i.to_string()), &format!("{hint}-{i}"))?);
                }
                return Ok(self.w.rule(hint, alts.join(" | ")));
            }
        }
        if has("allOf") {
            let merged = self.merge_all_of(schema, pointer)?;
            return self.visit(&merged, pointer, hint);
        }
        let types: Vec<(String, String)> = match schema.get("type") {
            None => vec![(self.infer_type(schema).to_owned(), child(pointer, "type"))],
            Some(JsonValue::String(t)) => vec![(t.clone(), child(pointer, "type"))],
            Some(JsonValue::Array(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let p = child(&child(pointer, "type"), &i.to_string());
                    t.as_str()
                        .map(|t| (t.to_owned(), p.clone()))
                        .ok_or_else(|| error(&p, "a type name must be a string"))
                })
                .collect::<Result<_>>()?,
            Some(_) => {
                return Err(error(
                    &child(pointer, "type"),
                    "`type` must be a type name or a list of them",
                ));
            }
        };
        let mut alts = Vec::with_capacity(types.len());
        for (t, p) in types {
            let expr = match t.as_str() {
                "object" => self.object(schema, pointer, hint)?,
                "array" => self.array(schema, pointer, hint)?,
                "string" => self.string(schema, pointer, hint)?,
                "integer" => self.integer(schema, pointer, hint)?,
                "number" => self.number(schema, pointer, hint)?,
                "boolean" => self.primitive("boolean"),
                "null" => self.primitive("null"),
                "any" => self.primitive("value"),
                other => {
                    return Err(error(
                        &p,
                        format!(
                            "unknown type `{other}` (object, array, string, integer, number, boolean, null)"
                        ),
                    ));
                }
            };
            alts.push(expr);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or_default()
        } else {
            self.w.rule(hint, alts.join(" | "))
        })
    }

    /// The type a schema without `type` describes, from its keywords.
    fn infer_type(&self, schema: &JsonValue) -> &'static str {
        let has = |k: &str| schema.get(k).is_some();
        if has("properties") || has("additionalProperties") || has("required") {
            "object"
        } else if has("items") || has("prefixItems") || has("minItems") || has("maxItems") {
            "array"
        } else if has("minLength") || has("maxLength") || has("pattern") || has("format") {
            "string"
        } else if has("minimum")
            || has("maximum")
            || has("exclusiveMinimum")
            || has("exclusiveMaximum")
        {
            "number"
        } else {
            "any"
        }
    }

    fn reference(&mut self, target: &JsonValue, pointer: &str) -> Result<String> {
        let Some(target) = target.as_str() else {
            return Err(error(pointer, "`$ref` must be a string"));
        };
        if let Some(name) = self.refs.get(target) {
            return Ok(name.clone());
        }
        let schema = self.resolve(target, pointer)?;
        let hint = target
            .rsplit('/')
            .next()
            .filter(|s| !s.is_empty() && *s != "#")
            .unwrap_or("ref");
        let name = self.w.reserve(hint);
        self.refs.insert(target.to_owned(), name.clone());
        let body = self.visit(schema, target, &name)?;
        self.w.define(&name, body);
        Ok(name)
    }

    /// The part of the document a local `$ref` (`#`, `#/$defs/X`) points to.
    fn resolve(&self, target: &str, pointer: &str) -> Result<&'s JsonValue> {
        let root: &'s JsonValue = self.root;
        let Some(path) = target.strip_prefix('#') else {
            return Err(error(
                pointer,
                format!(
                    "`$ref` {target:?}: only references within the schema (`#...`) are supported"
                ),
            ));
        };
        let mut at = root;
        for segment in path.split('/').skip(1) {
            let key = percent_decode(segment)
                .replace("~1", "/")
                .replace("~0", "~");
            at = match at {
                JsonValue::Object(_) => at.get(&key),
                JsonValue::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            }
            .ok_or_else(|| {
                error(
                    pointer,
                    format!("`$ref` {target:?} points to nothing in the schema"),
                )
            })?;
        }
        Ok(at)
    }

    /// An `allOf` (with its siblings) merged into one object schema.
    fn merge_all_of(&self, schema: &JsonValue, pointer: &str) -> Result<JsonValue> {
        let p = child(pointer, "allOf");
        let list = schema
            .get("allOf")
            .and_then(JsonValue::as_array)
            .filter(|l| !l.is_empty())
            .ok_or_else(|| error(&p, "`allOf` must be a list of at least one schema"))?;
        let mut parts: Vec<&JsonValue> = Vec::new();
        for (i, s) in list.iter().enumerate() {
            let here = child(&p, &i.to_string());
            let mut s = s;
            let mut hops = 0;
            while let Some(target) = s.get("$ref") {
                hops += 1;
                if hops > 32 {
                    return Err(error(&here, "`$ref` chain too long"));
                }
                s = self.resolve(target.as_str().unwrap_or(""), &child(&here, "$ref"))?;
            }
            parts.push(s);
        }
        let rest: Vec<(String, JsonValue)> = schema
            .as_object()
            .unwrap_or(&[])
            .iter()
            .filter(|(k, _)| k != "allOf")
            .cloned()
            .collect();
        let own = JsonValue::Object(rest);
        parts.push(&own);
        if let [one, only_annotations] = parts.as_slice()
            && only_annotations
                .as_object()
                .unwrap_or(&[])
                .iter()
                .all(|(k, _)| !ASSERTIONS.contains(&k.as_str()))
        {
            return Ok((*one).clone());
        }
        let mut properties: Vec<(String, JsonValue)> = Vec::new();
        let mut required: Vec<JsonValue> = Vec::new();
        let own_index = parts.len() - 1;
        for (i, part) in parts.iter().enumerate() {
            // The last part is the schema's own keywords beside `allOf`.
            let here = if i == own_index {
                pointer.to_owned()
            } else {
                child(&p, &i.to_string())
            };
            for (k, v) in part.as_object().unwrap_or(&[]) {
                match k.as_str() {
                    "properties" => {
                        for (name, s) in v.as_object().unwrap_or(&[]) {
                            match properties.iter_mut().find(|(n, _)| n == name) {
                                Some(entry) => entry.1 = s.clone(),
                                None => properties.push((name.clone(), s.clone())),
                            }
                        }
                    }
                    "required" => {
                        for r in v.as_array().unwrap_or(&[]) {
                            if !required.contains(r) {
                                required.push(r.clone());
                            }
                        }
                    }
                    "additionalProperties" => {
                        return Err(error(
                            &child(&here, k),
                            "`additionalProperties` together with `allOf` is not supported (JSON Schema applies it to each part alone)",
                        ));
                    }
                    "type" if v.as_str() == Some("object") => {}
                    k if ASSERTIONS.contains(&k) => {
                        return Err(error(
                            &child(&here, k),
                            format!("`allOf` is supported for object schemas only (`{k}` here)"),
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(JsonValue::Object(vec![
            ("type".to_owned(), JsonValue::String("object".into())),
            ("properties".to_owned(), JsonValue::Object(properties)),
            ("required".to_owned(), JsonValue::Array(required)),
        ]))
    }

    fn count(&self, schema: &JsonValue, key: &str, pointer: &str) -> Result<Option<u32>> {
        match schema.get(key) {
            None => Ok(None),
            Some(v) => {
                let n = v.as_u64().ok_or_else(|| {
                    error(
                        &child(pointer, key),
                        format!("`{key}` must be a whole number of at least 0"),
                    )
                })?;
                if n > u64::from(crate::grammar::MAX_REPETITION) {
                    return Err(error(
                        &child(pointer, key),
                        format!(
                            "`{key}` {n} is above the limit of {}",
                            crate::grammar::MAX_REPETITION
                        ),
                    ));
                }
                Ok(Some(n as u32))
            }
        }
    }

    fn object(&mut self, schema: &JsonValue, pointer: &str, hint: &str) -> Result<String> {
        self.primitive("space");
        let props_pointer = child(pointer, "properties");
        let props: &[(String, JsonValue)] = match schema.get("properties") {
            None => &[],
            Some(JsonValue::Object(entries)) => entries,
            Some(_) => return Err(error(&props_pointer, "`properties` must be an object")),
        };
        let req_pointer = child(pointer, "required");
        let required: Vec<&str> = match schema.get("required") {
            None => Vec::new(),
            Some(JsonValue::Array(list)) => list
                .iter()
                .map(|v| {
                    v.as_str()
                        .ok_or_else(|| error(&req_pointer, "`required` must be a list of strings"))
                })
                .collect::<Result<_>>()?,
            Some(_) => return Err(error(&req_pointer, "`required` must be a list of strings")),
        };
        // Properties in order; required names without a schema take any value.
        let mut entries: Vec<(String, Option<&JsonValue>, bool)> = props
            .iter()
            .map(|(k, v)| (k.clone(), Some(v), required.contains(&k.as_str())))
            .collect();
        for r in &required {
            if !entries.iter().any(|(k, _, _)| k == r) {
                entries.push(((*r).to_owned(), None, true));
            }
        }
        let mut kvs = Vec::with_capacity(entries.len());
        for (name, sub, _) in &entries {
            let value = match sub {
                Some(s) => {
                    self.visit(s, &child(&props_pointer, name), &format!("{hint}-{name}"))?
                }
                None => self.primitive("value"),
            };
            let key = JsonValue::String(name.clone()).to_json();
            kvs.push(self.w.rule(
                &format!("{hint}-{name}-kv"),
                format!("{} space \":\" space {value}", literal(&key)),
            ));
        }
        let extra = match schema.get("additionalProperties") {
            Some(JsonValue::Bool(false)) => None,
            None | Some(JsonValue::Bool(true)) => Some(self.primitive("value")),
            Some(s @ JsonValue::Object(_)) => Some(self.visit(
                s,
                &child(pointer, "additionalProperties"),
                &format!("{hint}-additional"),
            )?),
            Some(_) => {
                return Err(error(
                    &child(pointer, "additionalProperties"),
                    "`additionalProperties` must be a boolean or a schema",
                ));
            }
        };
        let extra_kv = match extra {
            Some(value) => {
                let names: Vec<&str> = entries.iter().map(|(k, _, _)| k.as_str()).collect();
                let key = self.key_not_in(&names, hint);
                Some(self.w.rule(
                    &format!("{hint}-extra-kv"),
                    format!("{key} \":\" space {value}"),
                ))
            }
            None => None,
        };
        // tail(i, first): what may follow once properties before i are settled.
        let mut memo: HashMap<(usize, bool), String> = HashMap::new();
        let n = entries.len();
        for i in (0..=n).rev() {
            for first in [true, false] {
                let comma = if first { "" } else { "\",\" space " };
                let body = if i == n {
                    match &extra_kv {
                        None => "\"\"".to_owned(),
                        Some(kv) if first => format!("( {kv} ( \",\" space {kv} )* )?"),
                        Some(kv) => format!("( \",\" space {kv} )*"),
                    }
                } else {
                    let next = &memo[&(i + 1, false)];
                    let take = format!("{comma}{} {next}", kvs[i]);
                    if entries[i].2 {
                        take
                    } else {
                        format!("{take} | {}", memo[&(i + 1, first)])
                    }
                };
                let name = self.w.rule(&format!("{hint}-tail"), body);
                memo.insert((i, first), name);
            }
        }
        let body = format!("\"{{\" space {} \"}}\" space", memo[&(0, true)]);
        Ok(self.w.rule(hint, body))
    }

    /// A JSON object key (a string and `space`) that is none of `names`.
    fn key_not_in(&mut self, names: &[&str], hint: &str) -> String {
        self.primitive("string");
        if names.is_empty() {
            return "string".to_owned();
        }
        // A trie of the names' JSON-escaped contents: at each node, a character that
        // leaves the trie frees the rest; closing the quote is allowed unless a name ends
        // here.
        let contents: Vec<String> = names
            .iter()
            .map(|n| {
                let j = JsonValue::String((*n).to_owned()).to_json();
                j[1..j.len() - 1].to_owned()
            })
            .collect();
        let free = self.w.rule("key-free", "char* \"\\\"\" space".to_owned());
        fn build(
            w: &mut GbnfWriter,
            prefix: &str,
            contents: &[String],
            free: &str,
            hint: &str,
        ) -> String {
            let mut next: Vec<char> = contents
                .iter()
                .filter_map(|c| c.strip_prefix(prefix).and_then(|r| r.chars().next()))
                .collect();
            next.sort_unstable();
            next.dedup();
            let mut alts = Vec::new();
            for c in &next {
                let deeper = format!("{prefix}{c}");
                let rule = build(w, &deeper, contents, free, hint);
                alts.push(format!("{} {rule}", literal(&c.to_string())));
            }
            // Any other character: out of the trie.
            let mut excluded: Vec<(u32, u32)> =
                next.iter().map(|&c| (c as u32, c as u32)).collect();
            excluded.extend([(0x22, 0x22), (0x5C, 0x5C), (0x00, 0x1F)]);
            alts.push(format!(
                "( {} | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex{{4}} ) ) {free}",
                crate::grammar::gbnf_writer::class(&excluded, true)
            ));
            if !contents.iter().any(|c| c == prefix) {
                alts.push("\"\\\"\" space".to_owned());
            }
            w.rule(&format!("{hint}-key"), alts.join(" | "))
        }
        let inner = build(&mut self.w, "", &contents, &free, hint);
        self.w
            .rule(&format!("{hint}-key"), format!("\"\\\"\" {inner}"))
    }

    fn array(&mut self, schema: &JsonValue, pointer: &str, hint: &str) -> Result<String> {
        self.primitive("space");
        let min = self.count(schema, "minItems", pointer)?.unwrap_or(0);
        let max = self.count(schema, "maxItems", pointer)?;
        if max.is_some_and(|m| m < min) {
            return Err(error(
                &child(pointer, "maxItems"),
                "`maxItems` is below `minItems`",
            ));
        }
        let prefix_pointer = child(pointer, "prefixItems");
        let prefix: Vec<String> = match schema.get("prefixItems") {
            None => Vec::new(),
            Some(JsonValue::Array(list)) => {
                let mut v = Vec::with_capacity(list.len());
                for (i, s) in list.iter().enumerate() {
                    v.push(self.visit(
                        s,
                        &child(&prefix_pointer, &i.to_string()),
                        &format!("{hint}-{i}"),
                    )?);
                }
                v
            }
            Some(_) => {
                return Err(error(
                    &prefix_pointer,
                    "`prefixItems` must be a list of schemas",
                ));
            }
        };
        let items_pointer = child(pointer, "items");
        let item: Option<String> = match schema.get("items") {
            None => Some(self.primitive("value")),
            Some(JsonValue::Bool(false)) => None,
            Some(JsonValue::Array(_)) => {
                return Err(error(
                    &items_pointer,
                    "`items` as a list (draft 4-7 tuples) is not supported: use `prefixItems`",
                ));
            }
            Some(s) => Some(self.visit(s, &items_pointer, &format!("{hint}-item"))?),
        };
        let k = prefix.len() as u32;
        let max = match (&item, max) {
            (None, Some(m)) => Some(m.min(k)),
            (None, None) => Some(k),
            (_, m) => m,
        };
        if max.is_some_and(|m| m < min) {
            return Err(error(
                pointer,
                "no array fits `minItems` with the items allowed",
            ));
        }
        // follow(i): the items after the first i, each after a comma.
        let mut follow: Vec<String> = vec![String::new(); k as usize + 2];
        for i in (1..=k.max(1)).rev() {
            let body = if max.is_some_and(|m| i >= m) {
                "\"\"".to_owned()
            } else if i >= k {
                match &item {
                    None => "\"\"".to_owned(),
                    Some(it) => {
                        let lo = min.saturating_sub(i);
                        match max {
                            None => format!("( \",\" space {it} ){{{lo},}}"),
                            Some(m) => format!("( \",\" space {it} ){{{lo},{}}}", m - i),
                        }
                    }
                }
            } else {
                let take = format!(
                    "\",\" space {} {}",
                    prefix[i as usize],
                    follow[i as usize + 1]
                );
                if i < min {
                    take
                } else {
                    format!("( {take} )?")
                }
            };
            follow[i as usize] = body;
        }
        let inner = if max == Some(0) {
            "\"\"".to_owned()
        } else {
            let first_item = match (prefix.first(), &item) {
                (Some(p), _) => p.clone(),
                (None, Some(it)) => it.clone(),
                (None, None) => "\"\"".to_owned(),
            };
            let first = format!("{first_item} {}", follow[1]);
            if min == 0 {
                format!("( {first} )?")
            } else {
                first
            }
        };
        Ok(self
            .w
            .rule(hint, format!("\"[\" space {inner} \"]\" space")))
    }

    fn string(&mut self, schema: &JsonValue, pointer: &str, hint: &str) -> Result<String> {
        self.primitive("space");
        let min = self.count(schema, "minLength", pointer)?;
        let max = self.count(schema, "maxLength", pointer)?;
        if let (Some(a), Some(b)) = (min, max)
            && b < a
        {
            return Err(error(
                &child(pointer, "maxLength"),
                "`maxLength` is below `minLength`",
            ));
        }
        if let Some(p) = schema.get("pattern") {
            let pp = child(pointer, "pattern");
            let p = p
                .as_str()
                .ok_or_else(|| error(&pp, "`pattern` must be a string"))?;
            if min.is_some() || max.is_some() {
                return Err(error(
                    &pp,
                    "`pattern` together with `minLength`/`maxLength` is not supported",
                ));
            }
            self.primitive("char");
            let expr = pattern_grammar(p).map_err(|e| error(&pp, e))?;
            return Ok(self.w.rule(hint, format!("\"\\\"\" {expr} \"\\\"\" space")));
        }
        let format = schema.get("format").and_then(JsonValue::as_str);
        if min.is_none() && max.is_none() {
            if let Some(name) = format.filter(|f| ["date", "time", "date-time", "uuid"].contains(f))
            {
                let rule = self.primitive(name);
                return Ok(self.w.rule(
                    &format!("{name}-string"),
                    format!("\"\\\"\" {rule} \"\\\"\" space"),
                ));
            }
            return Ok(self.primitive("string"));
        }
        self.primitive("char");
        let reps = match (min.unwrap_or(0), max) {
            (a, Some(b)) => format!("char{{{a},{b}}}"),
            (0, None) => "char*".to_owned(),
            (a, None) => format!("char{{{a},}}"),
        };
        Ok(self.w.rule(hint, format!("\"\\\"\" {reps} \"\\\"\" space")))
    }

    /// `minimum`/`maximum`/`exclusive*` as bounds (`exclusiveMinimum: true` is draft 4's
    /// form).
    fn bounds(
        &self,
        schema: &JsonValue,
        pointer: &str,
    ) -> Result<[Option<(f64, bool, String)>; 2]> {
        let num = |k: &str| -> Result<Option<f64>> {
            match schema.get(k) {
                None => Ok(None),
                Some(JsonValue::Bool(_)) if k.starts_with("exclusive") => Ok(None),
                Some(v) => v
                    .as_f64()
                    .map(Some)
                    .ok_or_else(|| error(&child(pointer, k), format!("`{k}` must be a number"))),
            }
        };
        let draft4 = |k: &str| schema.get(k).and_then(JsonValue::as_bool) == Some(true);
        let lo = match (num("minimum")?, num("exclusiveMinimum")?) {
            (_, Some(x)) => Some((x, true, child(pointer, "exclusiveMinimum"))),
            (Some(x), None) => Some((x, draft4("exclusiveMinimum"), child(pointer, "minimum"))),
            (None, None) => None,
        };
        let hi = match (num("maximum")?, num("exclusiveMaximum")?) {
            (_, Some(x)) => Some((x, true, child(pointer, "exclusiveMaximum"))),
            (Some(x), None) => Some((x, draft4("exclusiveMaximum"), child(pointer, "maximum"))),
            (None, None) => None,
        };
        Ok([lo, hi])
    }

    fn integer(&mut self, schema: &JsonValue, pointer: &str, hint: &str) -> Result<String> {
        let [lo, hi] = self.bounds(schema, pointer)?;
        if lo.is_none() && hi.is_none() {
            return Ok(self.primitive("integer"));
        }
        self.primitive("space");
        let limit = 9.0e15;
        let lo_i = lo.map(|(x, ex, _)| {
            let c = x.ceil();
            (if ex && c == x { c + 1.0 } else { c }).clamp(-limit, limit) as i64
        });
        let hi_i = hi.map(|(x, ex, _)| {
            let f = x.floor();
            (if ex && f == x { f - 1.0 } else { f }).clamp(-limit, limit) as i64
        });
        let expr = int_range(lo_i, hi_i)
            .ok_or_else(|| error(pointer, "no integer lies between `minimum` and `maximum`"))?;
        Ok(self.w.rule(hint, format!("{expr} space")))
    }

    fn number(&mut self, schema: &JsonValue, pointer: &str, hint: &str) -> Result<String> {
        let [lo, hi] = self.bounds(schema, pointer)?;
        if lo.is_none() && hi.is_none() {
            return Ok(self.primitive("number"));
        }
        self.primitive("space");
        let whole = |b: Option<(f64, bool, String)>| -> Result<Option<Bound>> {
            match b {
                None => Ok(None),
                Some((x, exclusive, p)) => {
                    if x.fract() != 0.0 || x.abs() > 9.0e15 {
                        return Err(error(
                            &p,
                            format!(
                                "bounds on a `number` must be whole numbers of at most 16 digits (got {x})"
                            ),
                        ));
                    }
                    Ok(Some(Bound {
                        value: x as i64,
                        exclusive,
                    }))
                }
            }
        };
        let expr = number_range(whole(lo)?, whole(hi)?)
            .ok_or_else(|| error(pointer, "no number lies between `minimum` and `maximum`"))?;
        Ok(self.w.rule(hint, format!("{expr} space")))
    }
}

/// `%XX` escapes of a JSON Pointer in a URI fragment, decoded.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::grammar::test_vocab::random_walk;
    use crate::grammar::{GrammarConstraint, TokenTrie};
    use crate::testing::SyntheticVocab;
    use crate::tokenizer::Vocabulary;

    /// An independent validator of the subset (JSON Schema semantics, regexes by
    /// `fancy_regex`).
    fn valid(schema: &JsonValue, v: &serde_json::Value, root: &JsonValue) -> bool {
        use serde_json::Value as V;
        let s = match schema {
            JsonValue::Bool(b) => return *b,
            s => s,
        };
        if let Some(r) = s.get("$ref").and_then(JsonValue::as_str) {
            let mut at = root;
            for seg in r.trim_start_matches('#').split('/').skip(1) {
                at = at.get(seg).expect("ref");
            }
            return valid(at, v, root);
        }
        let to_serde = |j: &JsonValue| serde_json::from_str::<V>(&j.to_json()).expect("json");
        if let Some(c) = s.get("const")
            && to_serde(c) != *v
        {
            return false;
        }
        if let Some(e) = s.get("enum").and_then(JsonValue::as_array)
            && !e.iter().any(|x| to_serde(x) == *v)
        {
            return false;
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = s.get(key).and_then(JsonValue::as_array)
                && !list.iter().any(|x| valid(x, v, root))
            {
                return false;
            }
        }
        if let Some(list) = s.get("allOf").and_then(JsonValue::as_array)
            && !list.iter().all(|x| valid(x, v, root))
        {
            return false;
        }
        if let Some(t) = s.get("type") {
            let names: Vec<&str> = match t {
                JsonValue::String(t) => vec![t.as_str()],
                JsonValue::Array(ts) => ts.iter().filter_map(JsonValue::as_str).collect(),
                _ => vec![],
            };
            let ok = names.iter().any(|t| match *t {
                "object" => v.is_object(),
                "array" => v.is_array(),
                "string" => v.is_string(),
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                "null" => v.is_null(),
                _ => false,
            });
            if !ok {
                return false;
            }
        }
        match v {
            V::Object(map) => {
                let props = s
                    .get("properties")
                    .and_then(JsonValue::as_object)
                    .unwrap_or(&[]);
                for r in s
                    .get("required")
                    .and_then(JsonValue::as_array)
                    .unwrap_or(&[])
                {
                    if !map.contains_key(r.as_str().unwrap_or("")) {
                        return false;
                    }
                }
                for (k, x) in map {
                    match props.iter().find(|(n, _)| n == k) {
                        Some((_, sub)) => {
                            if !valid(sub, x, root) {
                                return false;
                            }
                        }
                        None => match s.get("additionalProperties") {
                            Some(JsonValue::Bool(false)) => return false,
                            Some(sub @ JsonValue::Object(_)) if !valid(sub, x, root) => {
                                return false;
                            }
                            _ => {}
                        },
                    }
                }
            }
            V::Array(items) => {
                let n = items.len() as u64;
                if s.get("minItems")
                    .and_then(JsonValue::as_u64)
                    .is_some_and(|m| n < m)
                    || s.get("maxItems")
                        .and_then(JsonValue::as_u64)
                        .is_some_and(|m| n > m)
                {
                    return false;
                }
                let prefix = s
                    .get("prefixItems")
                    .and_then(JsonValue::as_array)
                    .unwrap_or(&[]);
                for (i, x) in items.iter().enumerate() {
                    let sub = prefix.get(i).or_else(|| s.get("items"));
                    if let Some(sub) = sub
                        && !valid(sub, x, root)
                    {
                        return false;
                    }
                }
            }
            V::String(text) => {
                let n = text.chars().count() as u64;
                if s.get("minLength")
                    .and_then(JsonValue::as_u64)
                    .is_some_and(|m| n < m)
                    || s.get("maxLength")
                        .and_then(JsonValue::as_u64)
                        .is_some_and(|m| n > m)
                {
                    return false;
                }
                if let Some(p) = s.get("pattern").and_then(JsonValue::as_str) {
                    let re = fancy_regex::Regex::new(p).expect("regex");
                    if !re.is_match(text).expect("match") {
                        return false;
                    }
                }
                match s.get("format").and_then(JsonValue::as_str) {
                    Some("uuid") => {
                        let parts: Vec<usize> = text.split('-').map(str::len).collect();
                        if parts != [8, 4, 4, 4, 12] {
                            return false;
                        }
                    }
                    Some("date") => {
                        let p: Vec<u32> = text.split('-').filter_map(|x| x.parse().ok()).collect();
                        let days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
                        if p.len() != 3
                            || !(1..=12).contains(&p[1])
                            || p[2] < 1
                            || p[2] > days[p[1] as usize - 1]
                        {
                            return false;
                        }
                    }
                    _ => {}
                }
            }
            V::Number(num) => {
                let x = num.as_f64().unwrap_or(f64::NAN);
                let get = |k| s.get(k).and_then(JsonValue::as_f64);
                if get("minimum").is_some_and(|m| x < m)
                    || get("maximum").is_some_and(|m| x > m)
                    || get("exclusiveMinimum").is_some_and(|m| x <= m)
                    || get("exclusiveMaximum").is_some_and(|m| x >= m)
                {
                    return false;
                }
            }
            _ => {}
        }
        true
    }

    const SCHEMAS: &[&str] = &[
        r##"{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}}, "required": ["name", "age", "tags"], "additionalProperties": false}"##,
        r##"{"$defs": {"Pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog", 3, null]}, "owner": {"anyOf": [{"$ref": "#/$defs/Person"}, {"type": "null"}]}}, "required": ["kind", "owner"], "additionalProperties": false}, "Person": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "born": {"type": "string", "format": "date"}}, "required": ["id"], "additionalProperties": false}}, "$ref": "#/$defs/Pet"}"##,
        r##"{"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}, "b": {"type": "boolean"}, "c": {"const": {"x": [1, "two"]}}}, "required": ["b"]}"##,
        r##"{"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string", "pattern": "^[A-Z]{2}-\\d{2,3}$"}], "items": false, "minItems": 1}"##,
        r##"{"type": ["string", "null", "integer"], "minLength": 2, "maxLength": 4, "maximum": -3}"##,
        r##"{"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}}, "additionalProperties": {"type": "integer"}}"##,
        r##"{"type": "array", "items": {"type": "array", "items": {"type": "integer", "exclusiveMaximum": 100, "exclusiveMinimum": -100}, "minItems": 2, "maxItems": 2}, "minItems": 1}"##,
        r##"{"allOf": [{"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}, {"properties": {"q": {"type": "null"}}, "required": ["q"]}]}"##,
    ];

    fn vocab() -> Vocabulary {
        let mut md = crate::gguf::Metadata::new();
        SyntheticVocab::new(1500)
            .expect("vocab")
            .write_metadata(&mut md);
        Vocabulary::from_gguf(&md).expect("vocab")
    }

    #[test]
    fn every_output_parses_and_validates() {
        let vocab = vocab();
        let trie = Arc::new(TokenTrie::new(&vocab, &[]));
        for (si, text) in SCHEMAS.iter().enumerate() {
            let schema = JsonValue::parse(text).expect("schema");
            let grammar =
                Grammar::from_json_schema(&schema).unwrap_or_else(|e| panic!("schema {si}: {e}"));
            for seed in 0..12u64 {
                let mut c =
                    GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("constraint");
                let min = c.min_tokens().expect("finishable");
                let budget = min + (seed as usize * 7) % 60;
                let out = random_walk(&mut c, &vocab, seed * 31 + si as u64, budget);
                let text = String::from_utf8(out).expect("utf-8");
                let value: serde_json::Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("schema {si} seed {seed}: {e}: {text:?}"));
                assert!(
                    valid(&schema, &value, &schema),
                    "schema {si} seed {seed}: {text}"
                );
            }
        }
    }

    #[test]
    fn json_object_mode_gives_objects() {
        let vocab = vocab();
        let trie = Arc::new(TokenTrie::new(&vocab, &[]));
        let grammar = Grammar::json_object();
        for seed in 0..8 {
            let mut c = GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("constraint");
            let out = random_walk(&mut c, &vocab, seed, 40);
            let value: serde_json::Value = serde_json::from_slice(&out).expect("json");
            assert!(value.is_object(), "{value}");
        }
    }

    #[test]
    fn unsupported_and_malformed_schemas_name_the_pointer() {
        for (schema, pointer, needle) in [
            (
                r##"{"type": "integer", "multipleOf": 2}"##,
                "#/multipleOf",
                "not supported",
            ),
            (
                r##"{"properties": {"s": {"type": "array", "uniqueItems": true}}}"##,
                "#/properties/s/uniqueItems",
                "not supported",
            ),
            (
                r##"{"properties": {"a~b/c": {"not": {}}}}"##,
                "#/properties/a~0b~1c/not",
                "not supported",
            ),
            (r##"{"type": "strin"}"##, "#/type", "unknown type"),
            (r##"{"type": 3}"##, "#/type", "type name"),
            (r##"{"required": "a"}"##, "#/required", "list of strings"),
            (r##"{"enum": []}"##, "#/enum", "at least one"),
            (
                r##"{"$ref": "#/$defs/Missing"}"##,
                "#/$ref",
                "points to nothing",
            ),
            (
                r##"{"$ref": "other.json#/x"}"##,
                "#/$ref",
                "within the schema",
            ),
            (
                r##"{"type": "string", "pattern": "(?=x)"}"##,
                "#/pattern",
                "not supported",
            ),
            (
                r##"{"type": "number", "maximum": 1.5}"##,
                "#/maximum",
                "whole numbers",
            ),
            (
                r##"{"type": "integer", "minimum": 5, "maximum": 4}"##,
                "#",
                "no integer",
            ),
            (
                r##"{"type": "array", "minItems": 3, "maxItems": 2}"##,
                "#/maxItems",
                "below",
            ),
            (
                r##"{"anyOf": [{"type": "string"}], "type": "string"}"##,
                "#/type",
                "beside",
            ),
            (r##"false"##, "#", "accepts no value"),
            (
                r##"{"allOf": [{"properties": {"a": {}}}], "additionalProperties": false}"##,
                "#/additionalProperties",
                "allOf",
            ),
            (
                r##"{"properties": {"n": 4}}"##,
                "#/properties/n",
                "object or a boolean",
            ),
        ] {
            let schema = JsonValue::parse(schema).expect("json");
            match Grammar::from_json_schema(&schema) {
                Err(LlmError::JsonSchema { pointer: p, what }) => {
                    assert_eq!(p, pointer, "{schema}: {what}");
                    assert!(what.contains(needle), "{schema}: {what}");
                }
                other => panic!("{schema}: {other:?}"),
            }
        }
    }

    #[test]
    fn recursive_schemas_work() {
        let schema = JsonValue::parse(
            r##"{"$defs": {"Node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 2}}, "required": ["v", "kids"], "additionalProperties": false}}, "$ref": "#/$defs/Node"}"##,
        )
        .expect("json");
        let vocab = vocab();
        let trie = Arc::new(TokenTrie::new(&vocab, &[]));
        let grammar = Grammar::from_json_schema(&schema).expect("grammar");
        for seed in 0..6 {
            let mut c = GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("constraint");
            let out = random_walk(&mut c, &vocab, seed, 80);
            let value: serde_json::Value = serde_json::from_slice(&out).expect("json");
            assert!(valid(&schema, &value, &schema), "{value}");
        }
    }
}

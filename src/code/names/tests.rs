//! Names, the prelude (evaluated by the real interpreter against a stub `call`) and
//! signatures.

use super::*;
use crate::builtins::scripts::sandbox::dialect;
use serde_json::json;
use starlark::environment::{FrozenModule, GlobalsBuilder, Module};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::syntax::AstModule;
use starlark::values::Value;

#[test]
fn attributes_of_odd_names() {
    for (raw, want) in [
        ("fs", "fs"),
        ("read_text_file", "read_text_file"),
        ("read-text.file", "read_text_file"),
        ("9lives", "_9lives"),
        ("", "_"),
        ("café", "caf_"),
        ("a b/c", "a_b_c"),
        ("if", "if_"),
        ("from", "from_"),
        ("load", "load_"),
        ("lambda", "lambda_"),
        ("None", "None_"),
        ("True", "True_"),
        ("yield", "yield_"),
        ("if_", "if_"),
        ("iffy", "iffy"),
    ] {
        assert_eq!(attribute(raw), want, "{raw:?}");
    }
}

#[test]
fn attributes_only_avoid_keywords() {
    assert_eq!(attribute("print"), "print");
    assert_eq!(attribute("call"), "call");
    assert_eq!(attribute("struct"), "struct");
    assert_eq!(attribute("if"), "if_");
    assert_eq!(attribute("None"), "None_");
    assert_eq!(attribute("my-server"), "my_server");
    assert_eq!(attribute("1st"), "_1st");
}

fn names(tools: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    program_tools(tools)
        .into_iter()
        .map(|t| (t.name, t.group, t.attr))
        .collect()
}

fn triple(name: &str, group: &str, attr: &str) -> (String, String, String) {
    (name.into(), group.into(), attr.into())
}

#[test]
fn program_tools_keep_order_and_make_names() {
    let got = names(&[
        ("fs:read_text_file", "fs", "read_text_file"),
        ("git:log", "git", "log"),
        ("fs:list-dir", "fs", "list-dir"),
        ("web_fetch", "openpact", "web_fetch"),
        ("q:if", "q", "if"),
        ("my.srv:2fa", "my.srv", "2fa"),
    ]);
    assert_eq!(
        got,
        vec![
            triple("fs:read_text_file", "fs", "read_text_file"),
            triple("git:log", "git", "log"),
            triple("fs:list-dir", "fs", "list_dir"),
            triple("web_fetch", "openpact", "web_fetch"),
            triple("q:if", "q", "if_"),
            triple("my.srv:2fa", "my_srv", "_2fa"),
        ]
    );
    assert!(program_tools(&[]).is_empty());
}

#[test]
fn collisions_in_a_group_number_the_later_ones() {
    let got = names(&[
        ("s:read-file", "s", "read-file"),
        ("s:read.file", "s", "read.file"),
        ("s:read_file", "s", "read_file"),
        ("s:a.b", "s", "a.b"),
        ("s:a-b", "s", "a-b"),
        ("s:a_b_2", "s", "a_b_2"),
        ("s:if", "s", "if"),
        ("s:if_", "s", "if_"),
    ]);
    let attrs: Vec<&str> = got.iter().map(|t| t.2.as_str()).collect();
    // A name needing no change keeps it (`read_file`, `a_b_2`, `if_`); the others take the
    // next free number in input order.
    assert_eq!(
        attrs,
        [
            "read_file_2",
            "read_file_3",
            "read_file",
            "a_b",
            "a_b_3",
            "a_b_2",
            "if__2",
            "if_"
        ]
    );
    let distinct: HashSet<&str> = attrs.iter().copied().collect();
    assert_eq!(distinct.len(), attrs.len());
}

#[test]
fn colliding_prefixes_get_distinct_groups() {
    let got = names(&[
        ("my-fs:read", "my-fs", "read"),
        ("my.fs:read", "my.fs", "read"),
        ("my_fs:read", "my_fs", "read"),
        ("my-fs:write", "my-fs", "write"),
    ]);
    assert_eq!(
        got,
        vec![
            triple("my-fs:read", "my_fs_2", "read"),
            triple("my.fs:read", "my_fs_3", "read"),
            triple("my_fs:read", "my_fs", "read"),
            triple("my-fs:write", "my_fs_2", "write"),
        ]
    );
}

#[test]
fn a_tool_is_named_by_its_own_group_alone() {
    let fs = [
        ("fs:read-file", "fs", "read-file"),
        ("fs:read_file", "fs", "read_file"),
        ("fs:write", "fs", "write"),
    ];
    let alone = names(&fs);
    let mut mixed = vec![
        ("git:read-file", "git", "read-file"),
        ("web:read_file", "web", "read_file"),
    ];
    mixed.insert(1, fs[0]);
    mixed.push(fs[1]);
    mixed.insert(0, fs[2]);
    let with_others = names(&mixed);
    for t in &alone {
        assert!(with_others.contains(t), "{t:?} in {with_others:?}");
    }
    // And the same catalogue always gives the same names.
    assert_eq!(names(&mixed), with_others);
}

/// The worker's `call`, stubbed: what it was asked, as text.
#[starlark_module]
fn stub_call(builder: &mut GlobalsBuilder) {
    fn call<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(require = pos)] args: Value<'v>,
    ) -> anyhow::Result<String> {
        Ok(format!("{name} {}", args.to_json()?))
    }
}

fn globals() -> starlark::environment::Globals {
    GlobalsBuilder::extended_by(crate::builtins::scripts::sandbox::EXTENSIONS)
        .with(stub_call)
        .build()
}

/// Evaluates the prelude then `program` as one file, as a worker may; `result` as JSON.
fn run(prelude: &str, program: &str) -> Result<Json, String> {
    let source = format!("{prelude}\n{program}\n");
    let ast = AstModule::parse("program.star", source, &dialect()).map_err(|e| e.to_string())?;
    let globals = globals();
    Module::with_temp_heap(|module| {
        let mut eval = Evaluator::new(&module);
        eval.eval_module(ast, &globals).map_err(|e| e.to_string())?;
        let result = module.get("result").ok_or("no result")?;
        result.to_json_value().map_err(|e| e.to_string())
    })
}

/// Evaluates the prelude as its own module, frozen, and `program` in a module that imports
/// its public names, as a worker keeping one prelude for many programs may.
fn run_imported(prelude: &str, program: &str) -> Result<Json, String> {
    let globals = globals();
    let parse = |src: &str| {
        AstModule::parse("p.star", src.to_string(), &dialect()).map_err(|e| e.to_string())
    };
    let frozen: FrozenModule = Module::with_temp_heap(|module| {
        let mut eval = Evaluator::new(&module);
        eval.eval_module(parse(prelude)?, &globals)
            .map_err(|e| e.to_string())?;
        drop(eval);
        module.freeze().map_err(|e| format!("{e:?}"))
    })?;
    Module::with_temp_heap(|module| {
        module.import_public_symbols(&frozen);
        let mut eval = Evaluator::new(&module);
        eval.eval_module(parse(program)?, &globals)
            .map_err(|e| e.to_string())?;
        let result = module.get("result").ok_or("no result")?;
        result.to_json_value().map_err(|e| e.to_string())
    })
}

fn tricky() -> Vec<ProgramTool> {
    program_tools(&[
        ("fs:read_text_file", "fs", "read_text_file"),
        ("fs:list-dir", "fs", "list-dir"),
        ("fs:list_dir", "fs", "list_dir"),
        ("a.b:if", "a.b", "if"),
        ("a-b:print", "a-b", "print"),
        ("9x:2go", "9x", "2go"),
        ("web_fetch", "openpact", "web_fetch"),
        ("q\"uote:x\\y", "q\"uote", "x\\y"),
        ("for:None", "for", "None"),
    ])
}

#[test]
fn prelude_attribute_calls_reach_call() {
    let tools = tricky();
    let attrs: Vec<String> = tools
        .iter()
        .map(|t| format!("{}.{}", t.group, t.attr))
        .collect();
    assert_eq!(
        attrs,
        [
            "fs.read_text_file",
            "fs.list_dir_2",
            "fs.list_dir",
            "a_b.if_",
            "a_b_2.print",
            "_9x._2go",
            "openpact.web_fetch",
            "q_uote.x_y",
            "for_.None_",
        ]
    );
    let program = r#"
result = [
    tools.fs.read_text_file(path = "x", head = 3),
    tools.fs.list_dir_2(path = "/"),
    tools.fs.list_dir(),
    tools.a_b.if_(a = 1),
    tools.a_b_2.print(text = "hi", n = None),
    tools._9x._2go(items = [1, 2], deep = {"k": [True, None]}),
    tools.openpact.web_fetch(url = "https://example.com"),
    tools.q_uote.x_y(z = 1.5),
    tools.for_.None_({"repo-path": ".", "from": "a"}),
    sorted(dir(tools)),
]
"#;
    let want = json!([
        "fs:read_text_file {\"path\":\"x\",\"head\":3}",
        "fs:list-dir {\"path\":\"/\"}",
        "fs:list_dir {}",
        "a.b:if {\"a\":1}",
        // An argument given as None is left out.
        "a-b:print {\"text\":\"hi\"}",
        "9x:2go {\"items\":[1,2],\"deep\":{\"k\":[true,null]}}",
        "web_fetch {\"url\":\"https://example.com\"}",
        "q\"uote:x\\y {\"z\":1.5}",
        "for:None {\"repo-path\":\".\",\"from\":\"a\"}",
        ["_9x", "a_b", "a_b_2", "for_", "fs", "openpact", "q_uote"],
    ]);
    let prelude = prelude(&tools);
    assert_eq!(run(&prelude, program), Ok(want.clone()));
    assert_eq!(run_imported(&prelude, program), Ok(want));
}

#[test]
fn prelude_hides_its_helper_and_reports_misuse() {
    let tools = tricky();
    let prelude = prelude(&tools);
    // Imported, the helper is not visible to the program.
    let err = run_imported(&prelude, "result = _tool").unwrap_err();
    assert!(err.contains("_tool"), "{err}");
    let err = run(&prelude, "result = tools.fs.list_dir(\"/\")").unwrap_err();
    assert!(
        err.contains("tools.fs.list_dir takes keyword arguments (or one dict of them)"),
        "{err}"
    );
    let err = run(&prelude, "result = tools.fs.list_dir({}, path = 1)").unwrap_err();
    assert!(err.contains("takes keyword arguments"), "{err}");
    let err = run(&prelude, "result = tools.fs.nope()").unwrap_err();
    assert!(err.contains("nope"), "{err}");
    // A program cannot replace a tool.
    let err = run_imported(&prelude, "tools.fs.list_dir = None\nresult = 1").unwrap_err();
    assert!(!err.is_empty());
}

#[test]
fn prelude_without_tools() {
    let prelude = prelude(&[]);
    assert!(prelude.contains("tools = struct()\n"), "{prelude}");
    assert_eq!(run(&prelude, "result = dir(tools)"), Ok(json!([])));
    assert_eq!(run_imported(&prelude, "result = dir(tools)"), Ok(json!([])));
}

#[test]
fn prelude_is_deterministic_and_scales() {
    let tools = tricky();
    assert_eq!(prelude(&tools), prelude(&tools.clone()));
    let raw: Vec<(String, String, String)> = (0..3000)
        .map(|i| {
            let server = format!("srv-{}", i % 30);
            let tool = format!("tool.{}", i / 30);
            (format!("{server}:{tool}"), server, tool)
        })
        .collect();
    let refs: Vec<(&str, &str, &str)> = raw
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    let many = program_tools(&refs);
    assert_eq!(many.len(), 3000);
    let prelude = prelude(&many);
    assert_eq!(
        run(
            &prelude,
            "result = [len(dir(tools)), tools.srv_29.tool_99(n = 1)]"
        ),
        Ok(json!([30, "srv-29:tool.99 {\"n\":1}"]))
    );
}

/// Keyword arguments named like the helper's own parameters still reach `call`.
#[test]
fn prelude_passes_any_argument_name() {
    let tools = program_tools(&[("s:t", "s", "t")]);
    let program = "result = tools.s.t(args = 1, kwargs = 2, name = 3, attr = 4, k = 5, v = 6)";
    assert_eq!(
        run(&prelude(&tools), program),
        Ok(json!(
            "s:t {\"args\":1,\"kwargs\":2,\"name\":3,\"attr\":4,\"k\":5,\"v\":6}"
        ))
    );
}

fn fs_tool() -> ProgramTool {
    ProgramTool {
        name: "fs:read_text_file".into(),
        group: "fs".into(),
        attr: "read_text_file".into(),
    }
}

fn read_text_file_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "tail": {"type": "number", "description": "If provided, returns only the last N lines of the file"},
            "head": {"type": "number", "description": "If provided, returns only the first N lines of the file"}
        },
        "required": ["path"],
        "additionalProperties": false,
        "$schema": "http://json-schema.org/draft-07/schema#"
    })
}

#[test]
fn signature_of_a_filesystem_tool() {
    let got = signature(
        &fs_tool(),
        "Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. Use this tool when you need to examine the contents of a single file. Use the 'head' parameter to read only the first N lines of a file, or the 'tail' parameter to read only the last N lines of a file. Operates on the file as text regardless of extension. Only works within allowed directories.",
        &read_text_file_schema(),
        None,
    );
    let want = "\
tools.fs.read_text_file(path: str, tail: float = None, head: float = None)
  Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. …
  or: call(\"fs:read_text_file\", {\"path\": ...})
  path (str, required)
  tail (float, optional): If provided, returns only the last N lines of the file
  head (float, optional): If provided, returns only the first N lines of the file
  returns: the result's text (parsed as JSON when it is JSON)
";
    assert_eq!(got, want);
    let short = signature(
        &fs_tool(),
        "  Read\n a file. ",
        &read_text_file_schema(),
        None,
    );
    assert_eq!(short.lines().nth(1), Some("  Read a file."));
    assert_eq!(
        signature(&fs_tool(), "", &read_text_file_schema(), None)
            .lines()
            .count(),
        6
    );
}

/// The pinned filesystem server's `edit_file` (its `tools/list` entry as served).
#[test]
fn signature_of_nested_parameters() {
    let input = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "edits": {"type": "array", "items": {"type": "object", "properties": {
                "oldText": {"type": "string", "description": "Text to search for - must match exactly"},
                "newText": {"type": "string", "description": "Text to replace with"}
            }, "required": ["oldText", "newText"]}},
            "dryRun": {"default": false, "description": "Preview changes using git-style diff format", "type": "boolean"}
        },
        "required": ["path", "edits"]
    });
    let output = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
        "additionalProperties": false
    });
    let tool = ProgramTool {
        name: "fs:edit_file".into(),
        group: "fs".into(),
        attr: "edit_file".into(),
    };
    let got = signature(
        &tool,
        "Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.",
        &input,
        Some(&output),
    );
    let want = "\
tools.fs.edit_file(path: str, edits: list[dict], dryRun: bool = False) -> dict
  Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.
  or: call(\"fs:edit_file\", {\"path\": ..., \"edits\": ...})
  path (str, required)
  edits (list[{oldText: str, newText: str}], required)
  dryRun (bool, default False): Preview changes using git-style diff format
  returns: {content: str}
";
    assert_eq!(got, want);
}

#[test]
fn signature_with_an_output_schema_and_defaults() {
    let input = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "  What to find,\n  in plain words  "},
            "limit": {"type": "integer", "default": 10, "minimum": 1},
            "order": {"enum": ["asc", "desc"], "default": "asc"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "exact": {"type": "boolean", "default": false},
            "since": {"type": ["string", "null"]},
            "filter": {
                "type": "object",
                "properties": {"owner": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}}},
                "required": ["owner"]
            }
        },
        "required": ["query"]
    });
    let output = json!({
        "type": "object",
        "properties": {
            "hits": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
            "total": {"type": "integer"},
            "next": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        },
        "required": ["hits", "total"]
    });
    let tool = ProgramTool {
        name: "tracker:search_issues".into(),
        group: "tracker".into(),
        attr: "search_issues".into(),
    };
    let got = signature(&tool, "Search issues.", &input, Some(&output));
    let want = "\
tools.tracker.search_issues(query: str, limit: int = 10, order: \"asc\" | \"desc\" = \"asc\", tags: list[str] = None, exact: bool = False, since: str | None = None, filter: dict = None) -> dict
  Search issues.
  or: call(\"tracker:search_issues\", {\"query\": ...})
  query (str, required): What to find, in plain words
  limit (int, default 10)
  order (\"asc\" | \"desc\", default \"asc\")
  tags (list[str], optional)
  exact (bool, default False)
  since (str | None, optional)
  filter ({owner: str, labels?: list[str]}, optional)
  returns: {hits: list[dict], total: int, next?: str | None}
";
    assert_eq!(got, want);
}

#[test]
fn signature_of_unusual_schemas() {
    let t = ProgramTool {
        name: "x:y".into(),
        group: "x".into(),
        attr: "y".into(),
    };
    // No properties at all, an empty schema, or not even an object.
    for schema in [
        json!({"type": "object"}),
        json!({}),
        json!(null),
        json!(true),
    ] {
        assert_eq!(
            signature(&t, "", &schema, None),
            "tools.x.y()\n  or: call(\"x:y\", {})\n  returns: the result's text (parsed as JSON when it is JSON)\n",
            "{schema}"
        );
    }
    // A required name without a property, references, unions, nested arrays.
    let schema = json!({
        "type": "object",
        "$defs": {
            "Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "description": "A point"},
            "Loop": {"$ref": "#/$defs/Loop"}
        },
        "properties": {
            "at": {"$ref": "#/$defs/Point"},
            "loop": {"$ref": "#/$defs/Loop"},
            "remote": {"$ref": "https://example.com/s.json"},
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "id": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "wild": {"anyOf": [{"type": "string"}, {}]},
            "many": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "array"}, {"type": "object"}]},
            "both": {"allOf": [{"type": "object"}, {"required": ["a"]}]},
            "one": {"allOf": [{"type": "integer"}]},
            "kind": {"const": "file"},
            "mode": {"type": "string", "enum": ["read", "write", "append", "truncate", "create", "exclusive", "sync"]},
            "list": {"type": "array"},
            "anything": {}
        },
        "required": ["name", "at", "name"]
    });
    let got = signature(&t, "", &schema, None);
    let want = "\
tools.x.y(name: any, at: dict, loop: any = None, remote: any = None, grid: list[list[int]] = None, id: str | int = None, wild: any = None, many: any = None, both: any = None, one: int = None, ...)
  or: call(\"x:y\", {\"name\": ..., \"at\": ...})
  name (any, required)
  at ({x?: float, y?: float}, required): A point
  loop (any, optional)
  remote (any, optional)
  grid (list[list[int]], optional)
  id (str | int, optional)
  wild (any, optional)
  many (any, optional)
  both (any, optional)
  one (int, optional)
  kind (\"file\", optional)
  mode (str, optional): one of \"read\", \"write\", \"append\", \"truncate\", \"create\", \"exclusive\", \"sync\"
  list (list, optional)
  anything (any, optional)
  returns: the result's text (parsed as JSON when it is JSON)
";
    assert_eq!(got, want);
}

#[test]
fn signature_with_names_that_are_not_starlark_names() {
    let t = ProgramTool {
        name: "git:git_log".into(),
        group: "git".into(),
        attr: "git_log".into(),
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "repo-path": {"type": "string", "description": "The repository"},
            "from": {"type": "string"},
            "max_count": {"type": "integer"}
        },
        "required": ["repo-path"]
    });
    let got = signature(&t, "Commit log.", &schema, None);
    let want = "\
call(\"git:git_log\", {\"repo-path\": str, \"from\"?: str, \"max_count\"?: int})
  Commit log.
  (arguments go in a dict: \"repo-path\" is not a Starlark name)
  repo-path (str, required): The repository
  from (str, optional)
  max_count (int, optional)
  returns: the result's text (parsed as JSON when it is JSON)
";
    assert_eq!(got, want);
    // A keyword alone is enough.
    let schema = json!({"type": "object", "properties": {"from": {"type": "string"}}});
    assert!(
        signature(&t, "", &schema, None).starts_with("call(\"git:git_log\", {\"from\"?: str})\n")
    );
}

#[test]
fn huge_schemas_are_trimmed() {
    let mut props = serde_json::Map::new();
    for i in 0..200 {
        props.insert(
            format!("option_{i}"),
            json!({"type": "string", "description": "word ".repeat(200)}),
        );
    }
    let schema =
        json!({"type": "object", "properties": props, "required": ["option_7", "option_3"]});
    let got = signature(&fs_tool(), &"long ".repeat(1000), &schema, None);
    let lines: Vec<&str> = got.lines().collect();
    // The first line, the description, the hint, 24 parameters, the rest named, returns.
    assert_eq!(lines.len(), 1 + 1 + 1 + MAX_PARAMS + 1 + 1, "{got}");
    assert!(
        lines[0].starts_with(
            "tools.fs.read_text_file(option_7: str, option_3: str, option_0: str = None"
        ),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(", ...)"), "{}", lines[0]);
    assert!(lines[0].chars().count() < HEADER_CAP + 80, "{}", lines[0]);
    // Without a sentence's end to cut at, the description is cut at the cap.
    assert_eq!(lines[1].chars().count(), 2 + DESCRIPTION_CAP);
    assert!(lines[1].ends_with('…'));
    assert!(lines[3].starts_with("  option_7 (str, required): word word"));
    assert!(lines[3].chars().count() <= 2 + "option_7 (str, required): ".len() + PARAM_CAP);
    assert!(lines[5].starts_with("  option_0 (str, optional)"));
    assert!(
        lines[27].starts_with("  176 more: option_24, option_25, "),
        "{}",
        lines[27]
    );
    assert!(got.len() < 7000, "{}", got.len());
    // A big nested object stops listing its properties.
    let schema =
        json!({"type": "object", "properties": {"o": {"type": "object", "properties": props}}});
    let got = signature(
        &fs_tool(),
        "",
        &schema,
        Some(&json!({"type": "object", "properties": props})),
    );
    for line in got.lines() {
        assert!(line.chars().count() < SHAPE_CAP + 40, "{line}");
    }
    assert!(
        got.contains("  o ({option_0?: str, option_1?: str, "),
        "{got}"
    );
    assert!(got.contains(", ...}, optional)\n"), "{got}");
    assert!(got.contains("  returns: {option_0?: str, "), "{got}");
}

#[test]
fn signatures_are_valid_calls() {
    // What the first line shows, filled in, is a program the prelude accepts.
    let tools = program_tools(&[("fs:read_text_file", "fs", "read_text_file")]);
    let program = "result = tools.fs.read_text_file(path = \"a\", tail = None, head = 2.0)";
    assert_eq!(
        run(&prelude(&tools), program),
        Ok(json!("fs:read_text_file {\"path\":\"a\",\"head\":2.0}"))
    );
}

//! `github_list_issues` and `github_create_issue` over the GitHub REST API, at a configured
//! base URL (GitHub Enterprise, or a loopback stand-in in tests).
//!
//! Fixes over the original: owner and repository are escaped as path segments (and `.`/`..`
//! refused) instead of pasted into the URL; pull requests, which the issues endpoint also
//! returns, are filtered out; `labels` and `limit` (the feature docs' parameters) are
//! supported; results also come as structured content.

use std::sync::Arc;

use serde_json::{Value, json};
use url::Url;

use super::net::{Fetcher, HttpRequest, HttpResponse};
use super::{BoxFuture, Group, ToolDef, ToolOutput, hints};
use crate::config::{GithubSettings, WebSettings};

const DEFAULT_LIMIT: u64 = 30;
const MAX_LIMIT: u64 = 100;
/// Pages read at most to fill `limit` once pull requests are filtered out.
const MAX_PAGES: u64 = 5;

/// The GitHub group.
pub struct Github {
    fetcher: Fetcher,
    base_url: String,
    /// Sent as `Authorization: Bearer …`; never logged or shown.
    token: String,
}

/// The GitHub group, or `None` when the token variable `g.token_env` is unset or empty.
pub fn group(g: &GithubSettings, web: &WebSettings) -> Option<Arc<dyn Group>> {
    let token = std::env::var(&g.token_env).ok().filter(|t| !t.is_empty());
    if token.is_none() {
        tracing::info!(
            variable = %g.token_env,
            "GitHub tools are off: the token variable is unset or empty"
        );
    }
    with_token(g, web, token?)
}

/// The GitHub group with an explicit token.
pub fn with_token(g: &GithubSettings, web: &WebSettings, token: String) -> Option<Arc<dyn Group>> {
    // The base URL is configuration, not model input: no private-address guard.
    let fetcher = match Fetcher::new(web, false) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("GitHub tools are off: {e}");
            return None;
        }
    };
    Some(Arc::new(Github {
        fetcher,
        base_url: g.base_url.clone(),
        token,
    }))
}

impl Group for Github {
    fn tools(&self) -> Vec<ToolDef> {
        vec![
            ToolDef {
                name: "github_list_issues",
                description: "List issues (not pull requests) in a GitHub repository.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "owner": {"type": "string", "description": "Repository owner (user or organisation)"},
                        "repo": {"type": "string", "description": "Repository name"},
                        "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "Issue state (default open)"},
                        "labels": {"type": "string", "description": "Only issues with all these labels, comma-separated"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most issues to return (default 30, at most 100)"}
                    },
                    "required": ["owner", "repo"]
                }),
                annotations: Some(hints::reads_remote("List GitHub issues")),
            },
            ToolDef {
                name: "github_create_issue",
                description: "Create an issue in a GitHub repository.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "owner": {"type": "string", "description": "Repository owner (user or organisation)"},
                        "repo": {"type": "string", "description": "Repository name"},
                        "title": {"type": "string", "description": "Issue title"},
                        "body": {"type": "string", "description": "Issue body (Markdown)"},
                        "labels": {"type": "array", "items": {"type": "string"}, "description": "Labels to apply"}
                    },
                    "required": ["owner", "repo", "title"]
                }),
                annotations: Some(hints::posts("Create a GitHub issue")),
            },
        ]
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match tool {
                "github_list_issues" => self.list(args).await,
                "github_create_issue" => self.create(args).await,
                other => ToolOutput::unknown_tool(other),
            }
        })
    }
}

fn arg<'a>(args: &'a Value, name: &str) -> &'a str {
    args.get(name).and_then(Value::as_str).unwrap_or("").trim()
}

impl Github {
    /// `{base}/repos/{owner}/{repo}/issues`, each part escaped as one path segment.
    fn issues_url(&self, args: &Value) -> Result<Url, String> {
        let (owner, repo) = (arg(args, "owner"), arg(args, "repo"));
        for (name, v) in [("owner", owner), ("repo", repo)] {
            if v.is_empty() {
                return Err(format!("{name} is required"));
            }
            // Escaping cannot stop dot segments, which servers resolve: `..` would reach
            // other API paths.
            if v == "." || v == ".." {
                return Err(format!("{name} {v:?} is not a valid name"));
            }
        }
        let mut url = Url::parse(&self.base_url)
            .map_err(|e| format!("invalid GitHub base URL {:?}: {e}", self.base_url))?;
        url.path_segments_mut()
            .map_err(|()| format!("invalid GitHub base URL {:?}", self.base_url))?
            .pop_if_empty()
            .extend(["repos", owner, repo, "issues"]);
        Ok(url)
    }

    fn request(&self, method: &str, url: &Url, body: Option<&Value>) -> HttpRequest {
        let mut headers = vec![
            ("Accept".into(), "application/vnd.github+json".into()),
            ("X-GitHub-Api-Version".into(), "2022-11-28".into()),
            ("Authorization".into(), format!("Bearer {}", self.token)),
        ];
        if body.is_some() {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        HttpRequest {
            method: method.into(),
            url: url.to_string(),
            headers,
            body: body.map(|b| b.to_string().into_bytes()),
            timeout: None,
        }
    }

    async fn list(&self, args: &Value) -> ToolOutput {
        let mut url = match self.issues_url(args) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        let (owner, repo) = (arg(args, "owner"), arg(args, "repo"));
        let state = match arg(args, "state") {
            "" => "open",
            s => s,
        };
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_LIMIT)
            .clamp(1, MAX_LIMIT);
        let labels = arg(args, "labels");
        let mut issues: Vec<Value> = Vec::new();
        for page in 1..=MAX_PAGES {
            {
                let mut q = url.query_pairs_mut();
                q.clear()
                    .append_pair("state", state)
                    .append_pair("per_page", &limit.to_string());
                if !labels.is_empty() {
                    q.append_pair("labels", labels);
                }
                if page > 1 {
                    q.append_pair("page", &page.to_string());
                }
            }
            let items = match self.send(self.request("GET", &url, None), 200).await {
                Ok(Value::Array(items)) => items,
                Ok(_) => {
                    return ToolOutput::error(
                        "failed to list issues: GitHub API returned something other than a list",
                    );
                }
                Err(e) => return ToolOutput::error(format!("failed to list issues: {e}")),
            };
            let full = items.len() as u64 >= limit;
            issues.extend(
                items
                    .iter()
                    .filter(|i| i.get("pull_request").is_none())
                    .map(summary),
            );
            // Pull requests are filtered out, so a full page may still leave us short.
            if issues.len() as u64 >= limit || !full {
                break;
            }
        }
        issues.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        let text = if issues.is_empty() {
            "No issues found.".to_string()
        } else {
            let mut t = format!("Issues in {owner}/{repo} ({state}):\n");
            for i in &issues {
                t.push('\n');
                t.push_str(&issue_lines(i));
            }
            t
        };
        ToolOutput {
            text,
            structured: Some(json!({
                "owner": owner,
                "repo": repo,
                "state": state,
                "issues": issues,
            })),
            is_error: false,
        }
    }

    async fn create(&self, args: &Value) -> ToolOutput {
        let url = match self.issues_url(args) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        let title = arg(args, "title");
        if title.is_empty() {
            return ToolOutput::error("title is required");
        }
        let mut body = json!({ "title": title });
        if let Some(b) = args.get("body").and_then(Value::as_str)
            && !b.is_empty()
        {
            body["body"] = json!(b);
        }
        if let Some(labels) = args.get("labels").and_then(Value::as_array) {
            if labels.iter().any(|l| !l.is_string()) {
                return ToolOutput::error("labels must be an array of strings");
            }
            if !labels.is_empty() {
                body["labels"] = Value::Array(labels.clone());
            }
        }
        match self
            .send(self.request("POST", &url, Some(&body)), 201)
            .await
        {
            Ok(issue) => {
                let s = summary(&issue);
                ToolOutput {
                    text: format!(
                        "Created issue #{}: {}\nURL: {}",
                        s["number"],
                        s["title"].as_str().unwrap_or(""),
                        s["url"].as_str().unwrap_or("")
                    ),
                    structured: Some(s),
                    is_error: false,
                }
            }
            Err(e) => ToolOutput::error(format!("failed to create issue: {e}")),
        }
    }

    /// Sends `req`, expecting status `want` and a JSON body.
    async fn send(&self, req: HttpRequest, want: u16) -> Result<Value, String> {
        let resp = self.fetcher.fetch(req).await.map_err(|e| e.to_string())?;
        if resp.status != want {
            return Err(api_error(&resp));
        }
        if resp.truncated {
            return Err("GitHub API response is larger than the download limit".into());
        }
        serde_json::from_slice(&resp.body).map_err(|e| format!("invalid GitHub API response: {e}"))
    }
}

/// `GitHub API error: <status> - <message>`, the message from GitHub's JSON error body when
/// there is one (else the start of the body).
fn api_error(resp: &HttpResponse) -> String {
    let message = serde_json::from_slice::<Value>(&resp.body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| resp.excerpt(500));
    format!("GitHub API error: {} - {message}", resp.status)
}

/// The fields we show of one issue.
fn summary(issue: &Value) -> Value {
    let labels: Vec<Value> = issue
        .get("labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| match l {
            // Labels come as objects; older responses and our own request use names.
            Value::String(s) => Some(json!(s)),
            other => other.get("name").cloned(),
        })
        .collect();
    json!({
        "number": issue.get("number").cloned().unwrap_or(Value::Null),
        "title": issue.get("title").cloned().unwrap_or(Value::Null),
        "url": issue.get("html_url").cloned().unwrap_or(Value::Null),
        "labels": labels,
        "created_at": issue.get("created_at").cloned().unwrap_or(Value::Null),
        "state": issue.get("state").cloned().unwrap_or(Value::Null),
    })
}

/// `#N: Title [a, b]`, then indented URL and creation date, as the original prints them.
fn issue_lines(i: &Value) -> String {
    let labels: Vec<&str> = i["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut s = format!("#{}: {}", i["number"], i["title"].as_str().unwrap_or(""));
    if !labels.is_empty() {
        s.push_str(&format!(" [{}]", labels.join(", ")));
    }
    s.push_str(&format!("\n    URL: {}", i["url"].as_str().unwrap_or("")));
    let created = i["created_at"].as_str().unwrap_or("");
    if !created.is_empty() {
        s.push_str(&format!(
            "\n    Created: {}",
            created.get(..10).unwrap_or(created)
        ));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests;

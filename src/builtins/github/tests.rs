//! The GitHub tools against a loopback stand-in of its API.

use super::*;
use crate::builtins::test_support::{Stand, json_reply, web};

fn settings(base: &str) -> GithubSettings {
    GithubSettings {
        token_env: "OPENPACT_TEST_UNSET_GITHUB_TOKEN".into(),
        base_url: base.into(),
    }
}

fn issue(n: u64, title: &str, labels: &[&str], pr: bool) -> Value {
    let mut v = json!({
        "number": n,
        "title": title,
        "html_url": format!("https://github.com/o/r/issues/{n}"),
        "state": "open",
        "created_at": "2024-03-05T10:11:12Z",
        "labels": labels.iter().map(|l| json!({"name": l, "color": "fff"})).collect::<Vec<_>>(),
    });
    if pr {
        v["pull_request"] = json!({"url": "x"});
    }
    v
}

#[test]
fn no_token_no_group() {
    assert!(group(&settings("http://127.0.0.1:9"), &web(false)).is_none());
}

#[tokio::test]
async fn list_issues() {
    let s = Stand::start(|rq| {
        if rq.url.starts_with("/api/v3/repos/my%20org/re%2Fpo/issues") {
            json_reply(
                200,
                json!([
                    issue(7, "Bug & fix", &["bug", "p1"], false),
                    issue(6, "A PR", &[], true),
                    issue(5, "Plain", &[], false)
                ]),
            )
        } else {
            json_reply(404, json!({"message": "Not Found"}))
        }
    });
    let g = with_token(
        &settings(&format!("{}/api/v3/", s.base)),
        &web(false),
        "t0k3n".into(),
    )
    .unwrap();
    let out = g
            .call(
                "github_list_issues",
                &json!({"owner": "my org", "repo": "re/po", "state": "all", "labels": "bug,p1", "limit": 10}),
            )
            .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        out.text,
        "Issues in my org/re/po (all):\n\n\
             #7: Bug & fix [bug, p1]\n    URL: https://github.com/o/r/issues/7\n    Created: 2024-03-05\n\n\
             #5: Plain\n    URL: https://github.com/o/r/issues/5\n    Created: 2024-03-05\n"
    );
    let sc = out.structured.unwrap();
    assert_eq!(sc["issues"].as_array().unwrap().len(), 2);
    assert_eq!(
        sc["issues"][0],
        json!({"number": 7, "title": "Bug & fix", "url": "https://github.com/o/r/issues/7",
                   "labels": ["bug", "p1"], "created_at": "2024-03-05T10:11:12Z", "state": "open"})
    );
    let seen = s.seen();
    assert_eq!(seen.len(), 1, "a short page is the last");
    let rq = &seen[0];
    assert_eq!(rq.method, "GET");
    assert_eq!(
        rq.url,
        "/api/v3/repos/my%20org/re%2Fpo/issues?state=all&per_page=10&labels=bug%2Cp1"
    );
    assert_eq!(rq.header("authorization"), Some("Bearer t0k3n"));
    assert_eq!(rq.header("accept"), Some("application/vnd.github+json"));
    assert_eq!(rq.header("x-github-api-version"), Some("2022-11-28"));
    assert!(rq.header("user-agent").unwrap().starts_with("OpenPact/"));
}

#[tokio::test]
async fn list_defaults_pages_past_pull_requests_and_errors() {
    let s = Stand::start(|rq| {
        let page2 = rq.url.contains("&page=2");
        if rq.url.starts_with("/repos/o/r/issues") {
            if page2 {
                json_reply(200, json!([issue(1, "Old", &[], false)]))
            } else {
                json_reply(
                    200,
                    json!([issue(3, "PR", &[], true), issue(2, "New", &[], false)]),
                )
            }
        } else if rq.url.starts_with("/repos/o/empty/issues") {
            json_reply(200, json!([]))
        } else {
            json_reply(
                404,
                json!({"message": "Not Found", "documentation_url": "x"}),
            )
        }
    });
    let g = with_token(&settings(&s.base), &web(false), "tok".into()).unwrap();
    let out = g
        .call(
            "github_list_issues",
            &json!({"owner": "o", "repo": "r", "limit": 2}),
        )
        .await;
    assert!(
        out.text.starts_with("Issues in o/r (open):"),
        "{}",
        out.text
    );
    assert!(
        out.text.contains("#2: New") && out.text.contains("#1: Old"),
        "{}",
        out.text
    );
    let urls: Vec<String> = s.seen().into_iter().map(|r| r.url).collect();
    assert_eq!(
        urls,
        [
            "/repos/o/r/issues?state=open&per_page=2",
            "/repos/o/r/issues?state=open&per_page=2&page=2"
        ]
    );
    let out = g
        .call("github_list_issues", &json!({"owner": "o", "repo": "r"}))
        .await;
    assert!(
        s.seen()[2].url.ends_with("per_page=30"),
        "{:?}",
        s.seen()[2].url
    );
    assert!(!out.is_error);

    let out = g
        .call(
            "github_list_issues",
            &json!({"owner": "o", "repo": "empty"}),
        )
        .await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (false, "No issues found.")
    );

    let out = g
        .call(
            "github_list_issues",
            &json!({"owner": "o", "repo": "missing"}),
        )
        .await;
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "failed to list issues: GitHub API error: 404 - Not Found"
    );

    let out = g
        .call("github_list_issues", &json!({"owner": "..", "repo": "x"}))
        .await;
    assert!(
        out.is_error && out.text.contains("not a valid name"),
        "{}",
        out.text
    );
    let out = g
        .call("github_list_issues", &json!({"owner": "", "repo": "x"}))
        .await;
    assert_eq!(out.text, "owner is required");
}

#[tokio::test]
async fn create_issue() {
    let s = Stand::start(|rq| {
        let sent = rq.json();
        if rq.url == "/repos/o/r/issues" && sent["title"] == "Crash on start" {
            let mut v = issue(42, "Crash on start", &["bug"], false);
            v["html_url"] = json!("https://github.com/o/r/issues/42");
            json_reply(201, v)
        } else {
            json_reply(422, json!({"message": "Validation Failed"}))
        }
    });
    let g = with_token(&settings(&s.base), &web(false), "tok".into()).unwrap();
    let out = g
            .call(
                "github_create_issue",
                &json!({"owner": "o", "repo": "r", "title": "Crash on start", "body": "Steps…", "labels": ["bug"]}),
            )
            .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        out.text,
        "Created issue #42: Crash on start\nURL: https://github.com/o/r/issues/42"
    );
    assert_eq!(out.structured.unwrap()["number"], 42);
    let rq = &s.seen()[0];
    assert_eq!(rq.method, "POST");
    assert_eq!(rq.header("content-type"), Some("application/json"));
    assert_eq!(rq.header("authorization"), Some("Bearer tok"));
    assert_eq!(
        rq.json(),
        json!({"title": "Crash on start", "body": "Steps…", "labels": ["bug"]})
    );

    let out = g
        .call(
            "github_create_issue",
            &json!({"owner": "o", "repo": "r", "title": "Other"}),
        )
        .await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (
            true,
            "failed to create issue: GitHub API error: 422 - Validation Failed"
        )
    );
    assert_eq!(s.seen()[1].json(), json!({"title": "Other"}));
    let out = g
        .call(
            "github_create_issue",
            &json!({"owner": "o", "repo": "r", "title": " "}),
        )
        .await;
    assert_eq!(out.text, "title is required");
}

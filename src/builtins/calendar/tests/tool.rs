//! The tool as the hub calls it: arguments, unknown calendars, feeds over HTTP.

use super::*;

fn group_with(sources: Vec<CalendarSource>) -> Arc<dyn Group> {
    group(&sources, &web()).unwrap()
}

fn web() -> WebSettings {
    WebSettings {
        enabled: true,
        allow_private: false,
        max_bytes: 64 * 1024,
        timeout: std::time::Duration::from_secs(10),
        max_redirects: 5,
    }
}

#[tokio::test]
async fn arguments_and_unknown_calendars() {
    assert!(group(&[], &web()).is_none());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("home.ics");
    let start = Utc::now() + TimeDelta::hours(2);
    std::fs::write(
        &path,
        ics(&[format!(
            "UID:1\r\nDTSTART:{}Z\r\nSUMMARY:Soon\r\n",
            stamp(start.naive_utc())
        )]),
    )
    .unwrap();
    let g = group_with(vec![
        CalendarSource {
            name: "Home".into(),
            feed: CalendarFeed::File(path.clone()),
        },
        CalendarSource {
            name: "Work".into(),
            feed: CalendarFeed::File(dir.path().join("missing.ics")),
        },
    ]);
    let tools = g.tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "calendar_read");
    assert!(tools[0].description.contains("Home, Work"));

    let out = g.call("calendar_read", &json!({"calendar": "nope"})).await;
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "calendar 'nope' not found; configured calendars: Home, Work"
    );
    for bad in [json!(0), json!(367), json!(-3)] {
        let out = g.call("calendar_read", &json!({"days": bad})).await;
        assert!(out.is_error, "{bad}");
        assert!(
            out.text.starts_with("days must be between 1 and 366"),
            "{}",
            out.text
        );
    }
    for ok in [json!(1), json!(366)] {
        let out = g
            .call("calendar_read", &json!({"days": ok, "calendar": "home"}))
            .await;
        assert!(!out.is_error, "{}", out.text);
        assert!(out.text.contains("] Soon"), "{}", out.text);
    }
    // Default: all calendars, 7 days; the missing file is reported, the other listed.
    let out = g.call("calendar_read", &json!({})).await;
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.starts_with("Events in the next 7 days:"),
        "{}",
        out.text
    );
    assert!(
        out.text
            .contains("Could not read calendar 'Work': cannot open"),
        "{}",
        out.text
    );
    let out = g.call("calendar_read", &json!({"calendar": "WORK"})).await;
    assert!(out.is_error, "{}", out.text);

    // Over the size cap.
    std::fs::write(&path, vec![b'x'; 64 * 1024 + 1]).unwrap();
    let out = g.call("calendar_read", &json!({"calendar": "home"})).await;
    assert!(out.is_error);
    assert!(out.text.contains("larger than 65536 bytes"), "{}", out.text);
}

#[tokio::test]
async fn feeds_over_http() {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    let start = Utc::now() + TimeDelta::hours(3);
    let body = ics(&[format!(
        "UID:1\r\nDTSTART:{}Z\r\nDURATION:PT1H\r\nSUMMARY:Served\r\n",
        stamp(start.naive_utc())
    )]);
    let handle = std::thread::spawn(move || {
        for _ in 0..2 {
            let Ok(rq) = server.recv() else { return };
            let resp = if rq.url() == "/cal.ics" {
                tiny_http::Response::from_data(body.clone().into_bytes())
            } else {
                tiny_http::Response::from_data(b"boom".to_vec()).with_status_code(500)
            };
            let _ = rq.respond(resp);
        }
    });
    let g = group_with(vec![
        CalendarSource {
            name: "team".into(),
            feed: CalendarFeed::Url(format!("http://127.0.0.1:{port}/cal.ics")),
        },
        CalendarSource {
            name: "broken".into(),
            feed: CalendarFeed::Url(format!("http://127.0.0.1:{port}/fail")),
        },
    ]);
    let out = g.call("calendar_read", &json!({})).await;
    handle.join().unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("] Served"), "{}", out.text);
    assert!(
        out.text
            .contains("Could not read calendar 'broken': HTTP 500 Internal Server Error"),
        "{}",
        out.text
    );
    let evs = events(&out);
    assert_eq!(evs.len(), 1);
    assert_eq!(utc(&evs[0]["start"]).timestamp(), start.timestamp());
}

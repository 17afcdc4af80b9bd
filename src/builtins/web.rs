//! `web_fetch`: fetch a URL the model chose and return its readable content.
//!
//! Unlike the original (regex tag stripping, 7 entities, a byte cut that could split UTF-8,
//! no address rules), HTML goes through a real parser (html2text) with full entity decoding,
//! `<script>`/`<style>`/`<head>` dropped, an optional Markdown rendering (headings, lists,
//! emphasis, links with absolute URLs), the page title, a character-boundary cut, and the
//! shared [`Fetcher`] guard against private addresses.

use std::sync::Arc;

use html2text::render::TextDecorator;
use serde_json::{Value, json};
use url::Url;

use super::net::{Fetcher, HttpRequest, HttpResponse, NetError};
use super::{BoxFuture, Group, ToolDef, ToolOutput, cap_chars, hints};

const DEFAULT_MAX_LENGTH: usize = 50_000;

/// Wide enough that prose is not wrapped: a paragraph stays one line for the model.
const RENDER_WIDTH: usize = 10_000;

/// html2text walks the document tree; a deeply nested page needs more stack than a runtime
/// thread has, so conversion runs on its own thread with this much.
const CONVERT_STACK: usize = 64 * 1024 * 1024;

/// The `web_fetch` tool.
pub struct Web {
    fetcher: Fetcher,
}

/// The web group (`web_fetch`), guarded unless `web.allow_private`.
pub fn group(web: &crate::config::WebSettings) -> Result<Arc<dyn Group>, NetError> {
    Ok(Arc::new(Web {
        fetcher: Fetcher::new(web, true)?,
    }))
}

impl Group for Web {
    fn tools(&self) -> Vec<ToolDef> {
        vec![ToolDef {
            name: "web_fetch",
            description:
                "Fetch a web page (http or https) and return its readable content: HTML is \
                converted to plain text (or Markdown with format \"markdown\"), scripts and styles \
                dropped; JSON and other text is returned as is. Output is capped at max_length \
                characters. Private and local network addresses are refused unless the \
                configuration allows them."
                    .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The URL to fetch (http:// or https://)"},
                    "max_length": {"type": "integer", "minimum": 1, "description": "Most characters of content to return (default 50000)"},
                    "format": {"type": "string", "enum": ["text", "markdown"], "description": "How to render HTML: plain text (default) or Markdown"}
                },
                "required": ["url"]
            }),
            annotations: Some(hints::reads_remote("Fetch a web page")),
        }]
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match tool {
                "web_fetch" => self.fetch(args).await,
                other => ToolOutput::unknown_tool(other),
            }
        })
    }
}

impl Web {
    async fn fetch(&self, args: &Value) -> ToolOutput {
        let url = args.get("url").and_then(Value::as_str).unwrap_or("").trim();
        if url.is_empty() {
            return ToolOutput::error("url is required");
        }
        let lower = url.to_ascii_lowercase();
        if !lower.starts_with("http://") && !lower.starts_with("https://") {
            return ToolOutput::error("URL must start with http:// or https://");
        }
        // The original treats a missing or non-positive limit as the default.
        let max_length = args
            .get("max_length")
            .and_then(Value::as_i64)
            .filter(|n| *n > 0)
            .map_or(DEFAULT_MAX_LENGTH, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            });
        let markdown = args.get("format").and_then(Value::as_str) == Some("markdown");

        let resp = match self.fetcher.fetch(HttpRequest::get(url)).await {
            Ok(r) => r,
            Err(e @ (NetError::Scheme | NetError::InvalidUrl(_))) => {
                return ToolOutput::error(e.to_string());
            }
            Err(e) => return ToolOutput::error(format!("fetch failed: {e}")),
        };
        if !resp.is_success() {
            return ToolOutput::error(format!("HTTP {}: {}", resp.status, resp.status_text));
        }
        let content_type = resp.header("content-type").unwrap_or("").to_string();
        let page = match convert(resp, markdown).await {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let capped = cap_chars(&page.content, max_length);
        let cut = capped.len() != page.content.len();
        let text = if page.byte_truncated && !cut {
            format!(
                "{capped}\n\n[Content truncated: the page is larger than the {} byte download limit]",
                page.bytes
            )
        } else {
            capped
        };
        let structured = json!({
            "url": url,
            "final_url": page.final_url,
            "status": page.status,
            "title": page.title,
            "content_type": content_type,
            "content": text,
            "truncated": cut || page.byte_truncated,
        });
        ToolOutput {
            text,
            structured: Some(structured),
            is_error: false,
        }
    }
}

/// A fetched page made readable.
struct Page {
    content: String,
    title: Option<String>,
    final_url: String,
    status: u16,
    byte_truncated: bool,
    bytes: usize,
}

async fn convert(resp: HttpResponse, markdown: bool) -> Result<Page, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("openpact-html".into())
        .stack_size(CONVERT_STACK)
        .spawn(move || {
            let _ = tx.send(convert_sync(resp, markdown));
        })
        .map_err(|e| format!("failed to read response: {e}"))?;
    rx.await
        .map_err(|_| "failed to read response: the converter stopped".to_string())?
}

fn convert_sync(resp: HttpResponse, markdown: bool) -> Result<Page, String> {
    let ctype = resp
        .header("content-type")
        .unwrap_or("")
        .to_ascii_lowercase();
    let mime = ctype.split(';').next().unwrap_or("").trim().to_string();
    let text = decode(&resp.body, &ctype, resp.truncated);
    let kind = classify(&mime, &resp.body, text.as_deref());
    let bytes = resp.body.len();
    let (content, title) = match (kind, text) {
        (Kind::Html, Some(html)) => {
            let base = Url::parse(&resp.final_url).ok();
            (html_to_text(&html, markdown, base)?, html_title(&html))
        }
        (Kind::Json, Some(t)) => {
            let pretty = serde_json::from_str::<Value>(&t)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok());
            (pretty.unwrap_or(t), None)
        }
        (Kind::Text, Some(t)) => (t, None),
        _ => {
            return Err(format!(
                "cannot show binary content ({}, {bytes} bytes)",
                if mime.is_empty() {
                    "no content type"
                } else {
                    mime.as_str()
                }
            ));
        }
    };
    Ok(Page {
        content,
        title,
        final_url: resp.final_url,
        status: resp.status,
        byte_truncated: resp.truncated,
        bytes,
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Html,
    Json,
    Text,
    Binary,
}

fn classify(mime: &str, body: &[u8], text: Option<&str>) -> Kind {
    let textual_app = [
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
        "application/graphql",
        "application/x-www-form-urlencoded",
    ];
    match mime {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "application/json" | "text/json" => Kind::Json,
        m if m.ends_with("+json") => Kind::Json,
        m if m.starts_with("text/") || m.ends_with("+xml") || textual_app.contains(&m) => {
            Kind::Text
        }
        // No (or a generic) type: sniff, the way browsers do for unlabeled responses.
        "" | "application/octet-stream" | "binary/octet-stream" => match text {
            Some(t) if !body.contains(&0) => {
                let head = t.trim_start().get(..256).unwrap_or(t.trim_start());
                let head = head.to_ascii_lowercase();
                if head.starts_with("<!doctype html") || head.starts_with("<html") {
                    Kind::Html
                } else if head.starts_with('{') || head.starts_with('[') {
                    Kind::Json
                } else {
                    Kind::Text
                }
            }
            _ => Kind::Binary,
        },
        _ => Kind::Binary,
    }
}

/// The body as text, honouring a Latin-1/Windows-1252 charset (byte = code point, close
/// enough for pages that still declare it); `None` when it is not valid text.
fn decode(body: &[u8], ctype: &str, truncated: bool) -> Option<String> {
    let charset = ctype
        .split(';')
        .filter_map(|p| p.trim().strip_prefix("charset="))
        .next()
        .map(|c| c.trim_matches('"').to_string())
        .or_else(|| meta_charset(body));
    if let Some(cs) = charset
        && ["iso-8859-1", "latin1", "latin-1", "windows-1252", "cp1252"].contains(&cs.as_str())
    {
        return Some(body.iter().map(|&b| char::from(b)).collect());
    }
    match std::str::from_utf8(body) {
        Ok(s) => Some(s.to_string()),
        // A download cut at the byte limit may end inside a character: drop that tail.
        Err(e) if truncated && e.error_len().is_none() => {
            Some(String::from_utf8_lossy(&body[..e.valid_up_to()]).into_owned())
        }
        Err(_) => {
            let lossy = String::from_utf8_lossy(body);
            // Mostly-valid text with a few bad bytes is still text; anything else is binary.
            let bad = lossy.matches('\u{FFFD}').count();
            (bad * 100 <= lossy.chars().count().max(1)).then(|| lossy.into_owned())
        }
    }
}

/// `<meta charset="…">` (or `http-equiv` content) in the first KiB, lowercased.
fn meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")? + "charset=".len();
    let rest = head[at..].trim_start_matches(['"', '\'']);
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .unwrap_or(rest.len());
    Some(rest[..end].to_string()).filter(|s| !s.is_empty())
}

/// The `<title>` text, entities decoded and whitespace collapsed.
fn html_title(html: &str) -> Option<String> {
    // ASCII lowercasing keeps byte offsets, so positions found in `lower` index `html`.
    let lower = html.to_ascii_lowercase();
    let mut from = 0;
    let open = loop {
        let at = from + lower[from..].find("<title")?;
        let next = lower[at + 6..].chars().next()?;
        if next == '>' || next.is_ascii_whitespace() || next == '/' {
            break at;
        }
        from = at + 6;
    };
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    // The title element's text is raw text with entities: render it as a paragraph to
    // decode them with the same parser.
    let inner = html[start..end].replace('<', "&lt;");
    let decoded = html2text::config::with_decorator(html2text::render::TrivialDecorator::new())
        .string_from_read(format!("<p>{inner}</p>").as_bytes(), RENDER_WIDTH)
        .ok()?;
    let title = decoded.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

fn html_to_text(html: &str, markdown: bool, base: Option<Url>) -> Result<String, String> {
    let decorator = Decorator {
        markdown,
        base,
        links: Vec::new(),
    };
    let config = html2text::config::with_decorator(decorator).no_link_wrapping();
    let failed = |e: html2text::Error| format!("failed to read response: {e}");
    let html = limit_nesting(html, MAX_DEPTH);
    let dom = config.parse_html(html.as_bytes()).map_err(failed)?;
    let tree = config.dom_to_render_tree(&dom).map_err(failed)?;
    let raw = config
        .render_to_string(tree, RENDER_WIDTH)
        .map_err(failed)?;
    Ok(tidy(&raw))
}

/// Deepest nesting of (counted) elements kept as markup; deeper tags are dropped, their
/// text kept.
const MAX_DEPTH: usize = 256;

/// Elements not counted for depth: void elements and ones whose end tag is optional (a page
/// of 10,000 unclosed `<p>`s is not deep), and raw-text elements, which cannot nest.
fn uncounted(name: &str) -> bool {
    matches!(
        name,
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "source"
            | "track"
            | "wbr"
            | "param"
            | "keygen"
            | "frame"
            | "p"
            | "li"
            | "dt"
            | "dd"
            | "option"
            | "optgroup"
            | "tr"
            | "td"
            | "th"
            | "tbody"
            | "thead"
            | "tfoot"
            | "colgroup"
            | "caption"
            | "rb"
            | "rt"
            | "rp"
            | "rtc"
            | "html"
            | "head"
            | "body"
    ) || RAW_TEXT.contains(&name)
}

/// Elements whose content is not markup: scanning skips to their end tag.
const RAW_TEXT: &[&str] = &[
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes",
];

/// Drops tags nested deeper than `max`, in one linear pass over the source.
///
/// Both html5ever (end-tag scope checks walk the open-element stack) and html2text's
/// renderer take time quadratic in nesting depth: 50,000 nested `<div>`s — 250 KB, well
/// within the download limit — take minutes. Browsers cap depth for the same reason. Real
/// pages stay far below [`MAX_DEPTH`], so this only changes hostile or broken ones, and
/// keeps their text.
fn limit_nesting(html: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let b = html.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let (mut depth, mut suppressed) = (0usize, 0usize);
    // Once a quote character is found unclosed to the end, it cannot close anything later:
    // remembering that keeps the scan linear on pages full of stray quotes.
    let mut no_more = [false, false];
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'<', &b[i..]) {
        let start = i + off;
        let rest = &b[start + 1..];
        if rest.starts_with(b"!--") {
            i = memchr::memmem::find(&b[start + 4..], b"-->")
                .map_or(b.len(), |e| start + 4 + e + 3);
            continue;
        }
        if matches!(rest.first(), Some(b'!' | b'?')) {
            i = tag_end(b, start + 1, &mut no_more);
            continue;
        }
        let closing = rest.first() == Some(&b'/');
        let name_start = start + 1 + usize::from(closing);
        if !b.get(name_start).is_some_and(u8::is_ascii_alphabetic) {
            i = start + 1;
            continue;
        }
        let name_len = b[name_start..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'-')
            .count();
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        let end = tag_end(b, name_start + name_len, &mut no_more);
        let self_closing = end >= 2 && b[end - 1] == b'>' && b[end - 2] == b'/';
        let mut drop = false;
        if !uncounted(&name) {
            if closing {
                if suppressed > 0 {
                    suppressed -= 1;
                    drop = true;
                } else {
                    depth = depth.saturating_sub(1);
                }
            } else if !self_closing {
                if depth >= max {
                    suppressed += 1;
                    drop = true;
                } else {
                    depth += 1;
                }
            }
        }
        if drop {
            let o = out.get_or_insert_with(|| String::with_capacity(html.len()));
            o.push_str(&html[copied..start]);
            copied = end;
        }
        i = end;
        if !closing && RAW_TEXT.contains(&name.as_str()) {
            // Skip to the element's end tag, matched case-insensitively as parsers do.
            let finder = memchr::memmem::Finder::new(b"</");
            let mut at = end;
            i = loop {
                match finder.find(&b[at..]) {
                    None => break b.len(),
                    Some(e) => {
                        let tag = at + e + 2;
                        if b.get(tag..tag + name.len())
                            .is_some_and(|t| t.eq_ignore_ascii_case(name.as_bytes()))
                        {
                            break at + e;
                        }
                        at = tag;
                    }
                }
            };
        }
    }
    match out {
        None => std::borrow::Cow::Borrowed(html),
        Some(mut o) => {
            o.push_str(&html[copied..]);
            std::borrow::Cow::Owned(o)
        }
    }
}

/// The index just past the `>` ending the tag whose attributes start at `from` (quoted
/// attribute values may contain `>`), or the end of the input.
fn tag_end(b: &[u8], from: usize, no_more: &mut [bool; 2]) -> usize {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'>' => return i + 1,
            q @ (b'"' | b'\'') if prev_is_eq(b, i) => {
                let k = usize::from(q == b'\'');
                if !no_more[k] {
                    match memchr::memchr(q, &b[i + 1..]) {
                        Some(e) => {
                            i += e + 2;
                            continue;
                        }
                        None => no_more[k] = true,
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    b.len()
}

/// Whether the last non-space byte before `i` (looking back a few bytes only, to stay
/// linear) is `=`: a quoted attribute value starts at `i`.
fn prev_is_eq(b: &[u8], i: usize) -> bool {
    b[i.saturating_sub(8)..i]
        .iter()
        .rev()
        .find(|c| !c.is_ascii_whitespace())
        .is_some_and(|c| *c == b'=')
}

/// Trims line ends, collapses runs of blank lines into one, and turns html2text's
/// width-long `<hr>` rules into `---`.
fn tidy(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut blank = 0;
    for line in raw.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        if line.len() > 3 && line.chars().all(|c| c == '─') {
            out.push_str("---");
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Renders markup as Markdown (`markdown`) or as plain text: headings, list bullets and
/// quotes are kept either way (they carry structure); emphasis, code and links only in
/// Markdown, with link targets made absolute against the page URL.
#[derive(Clone)]
struct Decorator {
    markdown: bool,
    base: Option<Url>,
    /// Closing text of each open link (`](url)`, or empty for links not shown).
    links: Vec<String>,
}

impl Decorator {
    fn mark(&self, s: &str) -> (String, ()) {
        (
            if self.markdown {
                s.into()
            } else {
                String::new()
            },
            (),
        )
    }

    fn end(&self, s: &str) -> String {
        if self.markdown {
            s.into()
        } else {
            String::new()
        }
    }

    fn absolute(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') {
            return None;
        }
        let url = match &self.base {
            Some(b) => b.join(href).ok()?,
            None => Url::parse(href).ok()?,
        };
        matches!(url.scheme(), "http" | "https" | "mailto").then(|| url.to_string())
    }
}

impl TextDecorator for Decorator {
    type Annotation = ();

    fn decorate_link_start(&mut self, url: &str) -> (String, ()) {
        match self.absolute(url).filter(|_| self.markdown) {
            Some(u) => {
                self.links.push(format!("]({u})"));
                ("[".into(), ())
            }
            None => {
                self.links.push(String::new());
                (String::new(), ())
            }
        }
    }

    fn decorate_link_end(&mut self) -> String {
        self.links.pop().unwrap_or_default()
    }

    fn decorate_em_start(&self) -> (String, ()) {
        self.mark("*")
    }

    fn decorate_em_end(&self) -> String {
        self.end("*")
    }

    fn decorate_strong_start(&self) -> (String, ()) {
        self.mark("**")
    }

    fn decorate_strong_end(&self) -> String {
        self.end("**")
    }

    fn decorate_strikeout_start(&self) -> (String, ()) {
        self.mark("~~")
    }

    fn decorate_strikeout_end(&self) -> String {
        self.end("~~")
    }

    fn decorate_code_start(&self) -> (String, ()) {
        self.mark("`")
    }

    fn decorate_code_end(&self) -> String {
        self.end("`")
    }

    fn decorate_preformat_first(&self) -> Self::Annotation {}

    fn decorate_preformat_cont(&self) -> Self::Annotation {}

    fn decorate_image(&mut self, src: &str, title: &str) -> (String, ()) {
        if title.trim().is_empty() {
            return (String::new(), ());
        }
        match self.absolute(src).filter(|_| self.markdown) {
            Some(u) => (format!("![{title}]({u})"), ()),
            None => (format!("[{title}]"), ()),
        }
    }

    fn header_prefix(&self, level: usize) -> String {
        if self.markdown {
            "#".repeat(level) + " "
        } else {
            String::new()
        }
    }

    fn quote_prefix(&self) -> String {
        "> ".into()
    }

    fn unordered_item_prefix(&self) -> String {
        "* ".into()
    }

    fn ordered_item_prefix(&self, i: i64) -> String {
        format!("{i}. ")
    }

    fn make_subblock_decorator(&self) -> Self {
        Decorator {
            markdown: self.markdown,
            base: self.base.clone(),
            links: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;

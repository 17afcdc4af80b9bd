// The dashboard's script: served from /ui/app.js (the Content-Security-Policy allows no
// inline script). It builds every element with textContent, never innerHTML, so nothing a
// server or client names can become markup.
"use strict";

const csrf = document.querySelector('meta[name="openpact-csrf"]').content;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells, cls) {
  const tr = el("tr", null, cls);
  for (const c of cells) {
    const td = typeof c === "object" && c !== null ? c : el("td", c);
    tr.appendChild(td);
  }
  return tr;
}

async function getJson(url) {
  const r = await fetch(url, { credentials: "same-origin" });
  if (r.status === 401) { document.body.replaceChildren(el("p", "Logged out: open a new login link.")); throw new Error("logged out"); }
  if (!r.ok) throw new Error(url + ": " + r.status);
  return r.json();
}

// The sandbox column: how it runs, and the known-servers profile when one applies.
function sandboxOf(s) {
  const sb = s.sandbox;
  if (!sb) return "";
  const profile = sb.known ? "known (" + sb.known.name + ")" : sb.profile ? "default" : "";
  return sb.mode + (sb.mode === "enforced" || sb.enforced ? "" : " (not enforced)") + (profile ? " · " + profile : "");
}

let picked = null;

function detail(s) {
  const d = document.getElementById("server-detail");
  d.replaceChildren();
  if (!s) return;
  d.appendChild(el("h3", s.name));
  if (s.reason) d.appendChild(el("p", s.reason, "failed"));
  if (s.lastError) d.appendChild(el("p", "last error: " + s.lastError, "error"));
  d.appendChild(el("h4", "Sandbox"));
  d.appendChild(el("pre", (s.sandboxLines || []).join("\n") || "none (a remote server)"));
  if ((s.refusals || []).length) {
    d.appendChild(el("h4", "Refused lately"));
    const ul = el("ul");
    for (const r of s.refusals) ul.appendChild(el("li", (r.at || "") + " " + (r.kind || "") + " " + (r.what || "") + (r.fix ? " — " + r.fix : "")));
    d.appendChild(ul);
  }
  if ((s.stderr || []).length) {
    d.appendChild(el("h4", "Last stderr lines"));
    d.appendChild(el("pre", s.stderr.join("\n")));
  }
}

async function loadServers() {
  const data = await getJson("/ui/api/servers");
  const body = document.querySelector("#servers tbody");
  body.replaceChildren();
  for (const s of data.servers) {
    const tr = row([s.name, el("td", s.state, s.state), s.protocolVersion || "", sandboxOf(s), s.tools ?? "", s.restarts], picked === s.name ? "pick picked" : "pick");
    tr.dataset.server = s.name;
    tr.addEventListener("click", () => {
      picked = s.name;
      for (const other of body.children) other.classList.toggle("picked", other === tr);
      detail(s);
    });
    body.appendChild(tr);
    if (picked === s.name) detail(s);
  }
  const reload = document.getElementById("reload");
  const view = document.getElementById("reload-view");
  if (data.reload) {
    const r = data.reload;
    const notes = (r.warnings || []).concat((r.needsRestart || []).map((s) => s + " changed: applies when openpact restarts"));
    reload.textContent = "last reload " + r.at + ": " + (r.applied ? "applied" : "NOT applied");
    // A failed reload, or one with something to say, is shown in full: the hub serves on
    // with its last good config, and the page is where one looks.
    view.hidden = r.applied && notes.length === 0;
    view.className = r.applied ? "" : "failed";
    document.getElementById("reload-title").textContent = r.applied ? "Last reload (" + r.at + ")" : "The last reload was not applied (" + r.at + "): the hub serves its last good config";
    document.getElementById("reload-message").textContent = r.message;
    const ul = document.getElementById("reload-notes");
    ul.replaceChildren();
    for (const n of notes) ul.appendChild(el("li", n));
  }
}

let searching = 0;
async function search(q) {
  const mine = ++searching;
  const list = document.getElementById("results");
  if (!q.trim()) { list.replaceChildren(); return; }
  const data = await getJson("/ui/api/tools?q=" + encodeURIComponent(q));
  if (mine !== searching) return;
  list.replaceChildren();
  for (const t of data.tools) {
    const li = el("li");
    li.appendChild(el("span", t.name, "name"));
    li.appendChild(el("div", t.description || "", "desc"));
    list.appendChild(li);
  }
  if (!data.tools.length) list.appendChild(el("li", "No tool matches."));
}

// "always" and "never" are remembered, so they are offered only where an answer can be.
const DECISIONS = [["always", "Always allow"], ["once", "Allow once"], ["deny", "Deny"], ["never", "Always deny"]];

async function decide(id, decision, li) {
  for (const b of li.querySelectorAll("button")) b.disabled = true;
  const r = await fetch("/ui/api/prompts/" + encodeURIComponent(id), {
    method: "POST",
    credentials: "same-origin",
    headers: { "x-openpact-csrf": csrf, "content-type": "application/json" },
    body: JSON.stringify({ decision }),
  });
  if (!r.ok) li.appendChild(el("p", (await r.text()).trim(), "error"));
}

function prompts(list) {
  const view = document.getElementById("prompts-view");
  const ul = document.getElementById("prompts");
  ul.replaceChildren();
  view.hidden = list.length === 0;
  document.title = list.length ? "(" + list.length + ") openpact" : "openpact";
  for (const p of list) {
    const li = el("li");
    li.dataset.prompt = p.id;
    const head = el("p");
    head.appendChild(el("strong", p.kind === "host" ? "server " + p.server + " wants to reach " + p.name : p.kind + " " + p.name));
    head.appendChild(el("span", " asked by " + (p.client || "a client") + ", waits until " + p.until.replace(/^.*T/, "").replace(/Z$/, " UTC"), "when"));
    li.appendChild(head);
    if (p.description) li.appendChild(el("p", p.description, "desc"));
    if (p.arguments && p.arguments !== "{}") li.appendChild(el("pre", p.arguments));
    if (p.why) li.appendChild(el("p", p.why, "why"));
    const buttons = el("div", null, "answers");
    for (const [decision, label] of DECISIONS) {
      if ((decision === "always" || decision === "never") && !p.rememberable) continue;
      const b = el("button", label, decision);
      b.type = "button";
      b.dataset.answer = decision;
      b.addEventListener("click", () => { decide(p.id, decision, li).catch(() => {}); });
      buttons.appendChild(b);
    }
    li.appendChild(buttons);
    ul.appendChild(li);
  }
}

function live() {
  const state = document.getElementById("live");
  const source = new EventSource("/ui/api/events");
  source.addEventListener("open", () => { state.textContent = "live"; state.className = "on"; });
  // The browser retries on its own; a hub that stopped (a shared hub leaves when no editor
  // window is left) or restarted (its logins are gone) needs a new login link.
  source.addEventListener("error", () => { state.textContent = "offline: the hub stopped or restarted? `openpact ui` gives a new link"; state.className = "off"; });
  source.addEventListener("prompts", (e) => { prompts(JSON.parse(e.data)); });
  source.addEventListener("call", (e) => {
    const c = JSON.parse(e.data);
    const body = document.querySelector("#calls tbody");
    const time = (c.time || "").replace(/^.*T/, "").replace(/Z$/, "");
    const outcome = c.error ? c.outcome + ": " + c.error : c.outcome;
    body.prepend(row([time, c.client, c.target, el("td", c.decision, c.decision), el("td", outcome, c.outcome), c.cache, c.durationMs]));
    while (body.children.length > 200) body.lastChild.remove();
  });
}

document.getElementById("search").addEventListener("input", (e) => { search(e.target.value).catch(() => {}); });
document.getElementById("logout").addEventListener("click", async () => {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin", headers: { "x-openpact-csrf": csrf } });
  document.body.replaceChildren(el("p", "Logged out."));
});

loadServers().catch(() => {});
setInterval(() => { loadServers().catch(() => {}); }, 2000);
live();

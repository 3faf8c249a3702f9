//! The HTML pages. Every value that comes from a board goes through [`escape`] (text and quoted
//! attributes alike) or [`url_component`] (inside an `href`); the pages carry no inline script or
//! style, so the Content-Security-Policy can forbid both.
//!
//! Unless the server is read-only the board and task pages carry plain forms (no drag and drop,
//! no script needed; every control reachable with the keyboard) that `POST` to `/act/VERB`, each
//! with the session's CSRF token in a hidden `csrf` field.

use std::fmt::Write as _;

use crate::view::{BoardView, CardView, CronView, HealthView, TaskLink, TaskView};

pub use crate::html::escape;

/// Percent-encodes `text` for a URL path segment or query value (unreserved characters stay).
pub fn url_component(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, UNRESERVED).to_string()
}

/// What a link writes as is: RFC 3986's unreserved characters; everything else is `%XX`.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `90` → `1m`, `7200` → `2h`: a short age for cards.
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The board filter the page was asked for (`?assignee=&q=&archived=1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoardFilter {
    pub assignee: Option<String>,
    pub text: Option<String>,
    pub archived: bool,
}

impl BoardFilter {
    /// True when `card` passes: same assignee (ignoring case), and `text` found (ignoring case)
    /// in its id, title, body, assignee or block reason.
    pub fn matches(&self, card: &CardView) -> bool {
        if let Some(want) = &self.assignee {
            let have = card.assignee.as_deref().unwrap_or("");
            if !have.eq_ignore_ascii_case(want.trim()) {
                return false;
            }
        }
        if let Some(text) = &self.text {
            let needle = text.to_lowercase();
            let hay = [
                Some(card.id.as_str()),
                Some(card.title.as_str()),
                card.body.as_deref(),
                card.assignee.as_deref(),
                card.block_reason.as_deref(),
            ];
            if !hay
                .iter()
                .flatten()
                .any(|h| h.to_lowercase().contains(&needle))
            {
                return false;
            }
        }
        true
    }
}

fn task_href(slug: &str, id: &str) -> String {
    format!("/task/{}?board={}", url_component(id), url_component(slug))
}

/// The page frame: head with the external script and stylesheet, the navigation, `main`.
fn frame(title: &str, board: Option<&str>, task: Option<&str>, header: &str, main: &str) -> String {
    let mut out = String::with_capacity(main.len() + 2048);
    out.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    let _ = write!(out, "<title>{} · kanban</title>", escape(title));
    out.push_str("<link rel=\"stylesheet\" href=\"/assets/app.css\">");
    out.push_str("<script src=\"/assets/app.js\" defer></script></head>\n<body");
    if let Some(b) = board {
        let _ = write!(out, " data-board=\"{}\"", escape(b));
    }
    if let Some(t) = task {
        let _ = write!(out, " data-task=\"{}\"", escape(t));
    }
    out.push_str("><header><nav>");
    let board_q = board
        .map(|b| format!("?board={}", url_component(b)))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<a href=\"/{board_q}\">board</a> <a href=\"/cron\">cron</a> <a href=\"/health\">health</a>"
    );
    out.push_str(" <span id=\"live\" class=\"live\" title=\"live updates\"></span></nav>");
    out.push_str(header);
    out.push_str("</header>\n<main id=\"content\">");
    out.push_str(main);
    out.push_str("</main></body></html>\n");
    out
}

fn opt(value: Option<&str>) -> String {
    value.map(escape).unwrap_or_else(|| "—".to_owned())
}

fn when(now: i64, at: Option<i64>) -> String {
    match at {
        Some(t) => format!("{} ago", age(now - t)),
        None => "—".to_owned(),
    }
}

/// The opening of a form posting action `verb` of board `slug`, with the CSRF field and, for a
/// task's action, its id.
fn form_open(out: &mut String, slug: &str, verb: &str, csrf: &str, id: Option<&str>, class: &str) {
    let _ = write!(
        out,
        "<form class=\"act {class}\" method=\"post\" action=\"/act/{verb}?board={board}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">",
        board = url_component(slug),
        csrf = escape(csrf),
    );
    if let Some(id) = id {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"id\" value=\"{}\">",
            escape(id)
        );
    }
}

/// A form of one button (`label`) posting `verb` for task `id`.
fn button_form(out: &mut String, slug: &str, verb: &str, csrf: &str, id: &str, label: &str) {
    form_open(out, slug, verb, csrf, Some(id), verb);
    let _ = write!(
        out,
        "<button type=\"submit\" name=\"do\" value=\"{verb}\">{label}</button></form>"
    );
}

/// The one-button actions a card offers for its status.
fn card_actions(out: &mut String, slug: &str, csrf: &str, card: &CardView) {
    out.push_str("<div class=\"card-actions\">");
    let status = card.status.as_str();
    if matches!(status, "triage" | "todo" | "blocked") {
        button_form(out, slug, "promote", csrf, &card.id, "promote");
    }
    if matches!(status, "blocked" | "scheduled") {
        button_form(out, slug, "unblock", csrf, &card.id, "unblock");
    }
    if status == "running" {
        button_form(out, slug, "reclaim", csrf, &card.id, "reclaim");
    }
    if status != "archived" {
        button_form(out, slug, "archive", csrf, &card.id, "archive");
    }
    out.push_str("</div>");
}

fn card_html(out: &mut String, slug: &str, now: i64, card: &CardView, csrf: Option<&str>) {
    let _ = write!(
        out,
        "<article class=\"card\" data-task=\"{id}\" data-status=\"{status}\">\
         <a class=\"title\" href=\"{href}\">{title}</a><div class=\"meta\">\
         <span class=\"id\">{id}</span> <span class=\"assignee\">{assignee}</span> \
         <span class=\"priority\">p{priority}</span> <span class=\"age\">{age}</span> \
         <span class=\"attempts\">{attempts} run{s}</span>",
        id = escape(&card.id),
        status = escape(&card.status),
        href = escape(&task_href(slug, &card.id)),
        title = escape(&card.title),
        assignee = card
            .assignee
            .as_deref()
            .map(|a| format!("@{}", escape(a)))
            .unwrap_or_else(|| "unassigned".to_owned()),
        priority = card.priority,
        age = age(now - card.created_at),
        attempts = card.attempts,
        s = if card.attempts == 1 { "" } else { "s" },
    );
    if card.status == "running" {
        let _ = write!(
            out,
            " <span class=\"heartbeat\">♥ {}</span>",
            when(now, card.last_heartbeat_at.or(card.started_at))
        );
        if card.stale {
            out.push_str(" <span class=\"stale\">stale</span>");
        }
    }
    out.push_str("</div>");
    if let Some(reason) = &card.block_reason {
        let _ = write!(out, "<p class=\"blocked-reason\">{}</p>", escape(reason));
    }
    badges(out, &card.diagnostics);
    if let Some(csrf) = csrf {
        card_actions(out, slug, csrf, card);
    }
    out.push_str("</article>");
}

/// A card's diagnostics as badges: the rule's title, colored by severity, its detail and
/// suggested command on hover (`title`).
fn badges(out: &mut String, diagnostics: &[crate::view::DiagnosticView]) {
    if diagnostics.is_empty() {
        return;
    }
    out.push_str("<div class=\"badges\">");
    for d in diagnostics {
        let hint = match d.commands.first() {
            Some(c) => format!("{}: {} — {}", d.severity, d.detail, c),
            None => format!("{}: {}", d.severity, d.detail),
        };
        let _ = write!(
            out,
            "<span class=\"badge sev-{sev}\" data-kind=\"{kind}\" title=\"{hint}\">{title}</span>",
            sev = escape(&d.severity),
            kind = escape(&d.kind),
            hint = escape(&hint),
            title = escape(&d.title),
        );
    }
    out.push_str("</div>");
}

/// The task page's diagnostics: each with its detail and suggested commands.
fn diagnostics_section(out: &mut String, diagnostics: &[crate::view::DiagnosticView]) {
    if diagnostics.is_empty() {
        return;
    }
    out.push_str("<section class=\"diagnostics\"><h2>diagnostics</h2><ul>");
    for d in diagnostics {
        let _ = write!(
            out,
            "<li class=\"diagnostic\" data-kind=\"{kind}\"><span class=\"badge sev-{sev}\">{sev}</span> \
             <strong>{title}</strong> <span class=\"detail\">{detail}</span>",
            kind = escape(&d.kind),
            sev = escape(&d.severity),
            title = escape(&d.title),
            detail = escape(&d.detail),
        );
        for c in &d.commands {
            let _ = write!(out, " <code>{}</code>", escape(c));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul></section>");
}

/// The board page's line at a glance: the dispatcher (running, its last tick) and the oldest
/// ready task's age; the health page has the rest.
fn glance(out: &mut String, view: &BoardView) {
    let dispatcher = match (view.dispatcher_running, view.last_tick_at) {
        (None, _) => "dispatcher: not recorded on this board".to_owned(),
        (Some(true), Some(t)) => format!("dispatcher running, last tick {} ago", age(view.now - t)),
        (Some(_), Some(t)) => format!(
            "no dispatcher running (last tick {} ago)",
            age(view.now - t)
        ),
        (Some(_), None) => "no dispatcher running (none ever ticked)".to_owned(),
    };
    let state = if view.dispatcher_running == Some(true) {
        "running"
    } else {
        "not-running"
    };
    let _ = write!(
        out,
        "<p class=\"glance\"><span class=\"dispatcher {state}\">{dispatcher}</span> · oldest ready \
         task: <span class=\"oldest-ready\">{oldest}</span> · <a href=\"/health?board={board}\">health</a></p>",
        oldest = view
            .oldest_ready_age_seconds
            .map(age)
            .unwrap_or_else(|| "none ready".to_owned()),
        board = url_component(&view.slug),
    );
}

/// The board page's form that creates a task.
fn create_form(out: &mut String, slug: &str, csrf: &str) {
    out.push_str("<details class=\"new-task\"><summary>new task</summary>");
    form_open(out, slug, "create", csrf, None, "create");
    out.push_str(
        "<label>title <input name=\"title\" required maxlength=\"1024\"></label> \
         <label>assignee <input name=\"assignee\" maxlength=\"1024\"></label> \
         <label>priority <input name=\"priority\" type=\"number\" value=\"0\"></label> \
         <label><input type=\"checkbox\" name=\"triage\" value=\"1\"> triage</label>\
         <label class=\"wide\">body <textarea name=\"body\" rows=\"3\"></textarea></label>\
         <button type=\"submit\">create</button></form></details>",
    );
}

/// Cards shown per column; the rest are counted ("N more"), so a 10 000-task board stays a page
/// a browser re-renders quickly on every live update.
pub const COLUMN_LIMIT: usize = 200;

/// The board page: the filter form, then one column per status (at most [`COLUMN_LIMIT`] cards
/// each, in board order: priority, then age).
/// `csrf` is the session's token when the page carries forms (`None`: read-only).
pub fn board_page(
    view: &BoardView,
    filter: &BoardFilter,
    boards: &[String],
    csrf: Option<&str>,
) -> String {
    let mut header = String::new();
    if boards.len() > 1 {
        header.push_str("<nav class=\"boards\">");
        for b in boards {
            let class = if *b == view.slug {
                " class=\"current\""
            } else {
                ""
            };
            let _ = write!(
                header,
                "<a{class} href=\"/?board={}\">{}</a> ",
                url_component(b),
                escape(b)
            );
        }
        header.push_str("</nav>");
    }
    let _ = write!(
        header,
        "<form class=\"filter\" method=\"get\" action=\"/\">\
         <input type=\"hidden\" name=\"board\" value=\"{board}\">\
         <input name=\"assignee\" placeholder=\"assignee\" value=\"{assignee}\">\
         <input name=\"q\" placeholder=\"text\" value=\"{q}\">\
         <label><input type=\"checkbox\" name=\"archived\" value=\"1\"{checked}> archived</label>\
         <button type=\"submit\">filter</button></form>",
        board = escape(&view.slug),
        assignee = escape(filter.assignee.as_deref().unwrap_or("")),
        q = escape(filter.text.as_deref().unwrap_or("")),
        checked = if filter.archived { " checked" } else { "" },
    );
    if let Some(csrf) = csrf {
        create_form(&mut header, &view.slug, csrf);
    }
    let mut main = String::with_capacity(view.cards.len() * 400 + 1024);
    let _ = write!(main, "<h1>board {}</h1>", escape(&view.slug));
    glance(&mut main, view);
    main.push_str("<div class=\"board\">");
    for status in &view.statuses {
        if status == "archived" && !filter.archived {
            continue;
        }
        let cards: Vec<&CardView> = view
            .cards
            .iter()
            .filter(|c| &c.status == status && filter.matches(c))
            .collect();
        // A page read column by column says how many cards each column has in all.
        let total = match &view.column_totals {
            Some(totals) if filter.assignee.is_none() && filter.text.is_none() => {
                totals.get(status).copied().unwrap_or(0).max(cards.len())
            }
            _ => cards.len(),
        };
        let _ = write!(
            main,
            "<section class=\"column\" data-status=\"{s}\"><h2>{s} <span class=\"count\">{n}</span></h2>",
            s = escape(status),
            n = total
        );
        let shown = cards.len().min(COLUMN_LIMIT);
        for card in cards.iter().take(COLUMN_LIMIT) {
            card_html(&mut main, &view.slug, view.now, card, csrf);
        }
        if total > shown {
            let _ = write!(
                main,
                "<p class=\"more\">{} more; narrow with the filter</p>",
                total - shown
            );
        }
        main.push_str("</section>");
    }
    main.push_str("</div>");
    frame(&view.slug, Some(&view.slug), None, &header, &main)
}

fn links(out: &mut String, slug: &str, title: &str, items: &[TaskLink]) {
    let _ = write!(out, "<h2>{title}</h2>");
    if items.is_empty() {
        out.push_str("<p class=\"none\">none</p>");
        return;
    }
    out.push_str("<ul class=\"links\">");
    for l in items {
        let _ = write!(
            out,
            "<li><a href=\"{}\">{}</a> <span class=\"status\">{}</span> <span class=\"id\">{}</span></li>",
            escape(&task_href(slug, &l.id)),
            escape(&l.title),
            escape(&l.status),
            escape(&l.id)
        );
    }
    out.push_str("</ul>");
}

/// A form of a reason (optional unless `required`) and a button.
fn reason_form(out: &mut String, slug: &str, verb: &str, csrf: &str, id: &str, required: bool) {
    form_open(out, slug, verb, csrf, Some(id), verb);
    let _ = write!(
        out,
        "<label>reason <input name=\"reason\" maxlength=\"1024\"{}></label> \
         <button type=\"submit\">{verb}</button></form>",
        if required { " required" } else { "" }
    );
}

/// The task page's actions for the task's status: moves, reassignment, comment, attachment,
/// and decomposition of a triage task.
fn task_actions(out: &mut String, view: &TaskView, csrf: &str) {
    let slug = view.slug.as_str();
    let id = view.card.id.as_str();
    let status = view.card.status.as_str();
    out.push_str("<section class=\"actions\"><h2>actions</h2><div class=\"action-row\">");
    if matches!(status, "triage" | "todo" | "blocked") {
        button_form(out, slug, "promote", csrf, id, "promote");
    }
    if status == "running" {
        reason_form(out, slug, "reclaim", csrf, id, false);
    }
    if matches!(status, "blocked" | "scheduled") {
        reason_form(out, slug, "unblock", csrf, id, false);
    }
    if matches!(status, "ready" | "running") {
        reason_form(out, slug, "block", csrf, id, true);
    }
    if status == "done" {
        reason_form(out, slug, "reopen", csrf, id, false);
    }
    if matches!(
        status,
        "todo" | "ready" | "blocked" | "running" | "scheduled"
    ) {
        form_open(out, slug, "schedule", csrf, Some(id), "schedule");
        out.push_str(
            "<label>in or at <input name=\"when\" required placeholder=\"30m, 2h, 2026-12-02T08:00:00Z\"></label> \
             <label>reason <input name=\"reason\" maxlength=\"1024\"></label> \
             <button type=\"submit\">schedule</button></form>",
        );
    }
    if status != "archived" {
        form_open(out, slug, "reassign", csrf, Some(id), "reassign");
        out.push_str(
            "<label>profile <input name=\"profile\" required maxlength=\"1024\"></label> \
             <label><input type=\"checkbox\" name=\"reclaim\" value=\"1\"> reclaim first</label> \
             <button type=\"submit\">reassign</button></form>",
        );
        button_form(out, slug, "archive", csrf, id, "archive");
    }
    out.push_str("</div>");
    if status == "triage" {
        form_open(out, slug, "decompose", csrf, Some(id), "decompose");
        out.push_str(
            "<label class=\"wide\">children (JSON list: [{\"title\": \"…\", \"parents\": [0]}]) \
             <textarea name=\"children\" rows=\"4\" required></textarea></label>\
             <label>root assignee <input name=\"root_assignee\" maxlength=\"1024\"></label> \
             <label><input type=\"checkbox\" name=\"no_promote\" value=\"1\"> leave children in todo</label> \
             <button type=\"submit\">decompose</button></form>",
        );
    }
    form_open(out, slug, "comment", csrf, Some(id), "comment");
    out.push_str(
        "<label class=\"wide\">comment <textarea name=\"body\" rows=\"3\" required></textarea></label>\
         <button type=\"submit\">comment</button></form>",
    );
    let _ = write!(
        out,
        "<form class=\"act attach\" method=\"post\" enctype=\"multipart/form-data\" \
         action=\"/act/attach?board={board}\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"id\" value=\"{id}\">\
         <label>file <input type=\"file\" name=\"file\" required></label> \
         <button type=\"submit\">attach</button></form>",
        board = url_component(slug),
        csrf = escape(csrf),
        id = escape(id),
    );
    out.push_str("</section>");
}

/// The page after a write done without a redirect-following client: what happened, and a link.
pub fn done_page(message: &str, location: &str) -> String {
    let main = format!(
        "<h1>done</h1><p class=\"done\">{}</p><p><a href=\"{}\">continue</a></p>",
        escape(message),
        escape(location)
    );
    frame("done", None, None, "", &main)
}

/// The task page: head, actions (`csrf`: the session's token; `None` when read-only), body,
/// result, links, runs, comments, log tail, events.
pub fn task_page(view: &TaskView, csrf: Option<&str>) -> String {
    let card = &view.card;
    let now = view.now;
    let mut main = String::with_capacity(8192);
    let _ = write!(
        main,
        "<h1 class=\"task-title\">{title}</h1><p class=\"task-meta\"><span class=\"id\">{id}</span> \
         <span class=\"status\" id=\"status\">{status}</span> <span class=\"assignee\">{assignee}</span> \
         <span class=\"priority\">p{priority}</span> created {created} · {attempts} run(s)",
        title = escape(&card.title),
        id = escape(&card.id),
        status = escape(&card.status),
        assignee = card
            .assignee
            .as_deref()
            .map(|a| format!("@{}", escape(a)))
            .unwrap_or_else(|| "unassigned".to_owned()),
        priority = card.priority,
        created = when(now, Some(card.created_at)),
        attempts = card.attempts,
    );
    if card.status == "running" {
        let _ = write!(
            main,
            " · heartbeat {}",
            when(now, card.last_heartbeat_at.or(card.started_at))
        );
        if card.stale {
            main.push_str(" <span class=\"stale\">stale</span>");
        }
    }
    main.push_str("</p>");
    if let Some(reason) = &card.block_reason {
        let _ = write!(main, "<p class=\"blocked-reason\">{}</p>", escape(reason));
    }
    let _ = write!(
        main,
        "<p class=\"workspace\">workspace {}</p>",
        escape(&view.workspace)
    );
    if let Some(kept) = &view.workspace_kept {
        let _ = write!(
            main,
            "<p class=\"workspace-kept\">workspace kept: {}</p>",
            escape(kept)
        );
    }
    diagnostics_section(&mut main, &card.diagnostics);
    if let Some(csrf) = csrf {
        task_actions(&mut main, view, csrf);
    }
    main.push_str("<h2>body</h2>");
    let _ = write!(
        main,
        "<pre class=\"body\">{}</pre>",
        opt(card.body.as_deref())
    );
    if let Some(result) = &view.result {
        let _ = write!(
            main,
            "<h2>result</h2><pre class=\"result\">{}</pre>",
            escape(result)
        );
    }
    links(&mut main, &view.slug, "parents", &view.parents);
    links(&mut main, &view.slug, "children", &view.children);

    main.push_str("<h2>runs</h2>");
    if view.runs.is_empty() {
        main.push_str("<p class=\"none\">none</p>");
    } else {
        main.push_str(
            "<table class=\"runs\"><thead><tr><th>run</th><th>profile</th><th>status</th>\
             <th>outcome</th><th>exit</th><th>duration</th><th>summary / error</th></tr></thead><tbody>",
        );
        for r in &view.runs {
            let duration = age(r.ended_at.unwrap_or(now) - r.started_at);
            let open = if r.ended_at.is_none() { " (open)" } else { "" };
            let note = r.error.as_deref().or(r.summary.as_deref());
            let _ = write!(
                main,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{duration}{open}</td><td>{}</td></tr>",
                r.id,
                opt(r.profile.as_deref()),
                escape(&r.status),
                opt(r.outcome.as_deref()),
                opt(r.exit_class.as_deref()),
                opt(note),
            );
        }
        main.push_str("</tbody></table>");
        main.push_str(&crate::chart::run_timeline(&view.runs, now));
    }

    main.push_str("<h2>comments</h2>");
    if view.comments.is_empty() {
        main.push_str("<p class=\"none\">none</p>");
    }
    for c in &view.comments {
        let _ = write!(
            main,
            "<div class=\"comment\"><p class=\"comment-head\"><span class=\"author\">{}</span> {}</p><pre>{}</pre></div>",
            escape(&c.author),
            when(now, Some(c.created_at)),
            escape(&c.body)
        );
    }

    let live = if view.run_open {
        " <span class=\"following\">following the open run</span>"
    } else {
        ""
    };
    let _ = write!(main, "<h2>log{live}</h2>");
    match &view.log_tail {
        Some(tail) => {
            let _ = write!(main, "<pre id=\"log\" class=\"log\">{}</pre>", escape(tail));
        }
        None => main.push_str("<p class=\"none\">no log</p>"),
    }

    main.push_str("<h2>events</h2><table class=\"events\"><tbody>");
    for e in &view.events {
        let _ = write!(
            main,
            "<tr><td>{}</td><td>{}</td><td class=\"kind\">{}</td><td>{}</td><td><code>{}</code></td></tr>",
            e.id,
            when(now, Some(e.created_at)),
            escape(&e.kind),
            e.run_id.map(|r| format!("run {r}")).unwrap_or_default(),
            opt(e.payload.as_deref()),
        );
    }
    main.push_str("</tbody></table>");
    frame(&card.title, Some(&view.slug), Some(&card.id), "", &main)
}

/// The cron page.
pub fn cron_page(view: &CronView, board: Option<&str>) -> String {
    let now = view.now;
    let mut main = String::from("<h1>cron</h1>");
    if view.jobs.is_empty() {
        main.push_str("<p class=\"none\">no jobs</p>");
    } else {
        main.push_str(
            "<table class=\"jobs\"><thead><tr><th>job</th><th>name</th><th>schedule</th><th>profile</th>\
             <th>state</th><th>next run</th><th>last run</th><th>last status</th><th>last error</th></tr></thead><tbody>",
        );
        for j in &view.jobs {
            let next = match j.next_run_at {
                Some(t) if t >= now => format!("in {}", age(t - now)),
                Some(t) => format!("due {} ago", age(now - t)),
                None => "—".to_owned(),
            };
            let _ = write!(
                main,
                "<tr><td class=\"id\">{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>\
                 <td>{next}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&j.id),
                escape(&j.name),
                escape(&j.schedule),
                escape(&j.profile),
                escape(&j.state),
                when(now, j.last_run_at),
                opt(j.last_status.as_deref()),
                opt(j.last_error.as_deref()),
            );
        }
        main.push_str("</tbody></table>");
    }
    frame("cron", board, None, "", &main)
}

/// The health page.
pub fn health_page(view: &HealthView, board: Option<&str>) -> String {
    let now = view.now;
    let mut main = String::from("<h1>health</h1>");
    for b in &view.boards {
        let _ = write!(
            main,
            "<section class=\"health\" data-board=\"{slug}\"><h2>board {slug}</h2>\
             <p>spawn budget: <span class=\"budget\">{running} / {max}</span> workers · dispatcher's last tick: {tick}</p>",
            slug = escape(&b.slug),
            running = b.running,
            max = b.max_spawn,
            tick = match b.last_tick_at {
                Some(t) => format!("{} ago", age(now - t)),
                None => "not recorded".to_owned(),
            },
        );
        let _ = write!(
            main,
            "<p class=\"glance\"><span class=\"dispatcher {state}\">dispatcher {state}</span> · \
             oldest ready task: <span class=\"oldest-ready\">{oldest}</span> · running workers: {workers}</p>",
            state = if b.dispatcher_running {
                "running"
            } else {
                "not-running"
            },
            oldest = b
                .oldest_ready_age_seconds
                .map(age)
                .unwrap_or_else(|| "none ready".to_owned()),
            workers = if b.workers_by_profile.is_empty() {
                "none".to_owned()
            } else {
                b.workers_by_profile
                    .iter()
                    .map(|(p, n)| format!("<span class=\"profile\">{}</span> {n}", escape(p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        main.push_str("<div class=\"charts\">");
        main.push_str(&crate::chart::activity("24 h", &b.day));
        main.push_str(&crate::chart::activity("7 d", &b.week));
        main.push_str("</div>");
        if b.workers.is_empty() {
            main.push_str("<p class=\"none\">no live workers</p>");
        } else {
            main.push_str(
                "<table class=\"workers\"><thead><tr><th>task</th><th>pid</th><th>host</th><th>heartbeat</th></tr></thead><tbody>",
            );
            for w in &b.workers {
                let _ = write!(
                    main,
                    "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}{}</td></tr>",
                    escape(&task_href(&b.slug, &w.task_id)),
                    escape(&w.task_id),
                    w.pid
                        .map(|p| p.to_string())
                        .unwrap_or_else(|| "—".to_owned()),
                    opt(w.host.as_deref()),
                    when(now, w.last_heartbeat_at),
                    if w.stale {
                        " <span class=\"stale\">stale</span>"
                    } else {
                        ""
                    },
                );
            }
            main.push_str("</tbody></table>");
        }
        links(&mut main, &b.slug, "given up", &b.given_up);
        main.push_str("</section>");
    }
    frame("health", board, None, "", &main)
}

/// A plain error page (401, 404, 405, 500, 503).
pub fn error_page(status: u16, reason: &str, detail: &str) -> String {
    let main = format!(
        "<h1>{status} {}</h1><p class=\"error\">{}</p>",
        escape(reason),
        escape(detail)
    );
    frame(&format!("{status} {reason}"), None, None, "", &main)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(id: &str, status: &str, title: &str) -> CardView {
        CardView {
            id: id.to_owned(),
            title: title.to_owned(),
            status: status.to_owned(),
            ..CardView::default()
        }
    }

    #[test]
    fn escape_neutralises_markup_and_quotes() {
        assert_eq!(
            escape("<script>\"onload='x'&</textarea>"),
            "&lt;script&gt;&quot;onload=&#39;x&#39;&amp;&lt;/textarea&gt;"
        );
    }

    #[test]
    fn url_component_encodes_everything_but_unreserved() {
        assert_eq!(url_component("t_ab12"), "t_ab12");
        assert_eq!(url_component("a b/\"<"), "a%20b%2F%22%3C");
    }

    #[test]
    fn board_page_puts_cards_in_their_status_column_and_hides_archived() {
        let view = BoardView {
            slug: "default".to_owned(),
            now: 100,
            statuses: vec!["ready".into(), "done".into(), "archived".into()],
            cards: vec![
                card("t_1", "ready", "first"),
                card("t_2", "done", "<b>second</b>"),
                card("t_3", "archived", "old"),
            ],
            ..BoardView::default()
        };
        let html = board_page(
            &view,
            &BoardFilter::default(),
            &["default".to_owned()],
            None,
        );
        assert!(
            !html.contains("<form class=\"act"),
            "read-only pages have no forms"
        );
        let forms = board_page(&view, &BoardFilter::default(), &[], Some("tok\"en"));
        assert!(forms.contains("action=\"/act/create?board=default\""));
        assert!(forms.contains("action=\"/act/archive?board=default\""));
        assert!(forms.contains("name=\"csrf\" value=\"tok&quot;en\""));
        assert!(html.contains("data-status=\"ready\"><h2>ready <span class=\"count\">1</span>"));
        assert!(html.contains("&lt;b&gt;second&lt;/b&gt;"));
        assert!(!html.contains("<b>second"));
        assert!(!html.contains("t_3"));
        assert!(html.contains("href=\"/task/t_1?board=default\""));
        let many = BoardView {
            cards: (0..COLUMN_LIMIT + 5)
                .map(|i| card(&format!("t_{i}"), "ready", "x"))
                .collect(),
            ..view.clone()
        };
        let html = board_page(&many, &BoardFilter::default(), &[], None);
        assert_eq!(html.matches("<article").count(), COLUMN_LIMIT);
        assert!(html.contains(&format!(
            "<span class=\"count\">{}</span>",
            COLUMN_LIMIT + 5
        )));
        assert!(html.contains("5 more; narrow with the filter"));
        // A page read column by column: the totals count what was not read.
        let paged = BoardView {
            cards: vec![card("t_1", "ready", "first")],
            column_totals: Some([("ready".to_owned(), 7000)].into_iter().collect()),
            ..view.clone()
        };
        let html = board_page(&paged, &BoardFilter::default(), &[], None);
        assert!(html.contains("<span class=\"count\">7000</span>"));
        assert!(html.contains("6999 more; narrow with the filter"));
        let all = BoardFilter {
            archived: true,
            ..BoardFilter::default()
        };
        assert!(board_page(&view, &all, &[], None).contains("t_3"));
    }

    #[test]
    fn filter_matches_assignee_ignoring_case_and_text_anywhere() {
        let mut c = card("t_9", "ready", "Fix the parser");
        c.assignee = Some("coder".into());
        c.body = Some("see issue 42".into());
        let by = |assignee: Option<&str>, text: Option<&str>| BoardFilter {
            assignee: assignee.map(str::to_owned),
            text: text.map(str::to_owned),
            archived: false,
        };
        assert!(by(Some("Coder"), None).matches(&c));
        assert!(!by(Some("bot"), None).matches(&c));
        assert!(by(None, Some("PARSER")).matches(&c));
        assert!(by(None, Some("issue 42")).matches(&c));
        assert!(!by(Some("coder"), Some("nothing")).matches(&c));
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(90), "1m");
        assert_eq!(age(7200), "2h");
        assert_eq!(age(3 * 86_400), "3d");
        assert_eq!(age(-4), "0s");
    }
}

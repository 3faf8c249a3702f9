// kanban serve: live updates of the page. The server pushes a server-sent event when the board
// changes (`board`) or the log of an open run grows (`log`, data = task id); this script then
// fetches the same page again and swaps its <main>. It never polls: without an event it is idle.
// While a form of the page is being filled in (a field focused or changed) the swap waits, so a
// live update never throws away what someone is typing; the forms themselves need no script.
// Board values reach the DOM only through the server's escaped HTML, parsed by DOMParser (which
// runs no script) and moved into the page.
(function () {
  "use strict";
  var body = document.body;
  var board = body.getAttribute("data-board");
  var task = body.getAttribute("data-task");
  var live = document.getElementById("live");
  window.kanbanLive = { updates: 0, connected: false };
  if (!board || typeof EventSource === "undefined") {
    return;
  }
  var inFlight = false;
  var again = false;
  var held = false;

  function editing() {
    var content = document.getElementById("content");
    if (!content) {
      return false;
    }
    var active = document.activeElement;
    if (active && content.contains(active) && /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(active.tagName)) {
      return true;
    }
    var fields = content.querySelectorAll("input:not([type=hidden]), textarea");
    for (var i = 0; i < fields.length; i += 1) {
      var f = fields[i];
      var changed = f.type === "checkbox" ? f.checked !== f.defaultChecked : f.value !== f.defaultValue;
      if (changed) {
        return true;
      }
    }
    return false;
  }

  function release() {
    if (held && !editing()) {
      held = false;
      refresh();
    }
  }
  document.addEventListener("focusout", function () {
    window.setTimeout(release, 0);
  });
  document.addEventListener("input", function () {
    window.setTimeout(release, 0);
  });

  function refresh() {
    if (editing()) {
      held = true;
      return;
    }
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    again = false;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (text) {
        if (text !== null) {
          var doc = new DOMParser().parseFromString(text, "text/html");
          var fresh = doc.getElementById("content");
          var current = document.getElementById("content");
          if (fresh && current) {
            current.replaceWith(document.adoptNode(fresh));
            window.kanbanLive.updates += 1;
          }
        }
      })
      .catch(function () {})
      .then(function () {
        inFlight = false;
        if (again) {
          refresh();
        }
      });
  }

  var events = new EventSource("/events?board=" + encodeURIComponent(board));
  events.onopen = function () {
    // A change between this page's rendering and the stream's start has no event: catch up once.
    refresh();
    window.kanbanLive.connected = true;
    if (live) {
      live.className = "live on";
      live.textContent = "live";
    }
  };
  events.onerror = function () {
    window.kanbanLive.connected = false;
    if (live) {
      live.className = "live off";
      live.textContent = "reconnecting";
    }
  };
  events.addEventListener("board", refresh);
  events.addEventListener("log", function (event) {
    if (task && event.data === task) {
      refresh();
    }
  });
})();

// The sessions list stays in place while sessions change: rows the user loaded are never
// dropped or reordered. When a session changes, the server is asked how many sessions
// matching the same filters opened since the page was shown, and says so above the table
// ("3 new sessions, show"); "show" opens the first page again. A row already shown is
// redrawn where it stands (state, round, activity, outcome), cell by cell, so that the
// focus stays put and nothing is announced.
(function () {
  "use strict";
  const status = document.getElementById("connection");
  const table = document.getElementById("sessions");
  let retry = 500;
  let asking = null;
  let redrawing = null;
  const changed = new Set();
  // As many as the server takes in one ?ids= request.
  const BATCH = 100;

  function askForNews() {
    // A burst of entries (a whole round) asks once.
    if (asking) return;
    asking = setTimeout(() => {
      asking = null;
      const query = table.dataset.query;
      const url = "?" + (query ? query + "&" : "") + "since=" + table.dataset.newest;
      htmx.ajax("GET", url, { target: "#session-news", swap: "innerHTML" });
    }, 200);
  }
  function shownRow(sessionId) {
    return table.querySelector('tr[data-session="' + CSS.escape(sessionId) + '"]');
  }
  function swapRow(row, fresh) {
    // Only the cells that changed: the session's link, which never does, keeps its focus.
    Array.from(fresh.cells).forEach((cell, i) => {
      const old = row.cells[i];
      if (old && old.innerHTML !== cell.innerHTML) row.replaceChild(cell, old);
    });
    row.toggleAttribute("data-live", fresh.hasAttribute("data-live"));
  }
  function redraw(ids) {
    const url = "?ids=" + encodeURIComponent(ids.join(","));
    fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" })
      .then((response) => (response.ok ? response.text() : ""))
      .then((html) => {
        const parsed = document.createElement("template");
        parsed.innerHTML = html;
        parsed.content.querySelectorAll("tr[data-session]").forEach((fresh) => {
          const row = shownRow(fresh.dataset.session);
          if (row) swapRow(row, fresh);
        });
      })
      .catch(() => {}); // the next change or poll asks again
  }
  function rowChanged(sessionId) {
    // A burst of entries (a whole round) redraws a row once.
    if (!shownRow(sessionId)) return;
    changed.add(sessionId);
    if (redrawing) return;
    redrawing = setTimeout(() => {
      redrawing = null;
      const ids = Array.from(changed);
      changed.clear();
      for (let i = 0; i < ids.length; i += BATCH) redraw(ids.slice(i, i + BATCH));
    }, 200);
  }
  function onMessage(event) {
    askForNews();
    let news = null;
    try { news = JSON.parse(event.data); } catch (e) { return; }
    if (news && typeof news.session_id === "string") rowChanged(news.session_id);
  }
  function poll() {
    askForNews();
    table.querySelectorAll("tr[data-session][data-live]").forEach((row) => rowChanged(row.dataset.session));
  }
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + window.location.host + "/ws/sessions/");
    socket.onopen = () => { retry = 500; status.dataset.state = "live"; status.textContent = "live"; };
    socket.onmessage = onMessage;
    socket.onclose = () => {
      status.dataset.state = "reconnecting";
      status.textContent = "reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  // Sessions opened or moved only by the worker send no wake-up without a shared channel
  // layer: the sessions still running are redrawn on this beat too.
  setInterval(poll, 10000);
  connect();
})();

// The sessions list stays still while sessions change: rows the user loaded are never
// re-rendered. When a session changes, the server is asked how many sessions matching the
// same filters opened since the page was shown, and says so above the table ("3 new
// sessions, show"); "show" opens the first page again.
(function () {
  "use strict";
  const status = document.getElementById("connection");
  const table = document.getElementById("sessions");
  let retry = 500;
  let asking = null;

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
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + window.location.host + "/ws/sessions/");
    socket.onopen = () => { retry = 500; status.dataset.state = "live"; status.textContent = "live"; };
    socket.onmessage = askForNews;
    socket.onclose = () => {
      status.dataset.state = "reconnecting";
      status.textContent = "reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  // Sessions opened only by the worker send no wake-up without a shared channel layer.
  setInterval(askForNews, 10000);
  connect();
})();

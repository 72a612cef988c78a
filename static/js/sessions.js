// The sessions list stays current: a WebSocket says a visible session changed, and the first
// page is fetched again with the same filters, unless the operator paused updates.
(function () {
  "use strict";
  const pause = document.getElementById("pause");
  const status = document.getElementById("connection");
  const rows = document.getElementById("session-rows");
  let paused = false;
  let pending = false;
  let retry = 500;

  pause.addEventListener("click", () => {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    pause.textContent = paused ? "Resume live updates" : "Pause live updates";
    if (!paused && pending) refresh();
  });
  function refresh() {
    pending = false;
    delete pause.dataset.pending;
    const url = new URL(window.location.href);
    if (url.searchParams.has("before") || !rows) return;  // an older page stays as it is
    htmx.ajax("GET", url.pathname + url.search, { target: "#session-rows", swap: "innerHTML" });
  }
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + window.location.host + "/ws/sessions/");
    socket.onopen = () => { retry = 500; status.dataset.state = "live"; status.textContent = "live"; };
    socket.onmessage = () => {
      if (!paused) return refresh();
      pending = true;
      pause.dataset.pending = "true";  // shown as a hint that updates are waiting
    };
    socket.onclose = () => {
      status.dataset.state = "reconnecting";
      status.textContent = "reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  // Sessions moved only by the worker send no wake-up without a shared channel layer.
  setInterval(() => { if (paused) return; refresh(); }, 10000);
  connect();
})();

// The session page stays live: a WebSocket says when the log grew, the page then fetches its
// body again (so a reconnect catches up by seq), and verdicts are announced, not every tick.
(function () {
  "use strict";
  const body = document.getElementById("session-body");
  const status = document.getElementById("connection");
  const announcer = document.getElementById("announcer");
  if (!body) return;
  const sessionId = body.dataset.session;
  let chart = null;
  let retry = 500;

  function head() {
    const state = document.getElementById("session-state");
    return state ? Number(state.dataset.head) : 0;
  }
  function verdicts() {
    const state = document.getElementById("session-state");
    return state ? state.dataset.verdicts.split(";").filter(Boolean) : [];
  }
  function setStatus(state, text) {
    status.dataset.state = state;
    status.textContent = text;
  }
  function drawChart() {
    const canvas = document.getElementById("price-chart");
    const data = document.getElementById("chart-data");
    if (!canvas || !data || typeof Chart === "undefined") return;
    const series = JSON.parse(data.textContent);
    if (chart) chart.destroy();
    chart = new Chart(canvas, {
      type: "line",
      data: {
        labels: series.rounds.map((r) => "Round " + r),
        datasets: [
          { label: "Buyer", data: series.buyer, borderColor: "#2b6cb0", backgroundColor: "#2b6cb0" },
          { label: "Merchant", data: series.merchant, borderColor: "#c05621", backgroundColor: "rgba(192, 86, 33, 0.18)", fill: "-1" },
        ],
      },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 plugins: { legend: { position: "bottom" } } },
    });
  }
  let announced = verdicts();
  function refresh() {
    htmx.ajax("GET", window.location.pathname, { target: "#session-body", swap: "innerHTML" });
  }
  // After each swap has settled: redraw the chart on the new canvas, announce new verdicts.
  body.addEventListener("htmx:afterSettle", () => {
    drawChart();
    const now = verdicts();
    const fresh = now.filter((v) => !announced.includes(v));
    announced = now;
    if (fresh.length) {
      announcer.textContent = fresh.map((v) => {
        const [round, status, why] = v.split(":");
        return "Round " + round + ": " + status + " (" + why + ")";
      }).join(". ");
    }
  });
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + window.location.host + "/ws/sessions/" + encodeURIComponent(sessionId) + "/");
    socket.onopen = () => {
      retry = 500;
      setStatus("live", "live");
      refresh();  // catch up on whatever happened while disconnected
    };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.head_seq > head()) refresh();
    };
    socket.onclose = () => {
      setStatus("reconnecting", "reconnecting…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  // A wake-up can be lost (a worker's, without a shared channel layer): look at the head now
  // and then, and catch up the same way.
  const POLL_MS = 3000;
  setInterval(() => {
    fetch(window.location.pathname + "head/", { headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : null))
      .then((h) => { if (h && h.head_seq > head()) refresh(); })
      .catch(() => {});
  }, POLL_MS);
  document.addEventListener("DOMContentLoaded", drawChart);
  if (document.readyState !== "loading") drawChart();
  connect();
})();

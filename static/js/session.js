// The session page stays live: a WebSocket says when the log grew, the page then fetches its
// body again (so a reconnect catches up by seq), and verdicts are announced, not every tick.
// The status beside the title says "live" only while both hold: the session can still change
// and the socket is connected. An ended session says "ended" with a hollow dot (a handoff's
// attempts may still arrive over the socket, but the negotiation will not move).
(function () {
  "use strict";
  const body = document.getElementById("session-body");
  const status = document.getElementById("connection");
  const announcer = document.getElementById("announcer");
  if (!body) return;
  const sessionId = body.dataset.session;
  // The page's own address, not the location's: a refused redelivery answers with this page
  // at the redeliver URL, which serves no body and no head.
  const pageUrl = body.dataset.url;
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
  function ended() {
    const state = document.getElementById("session-state");
    return state ? state.dataset.ended === "true" : status.dataset.state === "closed";
  }
  let connected = false;
  function showStatus() {
    if (ended()) setStatus("closed", "ended");
    else if (navigator.onLine === false) setStatus("offline", "offline");
    else if (connected) setStatus("live", "live");
    else setStatus("reconnecting", "reconnecting…");
  }
  function setStatus(state, text) {
    if (status.dataset.state === state) return;
    status.dataset.state = state;
    status.textContent = text;
  }
  function drawChart() {
    const canvas = document.getElementById("price-chart");
    const data = document.getElementById("chart-data");
    if (!canvas || !data || typeof Chart === "undefined") return;
    const series = JSON.parse(data.textContent);
    if (chart) chart.destroy();
    // One round makes a line of two lone dots: side-by-side bars read as the two prices.
    const bars = series.rounds.length === 1;
    chart = new Chart(canvas, {
      type: bars ? "bar" : "line",
      data: {
        labels: series.rounds.map((r) => "Round " + r),
        datasets: [
          { label: "Buyer", data: series.buyer, borderColor: "#2b6cb0", backgroundColor: "#2b6cb0" },
          { label: "Merchant", data: series.merchant, borderColor: "#c05621",
            backgroundColor: bars ? "#c05621" : "rgba(192, 86, 33, 0.18)", fill: bars ? false : "-1" },
        ],
      },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 // A bar's height is its price only when the axis starts at zero.
                 scales: { y: { beginAtZero: bars, title: { display: true, text: "Price" } } },
                 plugins: { legend: { position: "bottom" } } },
    });
  }
  // A terms session's Pareto frontier after the reveals: buyer's utility across, merchant's up;
  // the agreement and the frontier's point nearest to it told apart by shape as well as colour.
  let frontier = null;
  function drawFrontier() {
    const canvas = document.getElementById("frontier-chart");
    const data = document.getElementById("frontier-data");
    if (frontier) { frontier.destroy(); frontier = null; }
    if (!canvas || !data || typeof Chart === "undefined") return;
    const found = JSON.parse(data.textContent);
    const style = getComputedStyle(canvas);
    const colour = (name) => style.getPropertyValue(name).trim();
    const datasets = [{ label: "Pareto frontier", data: found.frontier, showLine: true,
                        borderColor: colour("--accent"), backgroundColor: colour("--accent"),
                        pointRadius: 2 }];
    if (found.agreement) {
      datasets.push({ label: "Agreement", data: [found.agreement], pointStyle: "rectRot",
                      pointRadius: 8, borderColor: colour("--fg"), backgroundColor: colour("--warn") });
    }
    if (found.nearest) {
      datasets.push({ label: "Nearest point of the frontier", data: [found.nearest], pointStyle: "triangle",
                      pointRadius: 8, borderColor: colour("--fg"), backgroundColor: colour("--good") });
    }
    const axis = (text) => ({ min: 0, max: 1, title: { display: true, text: text, color: colour("--muted") },
                              ticks: { color: colour("--muted") }, grid: { color: colour("--line") } });
    frontier = new Chart(canvas, {
      type: "scatter",
      data: { datasets: datasets },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 scales: { x: axis("Buyer's utility"), y: axis("Merchant's utility") },
                 plugins: { legend: { position: "bottom", labels: { usePointStyle: true, color: colour("--fg") } } } },
    });
  }
  let announced = verdicts();
  function refresh() {
    htmx.ajax("GET", pageUrl, { target: "#session-body", swap: "innerHTML" });
  }
  // After each swap has settled: redraw the chart on the new canvas, announce new verdicts.
  body.addEventListener("htmx:afterSettle", () => {
    drawChart();
    drawFrontier();
    showStatus();  // the session may just have ended
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
      connected = true;
      showStatus();
      refresh();  // catch up on whatever happened while disconnected
    };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.head_seq > head()) refresh();
    };
    socket.onclose = () => {
      connected = false;
      showStatus();
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  // A wake-up can be lost (a worker's, without a shared channel layer): look at the head now
  // and then, and catch up the same way.
  const POLL_MS = 3000;
  setInterval(() => {
    fetch(pageUrl + "head/", { headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : null))
      .then((h) => { if (h && h.head_seq > head()) refresh(); })
      .catch(() => {});
  }, POLL_MS);
  // The idle time grows between entries, which bring a fresh body: count it on meanwhile, in
  // the units sessions_app.timeline.duration uses.
  function duration(ms) {
    if (ms < 59950) return (Math.max(ms, 0) / 1000).toFixed(1) + " s";
    const s = Math.round(ms / 1000);
    if (s >= 86400) return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
    if (s >= 3600) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    return Math.floor(s / 60) + " min " + (s % 60) + " s";
  }
  setInterval(() => {
    const idle = document.getElementById("idle");
    if (idle && !ended()) {
      idle.textContent = duration(Date.now() - Date.parse(idle.dataset.since)) + " since the last entry";
    }
  }, 1000);
  window.addEventListener("offline", showStatus);
  window.addEventListener("online", showStatus);
  function drawCharts() {
    drawChart();
    drawFrontier();
  }
  document.addEventListener("DOMContentLoaded", drawCharts);
  if (document.readyState !== "loading") drawCharts();
  connect();
})();

// The replay page steps through frames the server computed from the log (oanp.audit.replay) and
// embedded in the page, so a step costs no request. The slider, the previous and next links
// and the keys all end in show(k), which redraws what the server draws for ?step=k and puts
// k in the address, so the step on screen is the one a copied link opens.
(function () {
  "use strict";
  const data = document.getElementById("replay-frames");
  const slider = document.getElementById("id_step");
  if (!data || !slider) return;
  const frames = JSON.parse(data.textContent);
  const last = frames.length;
  const prev = document.getElementById("replay-prev");
  const next = document.getElementById("replay-next");
  const position = document.getElementById("replay-position");
  const announcer = document.getElementById("replay-announcer");
  // The submit button serves pages without script; here every change shows at once.
  document.getElementById("replay-go").hidden = true;
  let step = Number(slider.value);
  let chart = null;

  function at(frame, path) {
    return path.split(".").reduce((value, key) => (value == null ? value : value[key]), frame);
  }
  function text(value, none) {
    return value == null ? none : String(value);
  }
  function describe(frame) {
    const entry = frame.entry;
    return "Step " + frame.step + " of " + last + ": " + text(entry.type, "not an envelope") +
      (entry.role ? " from the " + entry.role : "");
  }
  function point(anchor, target) {
    if (target < 1 || target > last) {
      anchor.removeAttribute("href");
      anchor.setAttribute("aria-disabled", "true");
    } else {
      anchor.href = "?step=" + target;
      anchor.removeAttribute("aria-disabled");
    }
  }
  function row(cells) {
    const tr = document.createElement("tr");
    cells.forEach((cell) => {
      const td = document.createElement("td");
      td.append(cell);
      tr.append(td);
    });
    return tr;
  }
  function element(tag, className, content) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    node.textContent = content;
    return node;
  }
  function emptyRow(columns, message) {
    const td = element("td", "empty", message);
    td.colSpan = columns;
    const tr = document.createElement("tr");
    tr.append(td);
    return tr;
  }
  // The same markup as replay.html's, so a step reads alike however it was reached.
  function drawChecks(frame) {
    document.getElementById("replay-checks").replaceChildren(...frame.checks.map((check) => {
      const li = document.createElement("li");
      li.className = "check " + check.status;
      li.dataset.invariant = check.invariant;
      li.append(element("strong", "", check.invariant), " ", element("span", "check-status", check.status));
      [["problems", check.problems], ["notes", check.notes]].forEach(([kind, lines]) => {
        if (!lines.length) return;
        const list = document.createElement("ul");
        list.className = kind;
        lines.forEach((line) => list.append(element("li", "", line)));
        li.append(list);
      });
      return li;
    }));
  }
  function drawTables(frame) {
    const offers = document.querySelector("#replay-offers tbody");
    offers.replaceChildren(...(frame.offers.length ? frame.offers.map((o) =>
      row(["#" + o.seq, String(o.round), o.role, element("code", "", o.type), String(o.price)])
    ) : [emptyRow(5, "No offers yet.")]));
    // A session with issues has a column more: how many the verdict found still open.
    const withTerms = frame.terms !== null;
    const verdicts = document.querySelector("#replay-verdicts tbody");
    verdicts.replaceChildren(...(frame.verdicts.length ? frame.verdicts.map((v) =>
      row([String(v.round), element("span", "verdict " + v.status, v.status), v.rationale,
           text(v.buyer_price, "–"), text(v.merchant_price, "–"), text(v.spread, "–"),
           ...(withTerms ? [text(v.issues_open, "–")] : []), "#" + v.seq])
    ) : [emptyRow(withTerms ? 8 : 7, "No verdict yet.")]));
  }
  // Each side's standing terms, written as replay.html writes them.
  function drawTerms(frame) {
    document.querySelectorAll("[data-terms]").forEach((node) => {
      const terms = frame.terms && frame.terms[node.dataset.terms];
      node.textContent = terms
        ? Object.entries(terms).map(([name, value]) => name + ": " + value).join(", ")
        : "–";
    });
  }

  // The chart keeps the whole log's rounds and price range at every step, so stepping moves
  // the lines, never the axes.
  const everyOffer = frames[last - 1].offers;
  const rounds = Math.max(0, ...everyOffer.map((o) => o.round));
  const prices = everyOffer.map((o) => o.price);
  function series(frame, role) {
    const byRound = new Array(rounds).fill(null);
    frame.offers.forEach((o) => { if (o.role === role) byRound[o.round - 1] = o.price; });
    return byRound;
  }
  function drawChart(frame) {
    const canvas = document.getElementById("replay-chart");
    if (!rounds) {
      document.getElementById("replay-figure").hidden = true;
      return;
    }
    if (typeof Chart === "undefined") return;
    if (chart) {
      chart.data.datasets[0].data = series(frame, "buyer");
      chart.data.datasets[1].data = series(frame, "merchant");
      chart.update("none");
      return;
    }
    const style = getComputedStyle(canvas);
    const colour = (name) => style.getPropertyValue(name).trim();
    const low = Math.min(...prices), high = Math.max(...prices);
    const margin = Math.max((high - low) * 0.1, 1);
    Chart.defaults.color = colour("--muted");
    Chart.defaults.borderColor = colour("--line");
    const line = (label, role, fill) => ({
      label: label, data: series(frame, role), borderColor: colour(fill), backgroundColor: colour(fill),
      pointRadius: 4, spanGaps: false,
    });
    chart = new Chart(canvas, {
      type: "line",
      data: {
        labels: Array.from({ length: rounds }, (_, i) => "Round " + (i + 1)),
        datasets: [line("Buyer", "buyer", "--buyer"), line("Merchant", "merchant", "--merchant")],
      },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: { y: { suggestedMin: low - margin, suggestedMax: high + margin,
                       title: { display: true, text: "Price" } } },
        plugins: { legend: { position: "bottom" } },
      },
    });
  }

  function show(k, announce) {
    step = Math.min(Math.max(k, 1), last);
    const frame = frames[step - 1];
    slider.value = String(step);
    slider.setAttribute("aria-valuetext", describe(frame));
    position.textContent = step + " of " + last;
    point(prev, step - 1);
    point(next, step + 1);
    document.querySelectorAll("[data-field]").forEach((node) => {
      const value = text(at(frame, node.dataset.field), node.dataset.none || "–");
      if (node.hasAttribute("data-state")) {
        node.textContent = value.toLowerCase();
        node.className = "state " + value.toLowerCase();
      } else {
        node.textContent = value;
      }
      if (node.tagName === "TIME") node.setAttribute("datetime", text(frame.entry.received_at, ""));
    });
    drawChecks(frame);
    drawTables(frame);
    drawTerms(frame);
    drawChart(frame);
    if (announce) announcer.textContent = describe(frame);
    const url = new URL(window.location.href);
    url.searchParams.set("step", String(step));
    window.history.replaceState(null, "", url);
  }

  // The slider moves itself on its own keys; the page's keys work from anywhere else but a field.
  slider.addEventListener("input", () => show(Number(slider.value), false));
  [[prev, -1], [next, 1]].forEach(([anchor, delta]) => anchor.addEventListener("click", (event) => {
    event.preventDefault();
    if (anchor.hasAttribute("href")) show(step + delta, true);
  }));
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const target = event.target;
    if (target instanceof Element && target.closest("input, select, textarea, [contenteditable]")) return;
    const moves = { ArrowLeft: step - 1, ArrowRight: step + 1, Home: 1, End: last };
    if (!(event.key in moves)) return;
    event.preventDefault();
    show(moves[event.key], true);
  });
  function start() {
    drawChart(frames[step - 1]);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

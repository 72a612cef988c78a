// The overview's charts, drawn from the same figures as the tables beside them.
document.addEventListener("DOMContentLoaded", () => {
  "use strict";
  const source = document.getElementById("overview-data");
  if (!source || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  const two = (n) => String(n).padStart(2, "0");
  // Each hour's start in the viewer's zone, as times.js writes the table's.
  const hours = data.hours.map((iso) => { const d = new Date(iso); return `${two(d.getHours())}:${two(d.getMinutes())}`; });
  const hourly = document.getElementById("hourly-chart");
  if (hourly) {
    new Chart(hourly, {
      type: "bar",
      data: { labels: hours, datasets: [{ label: "Agreements", data: data.agreements, backgroundColor: "#2b6cb0" }] },
      options: { animation: false, maintainAspectRatio: false, plugins: { legend: { display: false } },
                 scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
    });
  }
  const violations = document.getElementById("violations-chart");
  if (violations) {
    new Chart(violations, {
      type: "bar",
      data: { labels: data.agents, datasets: [{ label: "Sessions with a violation (%)", data: data.rates, backgroundColor: "#b3261e" }] },
      options: { animation: false, maintainAspectRatio: false, indexAxis: "y", plugins: { legend: { display: false } },
                 scales: { x: { beginAtZero: true, max: 100 } } },
    });
  }
});

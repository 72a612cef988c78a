// <time data-relative> elements (the `when` filter) read "3 minutes ago" instead of their exact
// UTC time, which stays in their title. Kept current once a minute, so nothing finer than a
// minute is shown; rows that live updates or htmx add later are rewritten as they arrive.
// <time data-local> elements (the `exact` filter) show their moment in the viewer's zone, which
// [data-zone] names; the server can only write UTC, so without script they stay in UTC.
(function () {
  "use strict";
  const SELECTOR = "time[data-relative]";
  const LOCAL = "time[data-local]";
  const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const UNITS = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60]];
  const phrase = new Intl.RelativeTimeFormat("en", { numeric: "always" });

  function relative(moment, now) {
    const seconds = (moment - now) / 1000;
    for (const [unit, size] of UNITS) {
      if (Math.abs(seconds) >= size) return phrase.format(Math.trunc(seconds / size), unit);
    }
    return seconds < 0 ? "less than a minute ago" : "in less than a minute";
  }

  function two(n) { return String(n).padStart(2, "0"); }

  function local(moment, precision) {
    const d = new Date(moment);
    const day = `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
    const minutes = `${two(d.getHours())}:${two(d.getMinutes())}`;
    if (precision === "minutes") return `${day} ${minutes}`;
    if (precision === "time") return `${minutes}:${two(d.getSeconds())}`;
    return `${day} ${minutes}:${two(d.getSeconds())}`;
  }

  function found(root, selector) {
    return root.matches && root.matches(selector) ? [root] : root.querySelectorAll(selector);
  }

  function localise(root) {
    found(root, LOCAL).forEach((time) => {
      const moment = Date.parse(time.getAttribute("datetime"));
      if (!Number.isNaN(moment)) time.textContent = local(moment, time.dataset.local);
    });
    found(root, "[data-zone]").forEach((zone) => { zone.textContent = ZONE; });
  }

  function render(root) {
    const now = Date.now();
    found(root, SELECTOR).forEach((time) => {
      const moment = Date.parse(time.getAttribute("datetime"));
      if (Number.isNaN(moment)) return;
      const text = relative(moment, now);
      // Only on change, so a live region around it does not announce the same words again.
      if (time.textContent !== text) time.textContent = text;
    });
  }

  localise(document);
  render(document);
  setInterval(() => render(document), 60000);
  new MutationObserver((changes) => {
    changes.forEach((change) => change.addedNodes.forEach((node) => {
      if (node.nodeType === Node.ELEMENT_NODE) { localise(node); render(node); }
    }));
  }).observe(document.body, { childList: true, subtree: true });
})();

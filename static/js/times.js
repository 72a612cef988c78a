// <time data-relative> elements (the `when` filter) read "3 minutes ago" instead of their exact
// UTC time, which stays in their title. Kept current once a minute, so nothing finer than a
// minute is shown; rows that live updates or htmx add later are rewritten as they arrive.
(function () {
  "use strict";
  const SELECTOR = "time[data-relative]";
  const UNITS = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60]];
  const phrase = new Intl.RelativeTimeFormat("en", { numeric: "always" });

  function relative(moment, now) {
    const seconds = (moment - now) / 1000;
    for (const [unit, size] of UNITS) {
      if (Math.abs(seconds) >= size) return phrase.format(Math.trunc(seconds / size), unit);
    }
    return seconds < 0 ? "less than a minute ago" : "in less than a minute";
  }

  function render(root) {
    const now = Date.now();
    const found = root.matches && root.matches(SELECTOR) ? [root] : root.querySelectorAll(SELECTOR);
    found.forEach((time) => {
      const moment = Date.parse(time.getAttribute("datetime"));
      if (Number.isNaN(moment)) return;
      const text = relative(moment, now);
      // Only on change, so a live region around it does not announce the same words again.
      if (time.textContent !== text) time.textContent = text;
    });
  }

  render(document);
  setInterval(() => render(document), 60000);
  new MutationObserver((changes) => {
    changes.forEach((change) => change.addedNodes.forEach((node) => {
      if (node.nodeType === Node.ELEMENT_NODE) render(node);
    }));
  }).observe(document.body, { childList: true, subtree: true });
})();

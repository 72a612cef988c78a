// After a refused submit the page opens on the form's error summary: focus goes there, so
// keyboard and screen reader users start from the list of what to fix. The summary itself is
// in the HTML, and reads the same without script.
(function () {
  "use strict";
  const summary = document.querySelector("[data-error-summary]");
  if (summary) summary.focus();
})();

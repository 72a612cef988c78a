// A table wider than a narrow screen scrolls in its own box (app.css), and so may a long <pre>.
// A keyboard scrolls a box only once it has focus, so a box that scrolls is made focusable, and
// only while it scrolls: no tab stop is added where nothing needs scrolling. Checked again when
// the window is resized, a <details> opens or closes, and the main content changes (htmx swaps,
// live rows): then as soon as the script that changed it is done.
(function () {
  "use strict";
  const SELECTOR = "main table, main pre";
  const SCROLLING = ["auto", "scroll"];

  function scrolls(box) {
    const style = getComputedStyle(box);
    return (SCROLLING.includes(style.overflowX) && box.scrollWidth > box.clientWidth) ||
      (SCROLLING.includes(style.overflowY) && box.scrollHeight > box.clientHeight);
  }

  function mark() {
    document.querySelectorAll(SELECTOR).forEach((box) => {
      if (scrolls(box)) {
        box.tabIndex = 0;
        box.dataset.scrollFocus = "";
      } else if ("scrollFocus" in box.dataset) {
        box.removeAttribute("tabindex");
        delete box.dataset.scrollFocus;
      }
    });
  }

  mark();
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true);  // toggle does not bubble
  const main = document.querySelector("main");
  if (main) new MutationObserver(mark).observe(main, { childList: true, subtree: true });
})();

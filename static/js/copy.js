// A [data-copy] button copies its field's value; a [data-copy-text] button copies the text it
// carries (a value the page shows shortened, as a key's kid). Each stays hidden without
// script, where the field itself is selected and copied by hand. Where the clipboard is
// refused, the field is selected, or the carried text is written into the status and selected
// there, and the status says how to finish.
(function () {
  "use strict";
  // `byHand(say, status)` leaves the text selected for the user to copy, and says so.
  function copier(button, text, byHand) {
    const status = button.parentElement.querySelector(".copy-status");
    function say(words) { if (status) status.textContent = words; }
    button.hidden = false;
    button.addEventListener("click", () => {
      if (!navigator.clipboard) { byHand(say, status); return; }
      navigator.clipboard.writeText(text()).then(() => say("Copied."), () => byHand(say, status));
    });
  }

  document.querySelectorAll("button[data-copy]").forEach((button) => {
    const field = document.getElementById(button.dataset.copy);
    if (!field) return;
    // On a click too: the mouse's button, let go, may undo a selection made on focus.
    ["focus", "click"].forEach((kind) => field.addEventListener(kind, () => field.select()));
    copier(button, () => field.value, (say) => {
      field.focus();
      field.select();
      say("Selected: press Ctrl+C (⌘C) to copy.");
    });
  });

  document.querySelectorAll("button[data-copy-text]").forEach((button) => {
    const text = button.dataset.copyText;
    copier(button, () => text, (say, status) => {
      if (!status) return;
      say(text);
      const range = document.createRange();
      range.selectNodeContents(status);
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
    });
  });
})();

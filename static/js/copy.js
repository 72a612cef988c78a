// A [data-copy] button copies its field's value. It stays hidden without script, where the
// field itself is selected and copied by hand; where the clipboard is refused, the field is
// selected and the status says how to finish.
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach((button) => {
    const field = document.getElementById(button.dataset.copy);
    const status = button.parentElement.querySelector(".copy-status");
    if (!field) return;
    function say(text) { if (status) status.textContent = text; }
    function byHand() {
      field.focus();
      field.select();
      say("Selected: press Ctrl+C (⌘C) to copy.");
    }
    button.hidden = false;
    // On a click too: the mouse's button, let go, may undo a selection made on focus.
    ["focus", "click"].forEach((kind) => field.addEventListener(kind, () => field.select()));
    button.addEventListener("click", () => {
      if (!navigator.clipboard) { byHand(); return; }
      navigator.clipboard.writeText(field.value).then(() => say("Copied."), byHand);
    });
  });
})();

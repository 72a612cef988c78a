// The agent form shows the chosen strategy's parameters only, and the settle round only when
// settling from a round. Without script every group shows under its strategy's name; either
// way the server reads the chosen strategy's fields alone.
(function () {
  "use strict";
  const strategy = document.getElementById("id_strategy");
  const groups = document.querySelectorAll("[data-strategy]");
  const settle = document.querySelectorAll("input[name=settle_when]");
  const round = document.querySelector("[data-settle-round]");

  function show() {
    groups.forEach((group) => { group.hidden = group.dataset.strategy !== strategy.value; });
    const when = document.querySelector("input[name=settle_when]:checked");
    if (round) round.hidden = !when || when.value !== "round";
  }
  if (!strategy) return;
  strategy.addEventListener("change", show);
  settle.forEach((radio) => radio.addEventListener("change", show));
  show();
})();

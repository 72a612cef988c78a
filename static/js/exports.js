// The export form shows only the input of the chosen kind. Without script every input shows,
// its label saying which kind it is for; either way the server reads the chosen kind's alone.
(function () {
  "use strict";
  const kinds = document.querySelectorAll("#export-form input[name=kind]");
  const inputs = document.querySelectorAll("#export-form [data-kind]");

  function show() {
    const chosen = document.querySelector("#export-form input[name=kind]:checked");
    inputs.forEach((input) => { input.hidden = !chosen || input.dataset.kind !== chosen.value; });
  }
  kinds.forEach((radio) => radio.addEventListener("change", show));
  show();
})();

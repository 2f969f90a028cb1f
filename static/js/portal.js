/* Every page: a table too wide for the screen scrolls sideways in its own box; such a box
   takes the keyboard focus (arrow keys scroll it) and is named after its card's heading. */
/* Clock times the pages write themselves (the dashboard's and the previews' "updated"): UTC
   and 24-hour, as every time the server renders. */
window.Portal = {
  utcTime: function () { return new Date().toISOString().slice(11, 19) + " UTC"; },
};
(function () {
  "use strict";
  function label(box) {
    var card = box.closest(".card, section");
    var heading = card && card.querySelector("h1, h2, h3");
    return (heading ? heading.textContent.trim() + ": " : "") + "table, scrolls sideways";
  }
  function mark() {
    document.querySelectorAll(".table-wrap, .card > .table").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", label(box));
      } else if (box.getAttribute("role") === "region") {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
    });
  }
  mark();
  window.addEventListener("resize", mark);
})();

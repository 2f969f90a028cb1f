// Forms with data-confirm="question" ask it before they submit (no inline handlers: the
// Content-Security-Policy allows scripts from static files only).
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

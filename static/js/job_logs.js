// The job page's log view: asks GET /api/v1/jobs/<id>/logs/ (session auth) for the chosen pod
// and shows its last lines and how it ended. The form is a live part of the page (job_live.js
// swaps it in as pods start), so its submit is listened for on the box around it. No inline
// handlers: the CSP allows static scripts.
(function () {
  var box = document.getElementById("job-logs");
  if (!box) { return; }
  var out = box.querySelector("pre");
  var outcome = box.querySelector("[data-outcome]");
  function show(url) {
    out.hidden = false;
    out.textContent = "loading...";
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.json().then(function (body) { return [response.ok, body]; }); })
      .then(function (result) {
        var ok = result[0], body = result[1];
        if (!ok) {
          out.textContent = body.detail || JSON.stringify(body.errors || body);
          outcome.textContent = "";
          return;
        }
        out.textContent = body.lines.length ? body.lines.join("\n") : "(no log: the pod is gone or wrote nothing)";
        outcome.textContent = body.phase === null ? "pod gone" :
          body.phase + (body.exit_code === null ? "" : ", exit code " + body.exit_code) +
          (body.reason ? " (" + body.reason + ")" : "");
      })
      .catch(function () { out.textContent = "the log could not be fetched"; });
  }
  // A pod list arriving where there was none: the log box shows what to do.
  new MutationObserver(function () {
    if (box.querySelector("form")) { out.hidden = false; }
  }).observe(box, { childList: true, subtree: true });
  box.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form || form.tagName !== "FORM") { return; }
    event.preventDefault();
    var params = new URLSearchParams(new FormData(form));
    show(form.getAttribute("action") + "?" + params.toString());
  });
})();

// The job page's log view: asks GET /api/v1/jobs/<id>/logs/ (session auth) for the chosen pod
// and shows its last lines and how it ended. No inline handlers: the CSP allows static scripts.
(function () {
  var box = document.getElementById("job-logs");
  if (!box) { return; }
  var form = box.querySelector("form");
  if (!form) { return; }
  var out = box.querySelector("pre");
  var outcome = box.querySelector("[data-outcome]");
  function show(url) {
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
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var params = new URLSearchParams(new FormData(form));
    show(form.getAttribute("action") + "?" + params.toString());
  });
})();

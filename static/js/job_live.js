// The job page keeps itself current: every few seconds it asks /jobs/<id>/live/ for the parts
// that change (state, reason, placement, the pods to read logs of, restarts, preemptions) and
// swaps in each part whose HTML changed, so a button or link the user is on stays put when
// nothing moved. It stops once the job has ended (X-Job-Final), pauses while the tab is
// hidden, and says so when it cannot go on.
// Hand-written rather than htmx: one fetch and a swap by id is all the page needs.
(function () {
  "use strict";
  var page = document.getElementById("job-page");
  if (!page || page.getAttribute("data-final") === "1") { return; }
  var url = page.getAttribute("data-live-url");
  var note = document.getElementById("live-note");
  var PERIOD_MS = 4000;
  var timer = null;
  var busy = false;

  function say(text) { if (note) { note.textContent = text; } }

  // Screen readers hear the state when it changes, not every refreshed "as of" time.
  function announce(before) {
    var status = document.getElementById("job-status");
    var live = document.getElementById("live-announce");
    if (status && live && status.textContent !== before) {
      live.textContent = "Job state: " + status.textContent;
    }
  }

  // What the user chose or typed in a part (the log's pod and line count) stays chosen when
  // the part is swapped for a newer one that still offers it.
  function keepChoices(from, to) {
    Array.prototype.forEach.call(from.querySelectorAll("select[name], input[name]"), function (field) {
      var twin = to.querySelector(field.tagName.toLowerCase() + "[name='" + field.name + "']");
      if (!twin) { return; }
      if (field.tagName === "SELECT" && !twin.querySelector("option[value='" + CSS.escape(field.value) + "']")) { return; }
      twin.value = field.value;
    });
  }

  function swap(html) {
    var status = document.getElementById("job-status");
    var before = status ? status.textContent : "";
    var parsed = new DOMParser().parseFromString(html, "text/html");
    Array.prototype.forEach.call(parsed.body.children, function (part) {
      var current = part.id && document.getElementById(part.id);
      if (current && current.outerHTML !== part.outerHTML) {
        var fresh = document.importNode(part, true);
        keepChoices(current, fresh);
        current.replaceWith(fresh);
      }
    });
    announce(before);
  }

  function stop(text) {
    window.clearInterval(timer);
    timer = null;
    page.setAttribute("data-final", "1");
    say(text);
  }

  function poll() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" }, redirect: "manual" })
      .then(function (response) {
        if (response.type === "opaqueredirect" || !response.ok) {
          stop(response.status === 404 ? "This job is no longer visible to you." :
            "Live updates stopped (signed out or the portal is unreachable): reload the page.");
          return null;
        }
        var final = response.headers.get("X-Job-Final") === "1";
        return response.text().then(function (html) {
          swap(html);
          page.setAttribute("data-updated", String(Date.now()));
          if (final) { stop("The job has ended."); }
        });
      })
      .catch(function () { say("Could not reach the portal; trying again."); })
      .then(function () { busy = false; });
  }

  timer = window.setInterval(poll, PERIOD_MS);
  document.addEventListener("visibilitychange", function () { if (!document.hidden && timer) { poll(); } });
})();

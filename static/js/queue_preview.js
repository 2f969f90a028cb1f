/* Live preview of deserved shares on the queue and tenant edit pages (debounced fetch to a
   JSON view). Rows are tenants, each followed by its queues (or queues alone, flat). */
(function () {
  "use strict";
  var form = document.querySelector("form[data-preview-url]");
  var table = document.getElementById("preview");
  var status = document.getElementById("preview-status");
  if (!form || !table) { return; }
  var timer = null;
  var sequence = 0;
  var colours = {};

  /* A swatch of the queue's colour (the dashboards' palette) before each queue's name. */
  function decorate() {
    Array.prototype.forEach.call(table.querySelectorAll("tr[data-swatch]"), function (tr) {
      var colour = colours[tr.dataset.swatch];
      var first = tr.cells[0];
      if (!colour || !first || first.querySelector(".swatch")) { return; }
      var swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.setAttribute("aria-hidden", "true");
      swatch.style.backgroundColor = colour;
      first.insertBefore(swatch, first.firstChild);
    });
  }

  var coloursUrl = document.body.dataset.queueColours;
  if (coloursUrl) {
    fetch(coloursUrl, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : { colours: {} }; })
      .then(function (data) { colours = data.colours || {}; decorate(); })
      .catch(function () { /* no swatches: the table still reads */ });
  }

  function fmt(value, digits) { return Number(value).toFixed(digits); }

  function cell(text, className) {
    var td = document.createElement("td");
    td.className = className === undefined ? "num" : className;
    td.textContent = text;
    return td;
  }

  function render(rows) {
    var body = table.tBodies[0];
    body.innerHTML = "";
    rows.forEach(function (row) {
      var tr = document.createElement("tr");
      tr.dataset.kind = row.kind;
      tr.dataset.name = row.name;
      tr.className = "preview-" + row.kind + (row.edited ? " is-self" : "");
      // queues, and the other tenants' combined row, have a colour on the dashboards
      if (row.kind === "queue" || row.tenant === "combined") { tr.dataset.swatch = row.name; }
      var name = cell("", "");
      var label = document.createElement(row.kind === "tenant" ? "strong" : "span");
      label.textContent = row.name;
      if (row.kind !== "tenant") { label.className = "indent"; }
      name.appendChild(label);
      tr.appendChild(name);
      tr.appendChild(cell(row.weight));
      tr.appendChild(cell(row.guarantee_gpus));
      tr.appendChild(cell(fmt(row.demand_gpus, 0)));
      tr.appendChild(cell(fmt(row.deserved_now, 1)));
      var delta = row.deserved_after - row.deserved_now;
      var after = cell(fmt(row.deserved_after, 1), "num after");
      if (delta > 0.05) { after.classList.add("preview-cell-up"); after.textContent += " (+" + fmt(delta, 1) + ")"; }
      if (delta < -0.05) { after.classList.add("preview-cell-down"); after.textContent += " (" + fmt(delta, 1) + ")"; }
      tr.appendChild(after);
      body.appendChild(tr);
    });
    decorate();
  }

  /* The phone's line under the form: the edited row's deserved GPUs now and after. */
  var summary = document.querySelector("#preview-summary span");
  function summarize(refused) {
    if (!summary) { return; }
    var row = table.querySelector("tr.is-self");
    if (refused || !row) {
      summary.textContent = refused ? "Save would refuse these values; see the fields marked." : "";
      return;
    }
    var cells = row.cells;
    var now = cells[4].textContent;
    var after = cells[5].textContent.split(" ")[0];
    summary.textContent = row.dataset.name + " deserves " + now + " GPUs now" +
      (after === now ? ", the same after the change" : ", " + after + " after the change");
  }
  summarize(false);

  /* The After column of values Save would refuse would show a state that cannot be: it
     reads a dash until the values are valid again. */
  function withdraw() {
    Array.prototype.forEach.call(table.querySelectorAll("td.after"), function (td) {
      td.classList.remove("preview-cell-up", "preview-cell-down");
      td.textContent = "–";
    });
  }

  /* The preview view's form errors, under their fields as the Save would show them, so
     "fix the highlighted values" points at something; cleared once the values are valid. */
  function showErrors(errors) {
    Array.prototype.forEach.call(form.querySelectorAll(".preview-error"), function (node) {
      var field = node.closest(".field");
      if (field) { field.classList.remove("has-error"); }
      node.remove();
    });
    var unplaced = [];
    Object.keys(errors).forEach(function (name) {
      var input = form.elements[name];
      var field = input && input.closest && input.closest(".field");
      if (!field) {
        errors[name].forEach(function (error) { unplaced.push(error.message); });
        return;
      }
      field.classList.add("has-error");
      errors[name].forEach(function (error) {
        var node = document.createElement("div");
        node.className = "error preview-error";
        node.textContent = error.message;
        field.appendChild(node);
      });
    });
    return unplaced;
  }

  function refresh() {
    var params = new URLSearchParams(new FormData(form));
    params.delete("csrfmiddlewaretoken");
    var mine = ++sequence;
    status.textContent = "computing…";
    fetch(form.dataset.previewUrl + "?" + params.toString(), { credentials: "same-origin" })
      .then(function (response) { return response.json().then(function (data) { return [response.ok, data]; }); })
      .then(function (result) {
        if (mine !== sequence) { return; }
        var unplaced = showErrors(result[0] ? {} : result[1].errors || {});
        if (!result[0]) {
          // Save would refuse these values: no shares are drawn for them.
          withdraw();
          summarize(true);
          status.textContent = unplaced.length ? unplaced.join(" ") : "fix the highlighted values to preview";
          return;
        }
        render(result[1].queues);
        summarize(false);
        status.textContent = "preview updated " + window.Portal.utcTime();
      })
      .catch(function () { status.textContent = "preview unavailable"; });
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  }
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
})();

// The submit form's roles: "+ Add role" appends a copy of the empty role form, numbered next,
// named after the roles already there (worker, worker-2, worker-3, ...) so it never repeats a
// name; the only role left has no "Remove" box; the button stops at the most roles a job may have.
(function () {
  "use strict";
  var total = document.getElementById("id_tasks-TOTAL_FORMS");
  var roles = document.getElementById("roles");
  var button = document.getElementById("add-role");
  var max = parseInt(button.getAttribute("data-max"), 10);
  var atMost = document.getElementById("role-count-note");

  function fieldsets() { return Array.prototype.slice.call(roles.querySelectorAll("fieldset.role")); }
  function removed(fieldset) {
    var box = fieldset.querySelector("input[name$='-DELETE']");
    return box && box.checked;
  }

  function freeName() {
    var taken = {};
    roles.querySelectorAll("input[name$='-name']").forEach(function (input) { taken[input.value.trim()] = true; });
    if (!taken.worker) { return "worker"; }
    for (var n = 2; ; n++) { if (!taken["worker-" + n]) { return "worker-" + n; } }
  }

  function refresh() {
    var kept = fieldsets().filter(function (fieldset) { return !removed(fieldset); });
    fieldsets().forEach(function (fieldset) {
      var box = fieldset.querySelector(".role-remove");
      // The last role kept cannot be removed too; a removed role can always be taken back.
      if (box) { box.hidden = kept.length === 1 && !removed(fieldset); }
    });
    var full = fieldsets().length >= max;
    button.disabled = full;
    atMost.hidden = !full;
  }

  button.addEventListener("click", function () {
    var index = parseInt(total.value, 10);
    if (index >= max) { return; }
    var holder = document.createElement("div");
    holder.innerHTML = document.getElementById("role-template").innerHTML.replace(/__prefix__/g, String(index));
    var fieldset = holder.firstElementChild;
    fieldset.querySelector("legend").textContent = "Role " + (index + 1);
    var nameInput = fieldset.querySelector("input[name$='-name']");
    if (nameInput) { nameInput.value = freeName(); }
    roles.appendChild(fieldset);
    total.value = index + 1;
    refresh();
    if (nameInput) { nameInput.focus(); nameInput.select(); }
  });
  roles.addEventListener("change", function (event) {
    if (event.target.name && /-DELETE$/.test(event.target.name)) { refresh(); }
  });
  refresh();
})();

// The submit form's "add a role" button: a copy of the empty role form, numbered next.
(function () {
  var total = document.getElementById("id_tasks-TOTAL_FORMS");
  document.getElementById("add-role").addEventListener("click", function () {
    var html = document.getElementById("role-template").innerHTML.replace(/__prefix__/g, total.value);
    var holder = document.createElement("div");
    holder.innerHTML = html;
    var nameInput = holder.querySelector("input[name$='-name']");
    if (nameInput) { nameInput.value = "worker"; }
    document.getElementById("roles").appendChild(holder.firstElementChild);
    total.value = parseInt(total.value, 10) + 1;
  });
})();

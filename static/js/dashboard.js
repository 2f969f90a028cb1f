/* Dashboard: fetch each chart's figure from its JSON endpoint and redraw with Plotly.react. */
(function () {
  "use strict";
  var root = document.getElementById("dashboard");
  if (!root || !window.Plotly) { return; }
  var range = root.dataset.range;
  var tenant = root.dataset.tenant || "";
  var refreshMs = parseInt(root.dataset.refresh, 10) * 1000;
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
  var charts = root.dataset.charts.split(",");
  var stamp = document.getElementById("dashboard-updated");

  function url(chart) {
    var query = "?range=" + encodeURIComponent(range);
    if (tenant) { query += "&tenant=" + encodeURIComponent(tenant); }
    return root.dataset.url.replace("CHART", chart) + query;
  }

  // Drill-down: a click on a tenant's bar shows that tenant's queues on the other charts.
  function drillDown(node) {
    if (node.dataset.drill) { return; }
    node.dataset.drill = "1";
    node.on("plotly_click", function (event) {
      var point = (event.points || []).filter(function (p) { return p.customdata !== undefined; })[0];
      if (!point) { return; }
      window.location.search = "?range=" + encodeURIComponent(range) + "&tenant=" + encodeURIComponent(point.customdata);
    });
  }

  // The occupancy map's detail for a tap as well as a hover: a touch screen has no hover.
  function cellDetail(node) {
    if (node.dataset.detail) { return; }
    node.dataset.detail = "1";
    var out = document.getElementById("occupancy-detail");
    function show(event) {
      var point = (event.points || [])[0];
      if (!point || !out || point.text === undefined || point.text === "") { return; }
      out.textContent = point.y + " GPU " + point.x + ": " + point.text;
    }
    node.on("plotly_click", show);
    node.on("plotly_hover", show);
  }

  function draw(id, figure) {
    var node = document.getElementById(id);
    if (!node || !figure) { return; }
    var heading = document.getElementById(id.replace("chart-", "title-"));
    if (heading && figure.layout && figure.layout.title) {
      // The title goes in the card's heading (it wraps on a phone; screen readers find it).
      heading.textContent = figure.layout.title.text;
      figure.layout.title = { text: "" };
      figure.layout.margin = Object.assign({}, figure.layout.margin, { t: 10 });
    }
    if (figure.layout && node.clientWidth < 600) {
      // A phone: rotated queue names need their room (they were cut to "nlp-interac") and
      // the legend goes to the figure's foot, under them instead of over them.
      figure.layout.xaxis = Object.assign({}, figure.layout.xaxis, { automargin: true });
      if (figure.layout.legend && figure.layout.legend.orientation === "h") {
        figure.layout.legend = Object.assign({}, figure.layout.legend, { yref: "container", y: 0, yanchor: "bottom" });
      }
    }
    if (figure.layout && figure.layout.height) {
      // Sized to its content (the occupancy map grows with the node count): no empty band.
      node.style.height = figure.layout.height + "px";
    }
    Plotly.react(node, figure.data, figure.layout, config);
  }

  function setText(selector, text) {
    var cell = document.querySelector(selector);
    if (cell && text !== undefined) { cell.textContent = text; }
  }

  function apply(chart, payload) {
    if (chart === "pending") {
      draw("chart-pending", payload.figure);
      draw("chart-waits", payload.waits);
      return;
    }
    draw("chart-" + chart, payload.figure);
    if (chart === "tenants") { drillDown(document.getElementById("chart-tenants")); }
    if (chart === "occupancy") { cellDetail(document.getElementById("chart-occupancy")); }
    if (chart === "occupancy" && payload.free_blocks) {
      Object.keys(payload.free_blocks).forEach(function (size) {
        setText("#free-blocks [data-size='" + size + "']", payload.free_blocks[size]);
        setText("#free-blocks [data-label='" + size + "']", (payload.free_block_labels || {})[size]);
      });
      setText("#shared-gpus", payload.shared_gpus);
    }
  }

  function refresh() {
    var jobs = charts.map(function (chart) {
      return fetch(url(chart), { credentials: "same-origin" })
        .then(function (response) { if (!response.ok) { throw new Error(response.status); } return response.json(); })
        .then(function (payload) { apply(chart, payload); });
    });
    Promise.all(jobs)
      .then(function () { stamp.textContent = "updated " + window.Portal.utcTime(); root.dataset.loaded = "1"; })
      .catch(function () { stamp.textContent = "update failed; retrying"; });
  }

  refresh();
  setInterval(function () { if (!document.hidden) { refresh(); } }, refreshMs);
})();

// Usage charts with uPlot, started from data attributes (no inline scripts: the portal's
// Content-Security-Policy allows scripts from its own files only).
// - <div data-chart="ID" data-axis="GPU-hours">: draws the JSON of <script id="ID"
//   type="application/json"> ({x: [...], series: [{label, values}]});
// - <div data-series-url="URL" data-memory-chart="ID">: loads a workload's utilisation and
//   memory series and draws them here and in #ID.
(function () {
  "use strict";

  var palette = ["#0a58ca", "#1a7f37", "#bf8700", "#8250df", "#b42318", "#57606a"];

  // One colour per GPU class (or per thing measured): its "allocated" line dashed and thin,
  // its "used" line solid and thick, so a pair is read together in the legend.
  function chart(target, data, opts) {
    var series = [{}];
    var columns = [data.x];
    var colours = {};
    (data.series || []).forEach(function (s) {
      var match = / (allocated|used)$/.exec(s.label);
      var subject = match ? s.label.slice(0, match.index) : s.label;
      var used = !match || match[1] === "used";
      if (!(subject in colours)) {
        colours[subject] = palette[Object.keys(colours).length % palette.length];
      }
      series.push({
        label: match ? subject + ": " + (used ? "used (solid)" : "allocated (dashed)") : s.label,
        stroke: colours[subject],
        fill: used && match ? colours[subject] + "22" : undefined,
        dash: used ? [] : [6, 4],
        width: used ? 2.5 : 1.5,
        value: function (u, v) {
          return v == null ? "–" : v.toFixed(2) + ((opts && opts.unit) || "");
        },
      });
      columns.push(s.values);
    });
    var width = Math.max(320, target.clientWidth || 800);
    return new window.uPlot(
      {
        width: width,
        height: (opts && opts.height) || 260,
        series: series,
        axes: [{}, {label: (opts && opts.axis) || ""}],
        scales: (opts && opts.scales) || {},
      },
      columns,
      target
    );
  }

  function say(target, text) {
    var p = document.createElement("p");
    p.className = "muted";
    p.textContent = text;
    target.replaceChildren(p);
  }

  function drawWorkload(target) {
    fetch(target.dataset.seriesUrl, {credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (d) {
        target.replaceChildren();
        if (d.error || !d.x || !d.x.length) {
          say(target, d.error || "No samples yet.");
          return;
        }
        chart(target, {x: d.x, series: [{label: "GPU utilisation", values: d.utilisation}]},
              {axis: "%", unit: "%", scales: {y: {range: [0, 100]}}, height: 200});
        var memory = document.getElementById(target.dataset.memoryChart);
        if (memory) {
          // In GiB, as every page shows GPU memory (an H200's 141 GiB, not 144384 MiB).
          var gib = (d.memory_mib || []).map(function (v) {
            return v === null ? null : Math.round(v / 1024 * 10) / 10;
          });
          chart(memory, {x: d.x, series: [{label: "GPU memory used", values: gib}]},
                {axis: "GiB", unit: " GiB", height: 160});
        }
      })
      .catch(function () { say(target, "The series could not be loaded."); });
  }

  function start() {
    document.querySelectorAll("[data-chart]").forEach(function (target) {
      var source = document.getElementById(target.dataset.chart);
      if (source) {
        chart(target, JSON.parse(source.textContent), {axis: target.dataset.axis || ""});
      }
    });
    document.querySelectorAll("[data-series-url]").forEach(drawWorkload);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();

// Draws every chart of the page from its JSON description (registry/web/charts.py) with plotly.js,
// which the server hands out from the plotly package: nothing is fetched from elsewhere.
document.querySelectorAll("div.chart[data-chart]").forEach(function (div) {
  var source = document.getElementById("fig-" + div.dataset.chart);
  if (!source) return;
  var fig = JSON.parse(source.textContent);
  Plotly.newPlot(div, fig.data, fig.layout, {displaylogo: false, responsive: true});
});

// The two switches show what the page already holds: the findings (a card each, per grading)
// and the counts of each grading, with and without info findings, and colour the grid's cells by
// the worst finding shown in them. Nothing is fetched or computed from capture text.
(function () {
  var info = document.getElementById("show-info");
  var shared = document.getElementById("shared-graph");
  function apply() {
    var g = shared.checked ? "shared" : "per-rank";
    var i = info.checked ? "1" : "0";
    document.querySelectorAll(".headline-set").forEach(function (el) {
      el.hidden = !(el.dataset.grading === g && el.dataset.info === i);
    });
    var shown = 0;
    document.querySelectorAll("article.finding").forEach(function (el) {
      el.hidden = el.dataset.grading !== g || (el.dataset.sev === "info" && !info.checked);
      if (!el.hidden) shown++;
    });
    document.getElementById("no-findings").hidden = shown > 0;
    document.querySelectorAll("td.cell").forEach(function (el) {
      var sev = el.getAttribute("data-sev-" + g);
      el.classList.remove("sev-error", "sev-warning", "sev-info");
      if (sev && (sev !== "info" || info.checked)) el.classList.add("sev-" + sev);
    });
  }
  info.addEventListener("change", apply);
  shared.addEventListener("change", apply);
  apply();
})();

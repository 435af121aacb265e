// The two switches show what the page already holds: the findings and the counts of each
// grading, with and without info findings. Nothing is fetched or computed from capture text.
(function () {
  var info = document.getElementById("show-info");
  var shared = document.getElementById("shared-graph");
  function apply() {
    var g = shared.checked ? "shared" : "per-rank";
    var i = info.checked ? "1" : "0";
    document.querySelectorAll(".headline-set").forEach(function (el) {
      el.hidden = !(el.dataset.grading === g && el.dataset.info === i);
    });
    document.querySelectorAll(".finding").forEach(function (el) {
      var sev = el.getAttribute("data-sev-" + g);
      el.hidden = !sev || (sev === "info" && !info.checked);
      if (sev) { el.classList.remove("sev-error", "sev-warning", "sev-info"); el.classList.add("sev-" + sev); }
      el.querySelectorAll("[data-grading]").forEach(function (part) { part.hidden = part.dataset.grading !== g; });
    });
  }
  info.addEventListener("change", apply);
  shared.addEventListener("change", apply);
  apply();
})();
